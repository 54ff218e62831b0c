package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/gateway"
)

// A stream announces X-Belay-Cost-Usd among its trailers, and every
// stream that ends sends it: a stream ended by a panic too (panicked's
// committed branch set only the failure trailers, though the turn was
// settled and charged).
func TestAdv22r_PanickedStreamSendsItsCostTrailer(t *testing.T) {
	g := newGWOpts(t, oneAlias("", openAIDep("d", "gpt-4o-mini", "http://127.0.0.1:1")), gateway.Options{Upstream: streamPanics{}})
	resp, body := g.do("POST", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"content":"Hel"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if resp.Trailer.Get(failure.HeaderReason) == "" {
		t.Fatalf("no failure trailer: %v", resp.Trailer)
	}
	rec := g.run(resp.Header.Get("X-Belay-Run-Id"))
	if c := resp.Trailer.Get(gateway.HeaderCostUSD); c == "" {
		t.Errorf("a stream ended by a panic: trailers %v, no %s; the call was charged %s (run record)", resp.Trailer, gateway.HeaderCostUSD, rec.Cost)
	}
}
