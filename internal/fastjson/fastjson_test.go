package fastjson

import (
	"encoding/json"
	"reflect"
	"testing"
)

type doc struct {
	Model  string           `json:"model"`
	N      *int64           `json:"n"`
	Items  []map[string]any `json:"items"`
	Stream bool             `json:"stream"`
	Raw    json.RawMessage  `json:"raw"`
}

// Unmarshal gives encoding/json's value on success and encoding/json's
// error, worded as encoding/json words it, on failure.
func TestUnmarshalIsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"model":"m","n":3,"items":[{"a":1},{"b":[true,null]}],"stream":true,"raw":{"x":[1,2]}}`,
		`{"MODEL":"case folded","N":null}`, `{"model":"caf\u00e9 \ud83d\ude00"}`,
		`{"n":1.5}`, `{"model":5}`, `{"stream":"yes"}`, `[1]`, `null`, `{"model":"m"`, ``, `{"model":"m"} x`,
	} {
		var got, want doc
		gerr := Unmarshal([]byte(in), &got)
		werr := json.Unmarshal([]byte(in), &want)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Errorf("Unmarshal(%q): err %v; encoding/json: %v", in, gerr, werr)
			continue
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("Unmarshal(%q) = %+v; encoding/json: %+v", in, got, want)
		}
	}
}
