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

// A prompt estimate walks the body once: text counts by its decoded
// length, a schema by its JSON without whitespace, settings not at all.
func ExamplePromptSize() {
	body := []byte(`{"model": "m", "temperature": 0.2,
		"messages": [{"role": "user", "content": "Fill in the form.\n"}],
		"response_format": {"type": "json_schema", "json_schema": {"name": "form", "schema": {"type": "object"}}}}`)
	var s dialect.PromptSize
	_ = dialect.EachMember(body, func(name, value []byte) {
		switch string(name) {
		case "model", "temperature":
		case "messages":
			_ = dialect.EachElementOfValid(value, func(m []byte) {
				_ = dialect.EachMemberOfValid(m, func(name, value []byte) {
					if string(name) == "content" {
						s.AddText(value) // 18 characters
					}
				})
			})
		default:
			s.AddJSON(value) // 79 characters
		}
	})
	fmt.Println(s.Tokens())
	// Output: 25
}
