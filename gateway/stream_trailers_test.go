package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/failure"
)

// A stream that fails after its output began cannot carry the failure
// headers of a refusal (they went out with the first event): it names the
// failure in its trailers instead, beside the cost, and a stream that
// ends well names none. Both dialects; failure.FromResponse reads it from
// the trailers as it would from headers.
func TestStreamFailureAfterOutputIsInTheTrailers(t *testing.T) {
	openaiCut := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`+"\n\n")
		// the connection ends without [DONE]
	}
	anthropicError := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n")
		io.WriteString(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n")
		io.WriteString(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	}
	openaiOK := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}
	for _, c := range []struct {
		name, path, body string
		dep              func(base string) string
		up               http.HandlerFunc
		kind, reason     string
		event            string // in the body: the dialect's error event
	}{
		{"openai cut", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			func(b string) string { return openAIDep("d", "gpt-4o-mini", b) }, openaiCut,
			"transient", "stream_interrupted", `"error"`},
		{"anthropic error event", "/v1/messages", `{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
			func(b string) string {
				return fmt.Sprintf("{name: d, provider: anthropic, model: claude-sonnet-5-5, base_url: %q, api_key: k}", b)
			}, anthropicError,
			"transient", "overloaded", "event: error"},
		{"openai success", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			func(b string) string { return openAIDep("d", "gpt-4o-mini", b) }, openaiOK,
			"", "", "[DONE]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := upstream(t, c.up)
			g := newGW(t, oneAlias("", c.dep(up.URL)), nil)
			resp, body := g.do("POST", c.path, c.body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Hel") && c.kind != "" || !strings.Contains(body, c.event) {
				t.Fatalf("status %d, body %q; want a 200 stream with its output and %q", resp.StatusCode, body, c.event)
			}
			if k, r := resp.Header.Get(failure.HeaderKind), resp.Header.Get(failure.HeaderReason); k != "" || r != "" {
				t.Errorf("headers name a failure (%q/%q) before the stream began", k, r)
			}
			if k, r := resp.Trailer.Get(failure.HeaderKind), resp.Trailer.Get(failure.HeaderReason); k != c.kind || r != c.reason {
				t.Errorf("trailers %q/%q; want %q/%q (all trailers: %v)", k, r, c.kind, c.reason, resp.Trailer)
			}
			if resp.Trailer.Get("X-Belay-Cost-Usd") == "" {
				t.Errorf("no cost trailer: %v", resp.Trailer)
			}
			fe := failure.FromResponse(&http.Response{StatusCode: resp.StatusCode, Header: resp.Trailer})
			if (fe == nil) != (c.kind == "") || fe != nil && string(fe.Reason) != c.reason {
				t.Errorf("FromResponse(trailers) = %v; want reason %q", fe, c.reason)
			}
		})
	}
}
