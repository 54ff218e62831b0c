package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/store"
)

// belay_stops_total counts runs belay stopped, by reason, each once; an
// ordinary refusal (malformed body, unknown model, bad key, a malformed
// limit header) is counted in belay_requests_total by its status only
// (newcomer finding: a 400 for malformed JSON counted as a stop with
// reason invalid_request).
func TestStopsCountStoppedRunsNotRefusals(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "tenants: [{name: acme, key: vk-acme}]\n"})
	const chat, messages = "/v1/chat/completions", "/v1/messages"
	const okChat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	key := func(hdr ...string) map[string]string {
		m := map[string]string{"Authorization": "Bearer vk-acme"}
		for i := 0; i+1 < len(hdr); i += 2 {
			m[hdr[i]] = hdr[i+1]
		}
		return m
	}
	for _, c := range []struct {
		path, body string
		hdr        map[string]string
		status     int
	}{
		{chat, `{"model":`, key(), 400},
		{messages, `[1,2`, key(), 400},
		{chat, `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, key(), 404},
		{chat, okChat, map[string]string{"Authorization": "Bearer not-a-key"}, 401},
		{chat, okChat, key("X-Belay-Deadline", "soon"), 400},
	} {
		if resp, body := h.post(c.path, c.body, c.hdr); resp.StatusCode != c.status {
			t.Fatalf("%s %s: %d %s, want %d", c.path, c.body, resp.StatusCode, body, c.status)
		}
	}
	body := scrape(t, h, "/metrics")
	for _, want := range []string{
		`belay_stops_total{reason="budget_exceeded"} 0`, `belay_stops_total{reason="deadline_exceeded"} 0`,
		`belay_stops_total{reason="killed"} 0`, `belay_stops_total{reason="max_turns_exceeded"} 0`,
		`belay_requests_total{dialect="openai",status="400"} 2`, `belay_requests_total{dialect="anthropic",status="400"} 1`,
		`belay_requests_total{dialect="openai",status="404"} 1`, `belay_requests_total{dialect="openai",status="401"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if got := grepLines(body, "belay_stops_total{"); strings.Count(got, "\n") != 3 {
		t.Errorf("stops after refusals only:\n%s\nwant the four reasons at 0", got)
	}

	// Runs stopped: by their turns (refused twice after: one stop), by
	// their money, and by a kill while idle (refused after: one stop).
	run := func(id string, hdr ...string) int {
		resp, _ := h.post(chat, okChat, key(append([]string{"X-Belay-Run-Id", id}, hdr...)...))
		return resp.StatusCode
	}
	for i, want := range []int{200, 403, 403} {
		if got := run("turns-1", "X-Belay-Max-Turns", "1"); got != want {
			t.Fatalf("turns-1 call %d: %d, want %d", i+1, got, want)
		}
	}
	if resp, body := h.post(chat, okChat, key("X-Belay-Max-Cost-Usd", "0.000000000001")); resp.StatusCode != 402 {
		t.Fatalf("budget: %d %s", resp.StatusCode, body)
	}
	if got := run("kill-1"); got != 200 {
		t.Fatalf("kill-1: %d", got)
	}
	if err := h.stack.Runs.Kill(context.Background(), store.KillRun, "acme~kill-1", "runaway"); err != nil {
		t.Fatal(err)
	}
	if got := run("kill-1"); got != 403 {
		t.Fatalf("kill-1 after the kill: %d, want 403", got)
	}
	h.quiesce()
	body = scrape(t, h, "/metrics")
	for _, want := range []string{
		`belay_stops_total{reason="budget_exceeded"} 1`, `belay_stops_total{reason="deadline_exceeded"} 0`,
		`belay_stops_total{reason="killed"} 1`, `belay_stops_total{reason="max_turns_exceeded"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(body, "belay_stops_total"))
		}
	}
}

// belay_spend_usd_total is the exact sum of the costs charged: ten calls
// of $0.00075 read $0.0075, not the float sum $0.007499999999999999 (a
// newcomer saw $0.015227099999999997).
func TestSpendMetricIsExact(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 100, 50) // gpt-4o: 100·2.50 + 50·10 per million = $0.00075
	})
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
models:
  - alias: m
    deployments:
      - `+openAIDep("d", "gpt-4o", up.URL)+`
`, nil)
	for range 10 {
		if resp, b := g.do("POST", "/v1/chat/completions", chat); resp.StatusCode != 200 || resp.Header.Get("X-Belay-Cost-Usd") != "0.00075" {
			t.Fatalf("status %d, cost %q: %s", resp.StatusCode, resp.Header.Get("X-Belay-Cost-Usd"), b)
		}
	}
	_, text := g.do("GET", "/metrics", "")
	const want = `belay_spend_usd_total{tenant="default"} 0.0075`
	if !strings.Contains(text, want+"\n") {
		i := strings.Index(text, "belay_spend_usd_total{")
		t.Errorf("metrics lack %q; have %.80q", want, text[max(i, 0):])
	}
}
