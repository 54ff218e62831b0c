package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Run ids made only of dots ("." and "..", path segments a URL client
// resolves away, so the run API could not name them) are refused on the
// model endpoints, with the rule, before anything counts (review finding:
// the model endpoints took them and the run API could not reach them).
func TestAdvDotRunIDs(t *testing.T) {
	calls := 0
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Replace(strings.Replace(okCompletion, "%d", "10", 1), "%d", "5", 1))
	})
	g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL)), nil)
	for _, id := range []string{".", "..", "..."} {
		resp, out := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", id)
		if resp.StatusCode != 400 || !strings.Contains(out, "not only dots") || resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("call %q: %d %s; want 400 naming the rule", id, resp.StatusCode, out)
		}
	}
	for _, id := range []string{".a", "a..b", "v1.2"} { // dots with more are ids
		if resp, out := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", id); resp.StatusCode != 200 {
			t.Errorf("call %q: %d %s", id, resp.StatusCode, out)
		}
		if resp, out := g.do("GET", "/v1/belay/runs/"+id, ""); resp.StatusCode != 200 || decodeRun(t, out).Run.Turns != 1 {
			t.Errorf("read %q: %d %s", id, resp.StatusCode, out)
		}
	}
	if calls != 3 {
		t.Errorf("upstream calls %d; want 3 (the refused ids sent nothing)", calls)
	}
}
