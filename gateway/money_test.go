package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/belay-run/belay/gateway"
)

// An answer past max_upstream_body_bytes was generated, and billed by the
// provider, in full; without max_tokens it is charged the output the call
// reserved (an adversarial review found it charged no output at all).
func TestOverLimitAnswerChargedItsOutput(t *testing.T) {
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = 'x'
	}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":16384}}`, big)
	})
	y := fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
max_upstream_body_bytes: 16384
retry: {max_attempts: 1, base: 1ms, cap: 2ms, max_retry_after: 30s}
breaker: {consecutive_failures: 1000}
limits: {max_turns: 50, deadline: 1m, max_cost_usd: 5}
models:
  - alias: m
    deployments:
      - %s
`, openAIDep("d", "gpt-4o", up.URL))
	g := newGW(t, y, nil)
	resp, b := g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"write a lot"}]}`, "X-Belay-Run-Id", "over-limit")
	if resp.StatusCode == 200 {
		t.Fatalf("status 200: %s", b)
	}
	rec := g.run("over-limit")
	if rec.OutputTokens != gateway.DefaultReserveOutputTokens {
		t.Errorf("a %d-byte answer past the cap was charged %d output tokens (cost %s, header %q); want the reserved %d",
			len(big), rec.OutputTokens, rec.Cost, resp.Header.Get("X-Belay-Cost-Usd"), gateway.DefaultReserveOutputTokens)
	}
}

