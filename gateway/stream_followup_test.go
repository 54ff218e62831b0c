package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A streaming client that sends its run's next call as soon as it has
// [DONE] (as an SDK does that stops at [DONE] and closes the response
// later) is admitted against the first step's actual usage — as when the
// gateway settled right after relaying [DONE] — even when the upstream's
// body end comes late. Each call reserves ~410 of the run's 700 tokens
// and uses 4: two sequential calls fit, two concurrent ones do not.
func TestStreamFollowUpRightAfterDoneSeesSettledTokens(t *testing.T) {
	release := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"stream":true`) {
			fmt.Fprintf(w, okCompletion, 3, 1)
			return
		}
		openAIStreamHead(w)
		<-release // the body's end comes after the follow-up was answered
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 50, deadline: 1m, max_cost_usd: 5, max_tokens: 700}"), nil)
	stream := `{"model":"m","stream":true,"max_tokens":400,"messages":[{"role":"user","content":"hello"}]}`
	resp, br, _ := streamTo(t, g.srv.URL, "/v1/chat/completions", stream, "fu-1", "[DONE]")
	defer resp.Body.Close()
	fresp, fbody := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":400,"messages":[{"role":"user","content":"hello"}]}`,
		"X-Belay-Run-Id", "fu-1")
	close(release)
	io.Copy(io.Discard, br)
	if fresp.StatusCode != 200 {
		t.Errorf("follow-up sent right after [DONE]: %d %s; want 200", fresp.StatusCode, fbody)
	}
	if r := g.run("fu-1"); r.Status != "running" {
		t.Errorf("run %s %q after two calls that fit its limit; want running", r.Status, r.StopReason)
	}
}
