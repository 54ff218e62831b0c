package codec

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// checkSameAttrs checks that EncodeAttrs and the encoding/json path decode
// to the same values, and that the fast path was taken iff wantFast.
func checkSameAttrs(t *testing.T, name string, m map[string]any, wantFast bool) {
	t.Helper()
	fast, ok := "", false
	if len(m) > 0 {
		fast, ok = encodeAttrsFast(m)
	}
	if ok != wantFast {
		t.Errorf("%s: fast path taken = %v, want %v", name, ok, wantFast)
	}
	if ok && !json.Valid([]byte(fast)) {
		t.Errorf("%s: fast path wrote invalid JSON %q", name, fast)
	}
	got, err := EncodeAttrs(m)
	if err != nil {
		t.Fatalf("%s: EncodeAttrs: %v", name, err)
	}
	var want *string
	if len(m) > 0 {
		if want, err = encodeAttrsJSON(m); err != nil {
			t.Fatalf("%s: encodeAttrsJSON: %v", name, err)
		}
	}
	if (got == nil) != (want == nil) {
		t.Fatalf("%s: EncodeAttrs = %v, old path = %v", name, got, want)
	}
	if ok && *got != fast {
		t.Errorf("%s: EncodeAttrs = %q, fast path = %q", name, *got, fast)
	}
	dg, err := DecodeAttrs(got)
	if err != nil {
		t.Fatalf("%s: decode new %q: %v", name, deref(got), err)
	}
	dw, err := DecodeAttrs(want)
	if err != nil {
		t.Fatalf("%s: decode old %q: %v", name, deref(want), err)
	}
	if !sameValue(dg, dw) {
		t.Errorf("%s: decoded differently\n new %q -> %#v\n old %q -> %#v", name, deref(got), dg, deref(want), dw)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// sameValue is reflect.DeepEqual that also tells -0 from 0.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []float64:
		y, ok := b.([]float64)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func TestEncodeAttrsFastTable(t *testing.T) {
	f32 := func(f float32) float32 { return f }
	cases := []struct {
		name string
		m    map[string]any
		fast bool
	}{
		{"nil map", nil, false},
		{"empty map", map[string]any{}, false},
		{"string", map[string]any{"s": "hello", "e": ""}, true},
		{"bool", map[string]any{"t": true, "f": false}, true},
		{"ints", map[string]any{
			"int": -1, "int8": int8(-128), "int16": int16(math.MaxInt16), "int32": int32(math.MinInt32),
			"int64max": int64(math.MaxInt64), "int64min": int64(math.MinInt64), "zero": 0,
		}, true},
		{"uints", map[string]any{
			"uint": uint(7), "uint8": uint8(255), "uint16": uint16(math.MaxUint16), "uint32": uint32(math.MaxUint32),
			"uint64": uint64(42), "uint64 maxint": uint64(math.MaxInt64),
			"uint64 above maxint": uint64(math.MaxInt64) + 1, "uint64 max": uint64(math.MaxUint64),
		}, true},
		{"floats", map[string]any{
			"zero": 0.0, "negzero": math.Copysign(0, -1), "big": 1e21, "bigger": 1e300, "small": 1e-7,
			"integral": 3.0, "neg integral": -3.0, "million": 1e6, "frac": 0.1, "pi": math.Pi,
			"max": math.MaxFloat64, "min": math.SmallestNonzeroFloat64, "2^53": float64(1 << 53),
			"2^53+": float64(1<<53) * 3, "1e20": 1e20, "123456789": 123456789.0,
		}, true},
		{"non-finite", map[string]any{"nan": math.NaN(), "inf": math.Inf(1), "-inf": math.Inf(-1)}, true},
		{"float32", map[string]any{
			"tenth": f32(0.1), "integral": f32(3), "negzero": f32(float32(math.Copysign(0, -1))),
			"max": f32(math.MaxFloat32), "tiny": f32(math.SmallestNonzeroFloat32), "big": f32(1e21),
			"nan": f32(float32(math.NaN())), "inf": f32(float32(math.Inf(1))), "-inf": f32(float32(math.Inf(-1))),
		}, true},
		{"quotes and backslashes", map[string]any{`k"\`: `a "quoted" \ back\\slash \"`, `\`: `"`}, true},
		{"control characters", map[string]any{"c": "\x00\x01\x07\b\f\n\r\t\x1b\x1f\x7f end", "k\n\t": "v"}, true},
		{"line separators", map[string]any{"ls": "a\u2028b\u2029c", "k\u2028": "v"}, true},
		{"emoji and non-ASCII", map[string]any{"emoji": "👍🏽 family 👨‍👩‍👧", "ключ": "значение", "日本": "語", "max rune": "\U0010FFFF"}, true},
		{"html", map[string]any{"html": `<script>alert("x & y")</script>`, "<&>": "&amp;"}, true},
		{"json payload", map[string]any{"msg": `[{"role":"user","content":"hi\nthere \"you\""}]`}, true},
		{"slices", map[string]any{
			"strs": []string{"a", "b\"c", "\x00", "👍"}, "ints": []int64{1, -2, math.MaxInt64},
			"floats": []float64{1.5, 3, math.Copysign(0, -1), 1e21}, "bools": []bool{true, false},
			"f32s": []float32{0.1, 2},
		}, true},
		{"single element slices", map[string]any{"s": []string{"x"}, "i": []int64{0}, "f": []float64{2}, "b": []bool{false}}, true},
		{"non-finite in slice", map[string]any{"f": []float64{math.NaN(), math.Inf(1)}, "g": []float64{1.5, math.Inf(-1)}}, true},
		{"empty slices", map[string]any{"s": []string{}, "i": []int64{}, "f": []float64{}, "b": []bool{}, "f32": []float32{}}, true},
		{"nil slices", map[string]any{"s": []string(nil), "i": []int64(nil), "f": []float64(nil), "b": []bool(nil), "f32": []float32(nil)}, true},
		{"nil value", map[string]any{"n": nil, "s": "x"}, true},
		{"invalid UTF-8 value", map[string]any{"s": "a\xffb"}, false},
		{"invalid UTF-8 key", map[string]any{"a\xc0": "v"}, false},
		{"invalid UTF-8 keys that collide", map[string]any{"a\xff": int64(1), "a\xfe": int64(2)}, false},
		{"invalid UTF-8 in []string", map[string]any{"s": []string{"ok", "\xed\xa0\x80"}}, false},
		{"surrogate half", map[string]any{"s": "\xed\xa0\x80"}, false},
		{"nested map", map[string]any{"m": map[string]any{"x": 1.0, "y": "z", "n": math.NaN()}, "s": "a"}, false},
		{"[]any", map[string]any{"a": []any{"x", 1.0, int64(2), math.Inf(1)}}, false},
		{"[]int", map[string]any{"a": []int{1, 2}}, false},
		{"[]byte", map[string]any{"b": []byte("hi")}, false},
		{"named type", map[string]any{"d": time.Second, "t": time.Unix(0, 0).UTC()}, false},
		{"json.Number", map[string]any{"n": json.Number("12")}, false},
		{"mixed fallback", map[string]any{"s": "x", "i": int64(1), "f": 2.0, "m": map[string]any{}}, false},
	}
	for _, c := range cases {
		checkSameAttrs(t, c.name, c.m, c.fast)
	}
}

func TestEncodeAttrsUnsupportedError(t *testing.T) {
	if _, err := EncodeAttrs(map[string]any{"ch": make(chan int)}); err == nil {
		t.Fatal("EncodeAttrs of a channel: no error")
	}
}

func TestEncodeAttrsFastText(t *testing.T) {
	got, err := EncodeAttrs(map[string]any{
		"z": "a\"\\\n\x01<", "a": 3.0, "m": int64(-5), "f": []float64{math.NaN(), 1e21}, "n": []string(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":3.0,"f":["NaN",1e+21],"m":-5,"n":null,"z":"a\"\\\n\u0001<"}`
	if *got != want {
		t.Errorf("EncodeAttrs = %s, want %s", *got, want)
	}
}

// randString returns a random string: mostly ASCII, with quotes,
// backslashes, control characters, multi-byte runes and, when invalid is
// set, sometimes a byte that is not valid UTF-8.
func randString(r *rand.Rand, invalid bool) string {
	const pieces = "abcXYZ019 _.-\"\\/<>&\n\r\t\x00\x01\x1f\x7fé€👍\u2028"
	runes := []rune(pieces)
	var sb strings.Builder
	n := r.IntN(12)
	if r.IntN(50) == 0 {
		n = 2000 + r.IntN(2000) // now and then a payload-sized string
	}
	for range n {
		sb.WriteRune(runes[r.IntN(len(runes))])
	}
	if invalid && r.IntN(40) == 0 {
		s := []byte(sb.String())
		bad := []byte{0xff, 0xc0, 0x80, 0xed}[r.IntN(4)]
		i := r.IntN(len(s) + 1)
		s = append(s[:i], append([]byte{bad}, s[i:]...)...)
		return string(s)
	}
	return sb.String()
}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(6) {
	case 0:
		return []float64{0, math.Copysign(0, -1), 1e21, 1e-7, 3, math.NaN(), math.Inf(1), math.Inf(-1), 1e20, 1e-6}[r.IntN(10)]
	case 1:
		return float64(r.IntN(2000) - 1000) // integral
	case 2:
		return math.Float64frombits(r.Uint64()) // any bit pattern, NaN and Inf included
	default:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
	}
}

// randValue returns a random attribute value; fast reports whether the
// fast path handles it (given no invalid UTF-8 was produced).
func randValue(r *rand.Rand) (v any, fast bool) {
	switch r.IntN(24) {
	case 0, 1, 2, 3, 4:
		return randString(r, true), true
	case 5:
		return r.IntN(2) == 0, true
	case 6:
		return int(r.Int64()), true
	case 7:
		return int8(r.Int32()), true
	case 8:
		return int16(r.Int32()), true
	case 9:
		return int32(r.Uint32()), true
	case 10, 11:
		if r.IntN(2) == 0 {
			return r.Int64N(10000), true
		}
		return int64(r.Uint64()), true
	case 12:
		return []any{uint8(r.Uint32()), uint16(r.Uint32()), uint32(r.Uint32()), uint(r.Uint64())}[r.IntN(4)], true
	case 13:
		return r.Uint64() >> r.IntN(64), true
	case 14, 15:
		return randFloat(r), true
	case 16:
		return float32(randFloat(r)), true
	case 17:
		if r.IntN(8) == 0 {
			return []string(nil), true
		}
		a := make([]string, r.IntN(4))
		for i := range a {
			a[i] = randString(r, true)
		}
		return a, true
	case 18:
		if r.IntN(8) == 0 {
			return []int64(nil), true
		}
		a := make([]int64, r.IntN(4))
		for i := range a {
			a[i] = int64(r.Uint64())
		}
		return a, true
	case 19:
		if r.IntN(8) == 0 {
			return []float64(nil), true
		}
		a := make([]float64, r.IntN(4))
		for i := range a {
			a[i] = randFloat(r)
		}
		return a, true
	case 20:
		if r.IntN(8) == 0 {
			return []bool(nil), true
		}
		a := make([]bool, r.IntN(4))
		for i := range a {
			a[i] = r.IntN(2) == 0
		}
		return a, true
	case 21:
		if r.IntN(3) == 0 {
			return nil, true
		}
		return []float32{float32(randFloat(r)), 2}, true
	case 22:
		return map[string]any{randString(r, false): randFloat(r)}, false
	default:
		return []any{randString(r, false), randFloat(r), r.Int64()}, false
	}
}

func TestEncodeAttrsFastRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(20240601, 7))
	nFast := 0
	for i := range 2000 {
		m := make(map[string]any)
		handled := make(map[string]bool) // a later value may replace an earlier one
		for range r.IntN(26) {
			k := randString(r, true)
			m[k], handled[k] = randValue(r)
		}
		fast := true
		for _, ok := range handled {
			fast = fast && ok
		}
		// The fast path also declines invalid UTF-8, anywhere.
		if fast && len(m) > 0 && !validAttrsUTF8(m) {
			fast = false
		}
		if len(m) == 0 {
			fast = false
		}
		if fast {
			nFast++
		}
		checkSameAttrs(t, fmt.Sprintf("map %d", i), m, fast)
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d of 2000 random maps took the fast path", nFast)
	if nFast < 500 {
		t.Errorf("only %d of 2000 random maps took the fast path", nFast)
	}
}

// validAttrsUTF8 reports whether every key and string (also in a []string)
// of m is valid UTF-8.
func validAttrsUTF8(m map[string]any) bool {
	for k, v := range m {
		if !utf8.ValidString(k) {
			return false
		}
		switch x := v.(type) {
		case string:
			if !utf8.ValidString(x) {
				return false
			}
		case []string:
			for _, e := range x {
				if !utf8.ValidString(e) {
					return false
				}
			}
		}
	}
	return true
}

func TestEncodeAttrsConcurrent(t *testing.T) {
	m := benchSpanAttrs()
	want, err := encodeAttrsJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	dw, _ := DecodeAttrs(want)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				mm := map[string]any{"g": int64(g), "i": int64(i), "big": strings.Repeat("x", (i%3)*40000)}
				got, err := EncodeAttrs(mm)
				if err != nil {
					t.Error(err)
					return
				}
				d, _ := DecodeAttrs(got)
				if d["g"] != int64(g) || d["i"] != int64(i) || len(d["big"].(string)) != (i%3)*40000 {
					t.Errorf("goroutine %d: got %.80s", g, *got)
					return
				}
				got, _ = EncodeAttrs(m)
				if d, _ := DecodeAttrs(got); !sameValue(d, dw) {
					t.Errorf("goroutine %d: span attrs decoded differently", g)
					return
				}
			}
		})
	}
	wg.Wait()
}

