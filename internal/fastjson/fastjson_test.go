package fastjson

import (
	"encoding/json"
	"reflect"
	"strings"
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

// FuzzValid checks Valid against encoding/json's (go test -fuzz FuzzValid
// ./internal/fastjson).
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e3,true,null,"x\u00e9\n"]}`, `{"a":1,}`, `[01]`, "\"\xff\"", `"\ud800"`, ` {} `, `{"a" 1}`, `1e`, `-`, `"\x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// A document nested deeper than encoding/json allows is refused, as
// encoding/json refuses it (segmentio does not limit the depth); one at
// the limit is accepted.
func TestDepthLimitIsEncodingJSONs(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1, 3 * maxDepth} {
		doc := []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
		if got, want := Valid(doc), json.Valid(doc); got != want {
			t.Errorf("depth %d: Valid = %v, encoding/json %v", depth, got, want)
		}
		var got, want any
		gerr, werr := Unmarshal(doc, &got), json.Unmarshal(doc, &want)
		if (gerr == nil) != (werr == nil) {
			t.Errorf("depth %d: Unmarshal err %v, encoding/json %v", depth, gerr, werr)
		}
	}
	// Brackets inside strings do not count.
	doc := []byte(`{"a":"` + strings.Repeat("[", 3*maxDepth) + `\"["}`)
	if !Valid(doc) || !json.Valid(doc) {
		t.Error("brackets in a string counted as nesting")
	}
}
