package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// memberCases are JSON texts, valid and malformed, whose top level the
// scanner must read as encoding/json does.
var memberCases = []string{
	`{"model":"a","x":1}`,
	"{ \"stream\" : true,\n  \"model\"\t:\n \"gpt-4o\" , \"n\": 1.50e0}",
	" \t\r\n{ \"model\" \r\n: \n -0.5e+3 \t, \"b\" : [ ] , \"c\":{ } } \n",
	`{"a":"x\"}y","model":"m"}`,
	`{"a":"\\","model":1}`,
	`{"a":"\\\"","model":1}`,
	`{"a":"\\\\\"]}","model":[1,"\"",{"model":"]"}]}`,
	`{"a":{"model":"n","b":["}",{"c":"]["}]},"model":  true }`,
	`{"model":1,"model":2,"x":{},"model":null}`,
	`{"mod\u0065l":"x","\u006dodel":"y"}`,
	`{"mo\"del":1,"model\\":2}`,
	"{\"\xff\":1,\"model\":\"\xfe\"}",
	`{"é":"é\u00e9","model":false}`,
	`{"":0,"model":{"model":{"model":1}}}`,
	`{"a":[[[[]]],[{}]],"model":"}"}`,
	`{}`,
	` { } `,
	// malformed
	``, ` `, `[]`, `"s"`, `1`, `null`, `true`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`,
	`{"a":1 "b":2}`, `{"a":tru}`, `{"a":"x}`, `{"a":1}}`, `{"a":1} {}`, `{"a":1}x`, `{'a':1}`,
	"{\"a\":\"\x01\"}", `{"a":01}`, `{"a":"\q"}`, `{"a":[1,]}`, `{"a":[}`, `{"a":{"b"}}`, `{,"a":1}`,
	`{"model":`, `{"model":"a"`, `{"a":1}]`, `{a:1}`, `{"a"::1}`, `{"a":1,,"b":2}`, `{"a":-}`, `{"a":1.}`,
	`{"a":"\u12"}`, `{"a":[1}`, `{"a":{]}`, "{\"a\":1}\x00",
}

// topLevelValueSpans appends to dst the [start, end) byte spans of the
// values of every top-level member whose name equals key under Unicode
// case folding (as encoding/json matches struct fields), and returns them with the
// offset of the opening brace. Its errors are those of scanMembers
// (ErrNotObject).
func topLevelValueSpans(dst [][2]int, body []byte, key string, valid bool) (spans [][2]int, open int, err error) {
	spans = dst
	want := []byte(key)
	open, err = scanMembers(body, valid, func(name []byte, _, _, start, end int) {
		// Under Unicode case folding, as encoding/json matches a member
		// to a struct field: the parser read "Model" as the model.
		if bytes.EqualFold(name, want) {
			spans = append(spans, [2]int{start, end})
		}
	})
	if err != nil {
		return nil, 0, err
	}
	return spans, open, nil
}

// decoderSpans is topLevelValueSpans as it was written on json.Decoder,
// the reference the scanner must agree with.
func decoderSpans(body []byte, key string) (spans [][2]int, open int, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, 0, errors.New("not an object")
	}
	open = int(dec.InputOffset()) - 1
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, 0, err
		}
		afterKey := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, 0, err
		}
		if strings.EqualFold(k.(string), key) {
			end := int(dec.InputOffset())
			start := afterKey
			for start < end && (body[start] == ':' || isSpace(body[start])) {
				start++
			}
			spans = append(spans, [2]int{start, end})
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, 0, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, errors.New("trailing data")
	}
	return spans, open, nil
}

func checkSpans(t *testing.T, body string) {
	t.Helper()
	for _, key := range []string{"model", "a", "", "\xff", "mo\"del"} {
		want, wantOpen, wantErr := decoderSpans([]byte(body), key)
		got, open, err := topLevelValueSpans(nil, []byte(body), key, false)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q key %q: err %v, decoder err %v", body, key, err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrNotObject) {
				t.Fatalf("%q: err %v is not ErrNotObject", body, err)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) || open != wantOpen {
			t.Fatalf("%q key %q: spans %v open %d, decoder %v open %d", body, key, got, open, want, wantOpen)
		}
		// A body known to be valid (RewriteModelValid) scans the same
		// without the check.
		got, open, err = topLevelValueSpans(nil, []byte(body), key, true)
		if err != nil || !reflect.DeepEqual(got, want) || open != wantOpen {
			t.Fatalf("%q key %q, unchecked: spans %v open %d err %v, decoder %v open %d", body, key, got, open, err, want, wantOpen)
		}
	}
}

// checkMap checks EachMember against json.Unmarshal into a
// map[string]json.RawMessage: the last value of each name, and nothing for
// a body that is not an object.
func checkMap(t *testing.T, body string) {
	t.Helper()
	var want map[string]json.RawMessage
	_ = json.Unmarshal([]byte(body), &want)
	got := map[string]json.RawMessage{}
	err := EachMember([]byte(body), func(name, value []byte) { got[string(name)] = value })
	if err != nil && len(got) > 0 {
		t.Fatalf("%q: EachMember called fn before returning %v", body, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%q: members %q, json.Unmarshal %q", body, got, want)
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Fatalf("%q: member %q = %q, json.Unmarshal %q", body, k, got[k], v)
		}
	}
}

