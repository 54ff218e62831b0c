package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The rate-limit headers of the deployment that answered reach the client
// (x-belay-deployment names it), streamed or not, OpenAI's and
// Anthropic's, and count_tokens too; those of a deployment that failed
// before the fallback answered do not.
func TestRateLimitHeadersOfTheAnsweringDeployment(t *testing.T) {
	limited := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
		w.Header().Set("X-Ratelimit-Reset-Requests", "20s")
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
	})
	openaiOK := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Ratelimit-Limit-Requests", "500")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "499")
		w.Header().Set("X-Ratelimit-Remaining-Tokens", "149984")
		w.Header().Set("X-Ratelimit-Reset-Tokens", "6ms")
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, okCompletion, 5, 1)
	})
	anthropicOK := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "49")
		w.Header().Set("Anthropic-Ratelimit-Input-Tokens-Remaining", "39000")
		w.Header().Set("Request-Id", "req_up")
		if strings.HasSuffix(r.URL.Path, "/count_tokens") {
			_, _ = io.WriteString(w, `{"input_tokens":9}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}`)
	})
	y := fmt.Sprintf(`
store: memory://
retry: {max_attempts: 1}
models:
  - alias: m
    deployments:
      - {name: limited, provider: openai, model: gpt-4o, base_url: %q, api_key: k}
      - {name: ok, provider: openai, model: gpt-4o, base_url: %q, api_key: k}
  - alias: c
    deployments:
      - {name: an, provider: anthropic, model: claude-sonnet-5-5, base_url: %q, api_key: k}
`, limited.URL+"/v1", openaiOK.URL+"/v1", anthropicOK.URL)
	g := newGW(t, y, nil)

	for _, stream := range []bool{false, true} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]` + map[bool]string{false: "}", true: `,"stream":true}`}[stream]
		resp, out := g.do("POST", "/v1/chat/completions", body)
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("X-Belay-Deployment") != "ok" {
			t.Fatalf("stream %v: %d %s", stream, resp.StatusCode, out)
		}
		if h.Get("X-Ratelimit-Remaining-Requests") != "499" || h.Get("X-Ratelimit-Limit-Requests") != "500" ||
			h.Get("X-Ratelimit-Remaining-Tokens") != "149984" || h.Get("X-Ratelimit-Reset-Tokens") != "6ms" {
			t.Errorf("stream %v: rate-limit headers %v; want deployment ok's", stream, h)
		}
		if h.Get("X-Ratelimit-Reset-Requests") != "" || h.Get("Retry-After") != "" {
			t.Errorf("stream %v: headers of the failed deployment reached the client: %v", stream, h)
		}
		if stream && !strings.Contains(out, "[DONE]") {
			t.Errorf("stream: %s", out)
		}
	}

	resp, out := g.do("POST", "/v1/messages", `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "Anthropic-Version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining") != "49" || resp.Header.Get("Anthropic-Ratelimit-Input-Tokens-Remaining") != "39000" {
		t.Errorf("messages: %d %v %s", resp.StatusCode, resp.Header, out)
	}
	resp, out = g.do("POST", "/v1/messages/count_tokens", `{"model":"c","messages":[{"role":"user","content":"hi"}]}`, "Anthropic-Version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining") != "49" {
		t.Errorf("count_tokens: %d %v %s", resp.StatusCode, resp.Header, out)
	}
}
