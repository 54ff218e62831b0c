package sim

import (
	"encoding/json"
	"strings"
	"testing"
)

// Per-array caps multiply with nesting, and a recursive $ref nests
// maxSchemaDepth deep: the answer as a whole stays within
// maxInstanceSize.
func TestInstanceOfBoundedAsAWhole(t *testing.T) {
	for _, tc := range []struct{ name, schema string }{
		{"nested arrays", `{"type":"array","minItems":4096,"items":{"type":"array","minItems":4096,"items":{"type":"integer"}}}`},
		{"recursive array", `{"$defs":{"a":{"type":"array","minItems":1000000,"items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`},
		{"recursive object", `{"$defs":{"o":{"type":"object","properties":{"a":{"$ref":"#/$defs/o"},"b":{"$ref":"#/$defs/o"},"c":{"$ref":"#/$defs/o"},"d":{"$ref":"#/$defs/o"}}}},"$ref":"#/$defs/o"}`},
		{"long strings", `{"type":"array","minItems":4096,"items":{"type":"string","minLength":4096}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := instanceOf(json.RawMessage(tc.schema))
			// Each unit of the budget is at most a few bytes of JSON
			// (a value's punctuation, a number's digits).
			if len(out) > 8*maxInstanceSize {
				t.Fatalf("instanceOf built %d bytes, want at most %d", len(out), 8*maxInstanceSize)
			}
			if !json.Valid(out) {
				t.Fatalf("instanceOf built invalid JSON: %.200s", out)
			}
		})
	}
}

// A schema within the budget still gets its minimums in full.
func TestInstanceOfMinimumsWithinBudget(t *testing.T) {
	out := instanceOf(json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","minItems":3,"items":{"type":"string","minLength":5}},"n":{"type":"string","minLength":-2}}}`))
	var v struct {
		Tags []string
		N    *string
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Tags) != 3 || v.Tags[2] != strings.Repeat("a", 5) || v.N == nil || *v.N != "" {
		t.Fatalf("instance = %s", out)
	}
}
