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

// The same schema gives the same answer when the budget runs out part way
// through an object (adversarial review: which properties were kept
// followed Go's random map order).
func TestInstanceOfDeterministicAtTheBound(t *testing.T) {
	big := map[string]any{"type": "array", "minItems": 4096, "items": map[string]any{"type": "string", "minLength": 100}}
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{
		"alpha": big, "beta": big, "gamma": big, "delta": big}})
	first := string(instanceOf(schema))
	for i := range 50 {
		if got := string(instanceOf(schema)); got != first {
			t.Fatalf("call %d: answer differs from the first (%d vs %d bytes)", i, len(got), len(first))
		}
	}
	var v map[string][]string
	if err := json.Unmarshal([]byte(first), &v); err != nil {
		t.Fatal(err)
	}
	if len(v["alpha"]) == 0 || len(v["gamma"]) != 0 { // name order: alpha, beta, delta, gamma
		t.Fatalf("kept alpha %d, beta %d, delta %d, gamma %d items", len(v["alpha"]), len(v["beta"]), len(v["delta"]), len(v["gamma"]))
	}
}