// benchSpanAttrs is a span of an LLM call as the tracer records it.
func benchSpanAttrs() map[string]any {
	var payload strings.Builder
	payload.WriteString(`[{"role":"system","content":"You are a careful assistant. Answer briefly."}`)
	for payload.Len() < 2000 {
		payload.WriteString(`,{"role":"user","content":"Summarise the quarterly report for the \"EMEA\" region,\nincluding revenue <and> costs & margins."}`)
	}
	payload.WriteString(`]`)
	return map[string]any{
		"gen_ai.system":                  "openai",
		"gen_ai.operation.name":          "chat",
		"gen_ai.request.model":           "gpt-4o-2024-08-06",
		"gen_ai.response.model":          "gpt-4o-2024-08-06",
		"gen_ai.response.id":             "chatcmpl-9xYzAbCdEfGhIjKlMnOpQrStUv",
		"gen_ai.request.temperature":     0.2,
		"gen_ai.request.top_p":           1.0,
		"gen_ai.request.max_tokens":      int64(1024),
		"gen_ai.usage.input_tokens":      int64(1834),
		"gen_ai.usage.output_tokens":     int64(321),
		"gen_ai.response.finish_reasons": []string{"stop"},
		"gen_ai.input.messages":          payload.String(),
		"belay.cost.usd":                 0.0042,
		"belay.run.id":                   "run_01J8ZK3Q4R5S6T7U8V9W0X1Y2Z",
		"belay.step":                     3,
		"belay.attempt":                  int64(1),
		"belay.cache.hit":                false,
		"belay.stream":                   true,
		"belay.latency.ttft_ms":          412.5,
		"server.address":                 "api.openai.com",
		"http.response.status_code":      200,
	}
}

func BenchmarkEncodeAttrs(b *testing.B) {
	m := benchSpanAttrs()
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeAttrsJSON(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeAttrs(m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
