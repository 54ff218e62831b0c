package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/belay-run/belay/dialect"
)

// FuzzRequestDecodeMatchesEncodingJSON checks that dialect.DecodeObject,
// which decodes with segmentio/encoding/json first, accepts what
// encoding/json accepts and decodes it to the same Request (go test -fuzz
// FuzzRequestDecodeMatchesEncodingJSON ./dialect/openai).
func FuzzRequestDecodeMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":50,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:x","detail":"low"}}]}]}`,
		`{"model":"m","tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"tool_choice":"auto","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
		`{"Model":"m","MESSAGES":[{"Role":"user","content":"x"}],"max_completion_tokens":7}`,
		`{"model":"m","max_tokens":1.5,"messages":[]}`, `{"model":5}`, `null`, `[1]`, `{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got, want Request
		gerr := dialect.DecodeObject(b, &got)
		werr := json.Unmarshal(b, &want)
		if werr == nil && (len(b) == 0 || firstNonSpace(b) != '{') {
			werr = errNotObject // null: DecodeObject refuses it
		}
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("DecodeObject(%q): err %v; encoding/json: %v", b, gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeObject(%q) = %+v; encoding/json decodes %+v", b, got, want)
		}
	})
}

var errNotObject = json.Unmarshal([]byte(`x`), new(int))

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}
