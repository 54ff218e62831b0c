package sim

import (
	"encoding/json"
	"testing"
)

func TestFillValueNumberPlaceholder(t *testing.T) {
	vars := map[string]string{"amount": "42.50", "id": "A-1"}
	got := fillValue(map[string]any{"a": "{{amount:number}}", "b": "{{id:number}}", "c": "{{id}}"}, vars).(map[string]any)
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":42.5,"b":"A-1","c":"A-1"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
