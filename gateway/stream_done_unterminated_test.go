package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A finished stream whose terminator the upstream sent without the blank
// line after it ("data: [DONE]\n" then the end, or no newline at all;
// Anthropic's message_stop likewise) reaches the client as finished, with
// the terminator whole: before, the client got a stream_interrupted error
// event for an answer the upstream had completed (adversarial review). A
// cut event that is not a terminator still ends in an error event.
func TestTerminatorWithoutItsBlankLine(t *testing.T) {
	anStream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n"
	for _, c := range []struct {
		name, path, body, tail, wantEnd string
		anthropic, wantErr              bool
	}{
		{"openai [DONE] and LF", "/v1/chat/completions", endStreamBody, "data: [DONE]\n", "data: [DONE]\n\n", false, false},
		{"openai [DONE] without a newline", "/v1/chat/completions", endStreamBody, "data: [DONE]", "data: [DONE]\n\n", false, false},
		{"openai [DONE] and CRLF", "/v1/chat/completions", endStreamBody, "data: [DONE]\r\n", "data: [DONE]\n\n", false, false},
		{"openai cut chunk", "/v1/chat/completions", endStreamBody, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]}`, "", false, true},
		{"anthropic message_stop and LF", "/v1/messages", `{"model":"an","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n", "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", true, false},
		{"anthropic message_stop cut in its data", "/v1/messages", `{"model":"an","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"event: message_stop\ndata: {\"type\":\"message_st", "", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				if c.anthropic {
					_, _ = io.WriteString(w, anStream+c.tail)
				} else {
					_, _ = io.WriteString(w, roleChunk+chunk("ok")+c.tail)
				}
			})
			g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
models:
  - alias: m
    deployments: [{name: oa, provider: openai, model: gpt-4o-mini, base_url: %q, api_key: k}]
  - alias: an
    deployments: [{name: an, provider: anthropic, model: claude-sonnet-4-5, base_url: %q, api_key: k}]
`, up.URL+"/v1", up.URL), nil)
			resp, b := g.do("POST", c.path, c.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			hasErr := strings.Contains(b, `"error"`)
			if c.wantErr {
				if !hasErr || strings.Contains(b, "[DONE]") || strings.Contains(b, "message_stop") {
					t.Errorf("a cut event: want an error event and no terminator, got:\n%s", b)
				}
				return
			}
			if hasErr || !strings.HasSuffix(b, c.wantEnd) || !strings.Contains(b, "ok") {
				t.Errorf("want the answer ending in %q and no error event, got:\n%q", c.wantEnd, b)
			}
		})
	}
}

// With include_usage off, belay asks the upstream for usage on the
// client's behalf and the client gets the stream a provider would have
// sent it: no usage chunk, and no "usage":null on the other chunks. A
// client that asked keeps both.
func TestAddedUsageLeavesNoTrace(t *testing.T) {
	chunkWith := func(delta string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}],"usage":null}` + "\n\n"
	}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, chunkWith(`{"role":"assistant","content":""}`)+chunkWith(`{"content":"ok"}`)+
			`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n"+
			"data: [DONE]\n\n")
	})
	g := newGW(t, fmt.Sprintf("listen: 127.0.0.1:0\nstore: memory://\nmodels:\n  - alias: m\n    deployments: [{name: oa, provider: openai, model: gpt-4o-mini, base_url: %q, api_key: k}]\n", up.URL+"/v1"), nil)
	_, b := g.do("POST", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if strings.Contains(b, `"usage"`) || !strings.Contains(b, `"content":"ok"`) || !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Errorf("client without include_usage got:\n%s", b)
	}
	_, b = g.do("POST", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if strings.Count(b, `"usage":null`) != 2 || !strings.Contains(b, `"usage":{"prompt_tokens":3`) {
		t.Errorf("client with include_usage got:\n%s", b)
	}
}
