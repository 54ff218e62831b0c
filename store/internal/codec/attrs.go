// Package codec holds the row encodings shared by the SQL backends of store:
// span attributes and events as JSON, times as Unix nanoseconds, and the
// argument checks every backend applies the same way.
package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/belay-run/belay/trace"
)

// The attribute round-trip rule (documented on the backends):
//
//   - string and bool come back as they went in;
//   - every Go integer type comes back as int64 (a uint64 above MaxInt64
//     comes back as float64);
//   - float32 and float64 come back as float64, also when the value is
//     integral (3.0 is stored as "3.0", not "3"); NaN, +Inf and -Inf, which
//     JSON cannot hold, come back as the strings "NaN", "+Inf", "-Inf";
//   - a non-empty array whose elements all decode to one of string, int64,
//     float64 or bool comes back as []string, []int64, []float64 or []bool;
//     an empty array comes back as []string{}; a mixed array as []any;
//   - a nested object comes back as map[string]any under the same rules;
//   - any other value is stored as encoding/json marshals it and comes back
//     as the decoded JSON under these rules;
//   - an empty or nil map comes back nil.

// EncodeAttrs returns the JSON text of attrs, or nil for an empty map.
// Maps holding only strings, bools, integers, floats and []string, []int64,
// []float64, []bool values are written directly (see attrs_fast.go); other
// maps go through encoding/json. Both decode alike with DecodeAttrs.
func EncodeAttrs(attrs map[string]any) (*string, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	if s, ok := encodeAttrsFast(attrs); ok {
		return &s, nil
	}
	return encodeAttrsJSON(attrs)
}

// encodeAttrsJSON is the general path of EncodeAttrs, through
// encoding/json, for a non-empty attrs.
func encodeAttrsJSON(attrs map[string]any) (*string, error) {
	b, err := json.Marshal(prepare(attrs))
	if err != nil {
		return nil, fmt.Errorf("encode attributes: %w", err)
	}
	s := string(b)
	return &s, nil
}

// DecodeAttrs parses text written by EncodeAttrs (nil gives nil).
func DecodeAttrs(text *string) (map[string]any, error) {
	if text == nil || *text == "" {
		return nil, nil
	}
	var m map[string]any
	if err := decodeNumbers([]byte(*text), &m); err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return normalizeMap(m), nil
}

// storedEvent is trace.Event with its attributes left raw, so they can be
// decoded under the attribute rule.
type storedEvent struct {
	Name  string          `json:"name"`
	Time  time.Time       `json:"time"`
	Attrs json.RawMessage `json:"attrs,omitempty"`
}

// EncodeEvents returns the JSON text of events, or nil when there are none.
// Event times are stored in UTC with nanosecond precision.
func EncodeEvents(events []trace.Event) (*string, error) {
	if len(events) == 0 {
		return nil, nil
	}
	out := make([]storedEvent, len(events))
	for i, e := range events {
		out[i] = storedEvent{Name: e.Name, Time: e.Time.UTC()}
		if len(e.Attrs) > 0 {
			b, err := json.Marshal(prepare(e.Attrs))
			if err != nil {
				return nil, fmt.Errorf("encode event %q attributes: %w", e.Name, err)
			}
			out[i].Attrs = b
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode events: %w", err)
	}
	s := string(b)
	return &s, nil
}

// DecodeEvents parses text written by EncodeEvents (nil gives nil).
func DecodeEvents(text *string) ([]trace.Event, error) {
	if text == nil || *text == "" {
		return nil, nil
	}
	var in []storedEvent
	if err := json.Unmarshal([]byte(*text), &in); err != nil {
		return nil, fmt.Errorf("decode events: %w", err)
	}
	out := make([]trace.Event, len(in))
	for i, e := range in {
		out[i] = trace.Event{Name: e.Name, Time: e.Time.UTC()}
		if len(e.Attrs) > 0 {
			var m map[string]any
			if err := decodeNumbers(e.Attrs, &m); err != nil {
				return nil, fmt.Errorf("decode event %q attributes: %w", e.Name, err)
			}
			if len(m) > 0 {
				out[i].Attrs = normalizeMap(m)
			}
		}
	}
	return out, nil
}

func decodeNumbers(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// prepare rewrites floats so that their type survives JSON: integral values
// keep a ".0", non-finite values become strings.
func prepare(v any) any {
	switch x := v.(type) {
	case float64:
		return floatValue(x)
	case float32:
		return floatValue(float64(x))
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = prepare(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = prepare(e)
		}
		return a
	case []float64:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = floatValue(e)
		}
		return a
	case []float32:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = floatValue(float64(e))
		}
		return a
	}
	return v
}

func floatValue(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return json.Number(s)
}

func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		return number(x)
	case map[string]any:
		return normalizeMap(x)
	case []any:
		return normalizeSlice(x)
	}
	return v
}

func number(n json.Number) any {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s // unreachable for valid JSON; keep the text rather than lose it
	}
	return f
}

func normalizeMap(m map[string]any) map[string]any {
	for k, v := range m {
		m[k] = normalize(v)
	}
	return m
}

func normalizeSlice(a []any) any {
	if len(a) == 0 {
		return []string{}
	}
	for i, v := range a {
		a[i] = normalize(v)
	}
	switch a[0].(type) {
	case string:
		return typed[string](a)
	case int64:
		return typed[int64](a)
	case float64:
		return typed[float64](a)
	case bool:
		return typed[bool](a)
	}
	return a
}

// typed returns a as []T when every element is a T, and a unchanged otherwise.
func typed[T any](a []any) any {
	out := make([]T, len(a))
	for i, v := range a {
		t, ok := v.(T)
		if !ok {
			return a
		}
		out[i] = t
	}
	return out
}
