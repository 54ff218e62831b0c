package gateway_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/belay-run/belay/budget"
)

// A provider that answers a non-streamed call with an error status (429,
// 500) has not generated the answer. When that error's body then stalls
// (timeouts.idle) the attempt ends in a timeout, and is charged at most
// its prompt, not as an answer generated whole (its prompt and its whole
// output limit), which chargeUnanswered charged before it knew a status
// had come.
func TestAdv22r_ErrorStatusWithStalledBodyNotChargedItsOutputLimit(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				io.WriteString(w, `{"error":{"message":"slow down`)
				w.(http.Flusher).Flush()
				<-r.Context().Done() // the rest of the error body never comes
			}, adv22Config("openai", "m-x", "timeouts: {idle: 100ms}\npricing:\n  m-x: {input: 1, output: 100}\n"))
			st, body, cost := postCost(t, url, "/v1/chat/completions",
				`{"model":"m","max_completion_tokens":10000,"messages":[{"role":"user","content":"hi"}]}`)
			if st == 200 {
				t.Fatalf("status 200: %s", body)
			}
			// The output limit alone is 10,000 tokens at $100/M = $1.00;
			// the prompt is a few tokens at $1/M.
			if got := mustUSD(t, cost); got >= budget.Dollars(1)/10 {
				t.Errorf("HTTP %d whose error body stalled was charged %s (status %d: %s); want about nothing: the provider answered with an error, it generated nothing",
					status, got, st, body)
			}
		})
	}
}
