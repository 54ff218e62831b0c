package gateway

import (
	"encoding/json"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
)

// bodies are request and response bodies for the payload and usage
// readers: both dialects, repeated and escaped names, nested look-alikes,
// and bodies that are not JSON objects.
var bodies = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi <b>"}]}`,
	`{"model":"m","system":"be brief & kind","messages":[ {"role":"user", "content":"hi"} ]}`,
	`{"system":[{"type":"text","text":"s"}]}`,
	`{"system":null,"messages":null}`,
	`{"messages":[1],"messages":[2],"mess\u0061ges":[3]}`,
	`{"x":{"messages":[9],"choices":[9],"usage":{"prompt_tokens":9}}}`,
	`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"yo"}}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`,
	`{"usage":{"prompt_tokens":12,"prompt_tokens_details":{"cached_tokens":2}},"Usage":{"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":1}}}`,
	`{"usage":{"prompt_tokens":1},"usage":null}`,
	`{"usage":{"prompt_tokens":"1"}}`,
	`{"content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5,"output_tokens":2,"cache_read_input_tokens":1}}`,
	`{"choices":[],"content":"c"}`,
	`{"id":"resp_1","output":[{"type":"message","content":[]}],"output":[{"type":"function_call"}],"content":"c"}`,
	`{"choices":[{"message":{"content":"yo"}}],"usage":{"prompt_tokens":3}`,
	`[{"messages":[1]}]`, `null`, ``, `"s"`, `{"messages":[1]} {}`,
}

// oldPayload is payload as it was written on json.Unmarshal into maps
// (the answer's member: its front's answerMember).
func oldPayload(c *call) (input, output string) {
	var in map[string]json.RawMessage
	if json.Unmarshal(c.req.body, &in) == nil {
		if sys, ok := in["system"]; ok {
			b, _ := json.Marshal(map[string]json.RawMessage{"system": sys, "messages": in["messages"]})
			input = string(b)
		} else if m, ok := in["messages"]; ok {
			input = string(m)
		}
	}
	if a := c.answer; a != nil && a.status/100 == 2 {
		var out map[string]json.RawMessage
		if json.Unmarshal(a.body, &out) == nil {
			if m, ok := out[c.f.answerMember()]; ok {
				output = string(m)
			}
		}
	}
	return input, output
}

func TestPayloadMatchesMapDecoding(t *testing.T) {
	for _, f := range []front{openAIFront{}, anthropicFront{}, responsesFront{}} {
		for _, req := range bodies {
			for _, resp := range bodies {
				for _, status := range []int{200, 500} {
					c := &call{f: f, req: &request{body: []byte(req)}, answer: &answer{status: status, body: []byte(resp)}}
					in, out := c.payload()
					wantIn, wantOut := oldPayload(c)
					if in != wantIn || out != wantOut {
						t.Fatalf("%s: payload(%s, %d %s) = %q, %q; want %q, %q", f.answerMember(), req, status, resp, in, out, wantIn, wantOut)
					}
				}
			}
		}
	}
}

// The usage of a response is read as a whole-body json.Unmarshal reads its
// usage field: case-folded names, repeated members merged, null clearing.
func TestUsageMatchesStructDecoding(t *testing.T) {
	for _, body := range bodies {
		var o struct {
			Usage *openai.Usage `json:"usage"`
		}
		wantOK := json.Unmarshal([]byte(body), &o) == nil && o.Usage != nil
		var want dialect.Usage
		if wantOK {
			want = o.Usage.Dialect()
		}
		// The OpenAI front reads bodies answerFault passed: valid JSON.
		if !json.Valid([]byte(body)) {
			if wantOK {
				t.Errorf("openai: invalid %s decodes", body)
			}
		} else if got, ok := (openAIFront{}).usage([]byte(body)); ok != wantOK || got != want {
			t.Errorf("openai usage(%s) = %+v, %v; want %+v, %v", body, got, ok, want, wantOK)
		}
		var a struct {
			Usage *anthropic.Usage `json:"usage"`
		}
		wantOK = json.Unmarshal([]byte(body), &a) == nil && a.Usage != nil
		want = dialect.Usage{}
		if wantOK {
			want = a.Usage.Dialect()
		}
		if got, ok := (anthropicFront{}).usage([]byte(body)); ok != wantOK || got != want {
			t.Errorf("anthropic usage(%s) = %+v, %v; want %+v, %v", body, got, ok, want, wantOK)
		}
	}
}

// A 200 whose other fields do not fit openai.Completion (content as an
// array of parts, as some compatible servers send) is charged its reported
// usage: only the usage member is decoded.
func TestUsageIgnoresOtherFields(t *testing.T) {
	body := `{"id":7,"choices":[{"message":{"role":"assistant","content":[{"type":"text","text":"hi"}]}}],"usage":{"prompt_tokens":12,"completion_tokens":7}}`
	u, ok := (openAIFront{}).usage([]byte(body))
	if !ok || u != (dialect.Usage{Input: 12, Output: 7}) {
		t.Fatalf("usage = %+v, %v; want the reported usage", u, ok)
	}
}
