package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A deployment's own timeouts replace the gateway's for its attempts: a
// hung deployment with first_byte (or, streamed, first_token) of 50ms
// falls back to the next at once, under the gateway's 120s and 60s, and a
// deployment without its own keeps the gateway's (a reasoning model may
// be given minutes beside fast ones).
func TestDeploymentTimeoutsReplaceTheGateways(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	hung := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.Contains(r.URL.Path, "/stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush() // headers, then nothing
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	good := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, roleChunk+chunk("ok")+"data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	})
	g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
models:
  - alias: m
    deployments:
      - {name: hung, provider: openai, model: gpt-4o-mini, base_url: %[1]q, api_key: k, timeouts: {first_byte: 50ms}}
      - {name: good, provider: openai, model: gpt-4o-mini, base_url: %[2]q, api_key: k}
  - alias: s
    deployments:
      - {name: hung-stream, provider: openai, model: gpt-4o-mini, base_url: %[3]q, api_key: k, timeouts: {first_token: 50ms}}
      - {name: good, provider: openai, model: gpt-4o-mini, base_url: %[2]q, api_key: k}
`, hung.URL+"/v1", good.URL+"/v1", hung.URL+"/stream/v1"), nil)

	resp, b := g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Belay-Deployment") != "good" || resp.Header.Get("X-Belay-Attempts") != "2" {
		t.Errorf("non-streamed: %d, deployment %q, attempts %q: %s; want good's answer after hung's 50ms",
			resp.StatusCode, resp.Header.Get("X-Belay-Deployment"), resp.Header.Get("X-Belay-Attempts"), b)
	}
	resp, b = g.do("POST", "/v1/chat/completions", `{"model":"s","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Belay-Deployment") != "good" || !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Errorf("streamed: %d, deployment %q: %s; want good's stream after hung-stream's 50ms", resp.StatusCode, resp.Header.Get("X-Belay-Deployment"), b)
	}
}
