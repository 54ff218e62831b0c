package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/budget"
)

// A non-streamed answer is sent once generated, so one whose body is cut
// (here: 200 with its Content-Length, half the body, the connection
// closed) was billed whole. It is charged its prompt and output limit,
// estimated, and the retry's money is held (an adversarial review: four
// such attempts under a limit that held two, charged $0.015 for $0.06
// billed).
func TestCutAnswerChargedAndItsRetryHeld(t *testing.T) {
	var calls atomic.Int32
	answer := fmt.Sprintf(`{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2000,"completion_tokens":1000}}`, strings.Repeat("x", 4000))
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		w.WriteHeader(200)
		io.WriteString(w, answer[:len(answer)/2])
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	})
	g := newGW(t, aliasRetrying(4, "", openAIDep("d", "gpt-4o", up.URL)), nil)
	body := `{"model":"m","max_tokens":1000,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 1600) + `"}]}`
	p := budget.DefaultPricing()
	one, _ := p.Cost("openai", "gpt-4o", budget.Usage{InputTokens: 2000, OutputTokens: 1000})

	// Unbounded: each of the 4 attempts charged about its prompt and output limit.
	resp, b := g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "cut-free")
	if resp.StatusCode/100 != 5 || calls.Load() != 4 {
		t.Fatalf("status %d after %d upstream calls: %s; want a 5xx after 4", resp.StatusCode, calls.Load(), b)
	}
	if rec := g.run("cut-free"); rec.Cost < one*4*95/100 || rec.Cost > one*4*105/100 || rec.OutputTokens != 4000 {
		t.Errorf("run %+v; want 4 attempts charged about %s each, 1,000 output tokens each", rec, one)
	}

	// A limit of two such attempts: the second is not made, as its money does not fit.
	calls.Store(0)
	limit := one * 2
	resp, b = g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "cut", "X-Belay-Max-Cost-Usd", limit.Decimal())
	if resp.StatusCode != http.StatusPaymentRequired || calls.Load() != 1 || !strings.Contains(b, "not retried after attempt 1 failed (connection_error") {
		t.Errorf("status %d after %d upstream calls: %s; want 402 after 1", resp.StatusCode, calls.Load(), b)
	}
	if rec := g.run("cut"); rec.Cost > limit || rec.Cost < one*95/100 {
		t.Errorf("run cost %s; want one attempt's (about %s) within %s", rec.Cost, one, limit)
	}
}

// An attempt that belay's own first_byte timeout ends after the request
// reached the provider (which goes on and bills it) is charged,
// estimated, its prompt and, being non-streamed (generated whole before
// its headers), its output limit, as a cut answer is (it was charged
// nothing, then its prompt only).
func TestTimedOutAttemptChargedItsPrompt(t *testing.T) {
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		<-r.Context().Done() // the provider works on; belay gives up first
	})
	g := newGW(t, aliasRetrying(3, "timeouts: {first_byte: 20ms}\n", openAIDep("d", "gpt-4o", up.URL)), nil)
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 16000) + `"}]}`
	resp, b := g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "to")
	if resp.StatusCode != http.StatusGatewayTimeout || calls.Load() != 3 {
		t.Fatalf("status %d after %d upstream calls: %s; want 504 after 3", resp.StatusCode, calls.Load(), b)
	}
	// belay's estimate of the prompt: 80,000 characters at 4 per token, and the message's overhead.
	if rec := g.run("to"); rec.InputTokens < 3*20000 || rec.InputTokens > 3*20100 || rec.OutputTokens != 3*10 || !rec.CostEstimated {
		t.Errorf("run %+v; want 3 prompts of about 20,000 tokens and 3 output limits of 10 charged, estimated", rec)
	}
}
