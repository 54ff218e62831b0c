package sim

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxSchemaDepth bounds instanceOf's descent (a recursive $ref),
// maxSchemaSize the items of an array and the characters of a string it
// makes, and maxInstanceSize the whole answer: each value it makes counts
// 1, each object key and string its length, so that nested arrays and
// recursive schemas, whose per-array caps multiply, stay bounded too.
const (
	maxSchemaDepth  = 16
	maxSchemaSize   = 4096
	maxInstanceSize = 1 << 18
)

// instanceOf returns a minimal JSON value valid under the JSON Schema
// schema, for a request that asks for structured output (OpenAI's
// response_format json_schema, Anthropic's output_config.format): a real
// provider's answer then always parses, and so must the simulator's (the
// SDKs' parse helpers throw on text that is not the schema's JSON). It
// reads type (the first that is not null), properties (each one), items
// and minItems, enum and const (the first value), anyOf, oneOf and allOf
// (the first schema), $ref into the root's $defs or definitions, minimum
// and exclusiveMinimum (rounded up for an integer), multipleOf, minLength
// and format (an example of each format JSON Schema names); anything else
// is given its type's zero value: a pattern is not followed. A schema it cannot read gives {};
// one asking for more than maxSchemaSize items or characters gets
// maxSchemaSize, and once the answer has used maxInstanceSize (see there)
// arrays and strings stop growing and nested values are null: an answer
// is not built without bound, and one that large is not valid under its
// schema.
func instanceOf(schema json.RawMessage) []byte {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil {
		return []byte("{}")
	}
	b := instanceBuilder{root: root, left: maxInstanceSize}
	out, err := json.Marshal(b.instance(root, 0))
	if err != nil {
		return []byte("{}")
	}
	return out
}

// instanceBuilder builds one instanceOf answer within left units.
type instanceBuilder struct {
	root map[string]any
	left int
}

// take spends n units of the answer's budget and reports whether they
// were there.
func (b *instanceBuilder) take(n int) bool {
	if n > b.left {
		b.left = 0
		return false
	}
	b.left -= n
	return true
}

func (b *instanceBuilder) instance(s map[string]any, depth int) any {
	if depth > maxSchemaDepth || !b.take(1) {
		return nil
	}
	root := b.root
	if ref, ok := s["$ref"].(string); ok {
		for _, prefix := range []string{"#/$defs/", "#/definitions/"} {
			if name, ok := strings.CutPrefix(ref, prefix); ok {
				defs, _ := root[strings.Trim(prefix, "#/")].(map[string]any)
				if d, ok := defs[name].(map[string]any); ok {
					return b.instance(d, depth+1)
				}
			}
		}
		return nil
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[key].([]any); ok && len(alts) > 0 {
			if first, ok := alts[0].(map[string]any); ok {
				return b.instance(first, depth+1)
			}
		}
	}
	switch schemaType(s) {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		// In name order, so that the same schema gives the same answer
		// when the budget runs out part way (the map's order is random).
		for _, name := range slices.Sorted(maps.Keys(props)) {
			if ps, ok := props[name].(map[string]any); ok && b.take(len(name)) {
				out[name] = b.instance(ps, depth+1)
			}
		}
		return out
	case "array":
		n, _ := s["minItems"].(float64)
		items, _ := s["items"].(map[string]any)
		out := []any{}
		for range int(min(math.Ceil(n), maxSchemaSize)) {
			if b.left == 0 {
				break
			}
			out = append(out, b.instance(items, depth+1))
		}
		return out
	case "string":
		if f, ok := s["format"].(string); ok {
			if v, ok := formatExamples[f]; ok {
				return v
			}
		}
		n, _ := s["minLength"].(float64)
		k := int(max(0, min(math.Ceil(n), maxSchemaSize, float64(b.left))))
		b.take(k)
		return strings.Repeat("a", k)
	case "integer", "number":
		v := 0.0
		if m, ok := s["minimum"].(float64); ok {
			v = m
		}
		if m, ok := s["exclusiveMinimum"].(float64); ok && v <= m {
			v = m + 1
		}
		integer := schemaType(s) == "integer"
		if integer {
			v = math.Ceil(v)
		}
		if m, ok := s["multipleOf"].(float64); ok && m > 0 {
			v = multipleFrom(v, m, integer)
		}
		return v
	case "boolean":
		return false
	case "null":
		return nil
	}
	return map[string]any{}
}

// multipleFrom returns the least multiple of m at or above v, written to
// m's decimals (0.1×3 is 0.3, not 0.30000000000000004), and for an
// integer the least such multiple that is whole (1.5×2 = 3); v when none
// is found within a thousand multiples.
func multipleFrom(v, m float64, integer bool) float64 {
	decimals := 0
	if _, frac, ok := strings.Cut(strconv.FormatFloat(m, 'f', -1, 64), "."); ok {
		decimals = len(frac)
	}
	scale := math.Pow(10, float64(decimals))
	for k := math.Ceil(v / m); k < math.Ceil(v/m)+1000; k++ {
		c := math.Round(k*m*scale) / scale
		if c < v {
			continue
		}
		if !integer || c == math.Trunc(c) {
			return c
		}
	}
	return v
}

// formatExamples are values of the string formats JSON Schema names (and
// OpenAI's strict mode accepts).
var formatExamples = map[string]string{
	"date-time": "2026-01-01T00:00:00Z", "date": "2026-01-01", "time": "00:00:00Z", "duration": "P1D",
	"email": "a@example.com", "hostname": "example.com", "ipv4": "192.0.2.1", "ipv6": "2001:db8::1",
	"uuid": "00000000-0000-4000-8000-000000000000", "uri": "https://example.com/",
}

// schemaType is s's type: the first of a list that is not "null";
// "object" when it has properties and no type.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, v := range t {
			if name, ok := v.(string); ok && name != "null" {
				return name
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	return ""
}