func TestTopLevelValueSpansMatchesDecoder(t *testing.T) {
	for _, body := range memberCases {
		checkSpans(t, body)
	}
}

func TestEachMemberMatchesUnmarshal(t *testing.T) {
	for _, body := range memberCases {
		checkMap(t, body)
	}
}

func TestEachMemberOrderAndDuplicates(t *testing.T) {
	var got []string
	err := EachMember([]byte(` {"b" : [1, "]"] ,"a":"x\"","b":null, "n\u0061me":{"b":2}} `), func(name, value []byte) {
		got = append(got, string(name)+"="+string(value))
	})
	want := []string{`b=[1, "]"]`, `a="x\""`, `b=null`, `name={"b":2}`}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
}

// A nesting depth encoding/json refuses is refused.
func TestEachMemberTooDeep(t *testing.T) {
	body := `{"a":` + string(bytes.Repeat([]byte("["), 20000)) + string(bytes.Repeat([]byte("]"), 20000)) + `}`
	if err := EachMember([]byte(body), func(_, _ []byte) {}); !errors.Is(err, ErrNotObject) {
		t.Fatalf("err = %v, want ErrNotObject", err)
	}
}

type counts struct {
	A int `json:"a"`
	B int `json:"b"`
}

func TestDecodeMemberMatchesStructField(t *testing.T) {
	for _, body := range []string{
		`{"usage":{"a":1,"b":2},"x":[{"usage":{"a":9}}]}`,
		`{"Usage":{"a":1},"USAGE":{"b":2}}`, // merged, as into a struct
		`{"usage":{"a":1},"usage":null}`,
		`{"uſage":{"a":3}}`, // U+017F folds to s
		`{"u\u0073age":{"a":4}}`,
		`{"usage":{"a":"x"},"usage":{"b":5}}`,
		`{"usage":7}`,
		`{"usages":{"a":1}}`,
		`{"usage":{"a":1},"x":[`,
		`{"x":"\"usage\":{\"a\":1}"}`,
		`[]`, `null`, ``, `{}`,
	} {
		var want struct {
			Usage *counts `json:"usage"`
		}
		wantErr := json.Unmarshal([]byte(body), &want)
		var got *counts
		err := DecodeMember([]byte(body), "usage", &got)
		if ok, wantOK := err == nil && got != nil, wantErr == nil && want.Usage != nil; ok != wantOK || (ok && *got != *want.Usage) {
			t.Errorf("%s: DecodeMember = %+v, %v; json.Unmarshal = %+v, %v", body, got, err, want.Usage, wantErr)
		}
	}
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range []string{"", "gpt-4o", "a/b:c-1.5", `q"u`, `back\slash`, "<&>", "é", "\xff", "tab\there", "\u2028", "\x7f"} {
		want, _ := json.Marshal(s)
		if got := appendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendString(%q) = %s, want x%s", s, got, want)
		}
	}
}

func FuzzEachMember(f *testing.F) {
	for _, body := range memberCases {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkSpans(t, body)
		checkMap(t, body)
	})
}

func BenchmarkRewriteModel(b *testing.B) {
	body := []byte(`{"model":"bench","messages":[{"role":"user","content":"Say \"hello\" [twice]."}],"temperature":0.2,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RewriteModel(body, "gpt-4o-mini"); err != nil {
			b.Fatal(err)
		}
	}
}

// SetMemberValid replaces every top-level value of the key, or inserts
// the member first, and keeps every other byte.
func TestSetMemberValid(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","stream":true}`, `{"stream_options":{"include_usage":true},"model":"m","stream":true}`},
		{`{}`, `{"stream_options":{"include_usage":true}}`},
		{` { } `, ` {"stream_options":{"include_usage":true} } `},
		{`{"stream_options": {"x":1}, "m": [1, {"stream_options":2}]}`, `{"stream_options": {"include_usage":true}, "m": [1, {"stream_options":2}]}`},
		{`{"stream_options":null,"a":1,"stream_options":{}}`, `{"stream_options":{"include_usage":true},"a":1,"stream_options":{"include_usage":true}}`},
		// Matched as encoding/json matches (case folding, escapes), and
		// written back under the key, spacing kept.
		{`{"Stream_Options" : {"x":1}, "a":1}`, `{"stream_options" : {"include_usage":true}, "a":1}`},
		{`{"stream\u005foptions":{}}`, `{"stream_options":{"include_usage":true}}`},
	} {
		got, err := SetMemberValid([]byte(tc.body), "stream_options", []byte(`{"include_usage":true}`))
		if err != nil || string(got) != tc.want {
			t.Errorf("SetMemberValid(%s) = %s, %v; want %s", tc.body, got, err, tc.want)
		}
	}
	if _, err := SetMemberValid([]byte(`[1]`), "k", []byte(`1`)); !errors.Is(err, ErrNotObject) {
		t.Errorf("SetMemberValid of an array: %v, want ErrNotObject", err)
	}
}
