package dialect_test

import (
	"fmt"

	"github.com/belay-run/belay/dialect"
)

func ExampleRewriteModel() {
	out, _ := dialect.RewriteModel([]byte(`{"model": "smart", "messages": [], "x": 1}`), "gpt-4o")
	fmt.Println(string(out))
	// Output: {"model": "gpt-4o", "messages": [], "x": 1}
}
