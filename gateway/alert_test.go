package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/belay-run/belay/gateway"
)

// A tenant's budget alert (budget.alert_at) is a WARN log line and a
// metric, not only an event in a run span nobody reads (newcomer
// finding). Each call costs $0.075 (gpt-4o-mini, 100k tokens in and out)
// of acme's $1: the 5% threshold is crossed by the first call and the 10%
// one by the second, each once; the 50% one is not reached.
func TestBudgetAlertIsLoggedAndCounted(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 100_000, 100_000)
	})
	var logged bytes.Buffer
	var mu sync.Mutex
	g := newGWOpts(t, oneAlias("", openAIDep("d", "gpt-4o-mini", up.URL))+
		"tenants: [{name: acme, key: vk-acme, budget: {usd: 1, alert_at: [0.05, 0.1, 0.5]}}]\n",
		gateway.Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	for i := range 3 {
		resp, b := g.do("POST", "/v1/chat/completions", chat, "Authorization", "Bearer vk-acme")
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, b)
		}
	}
	flushRuns(t, g.stack)
	_, metrics := g.do("GET", "/metrics", "")
	for _, want := range []string{
		`belay_budget_alerts_total{scope="tenant",threshold="0.05"} 1`,
		`belay_budget_alerts_total{scope="tenant",threshold="0.1"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `threshold="0.5"`) {
		t.Error("/metrics counts the 50% threshold, which $0.225 of $1 does not reach")
	}
	mu.Lock()
	log := logged.String()
	mu.Unlock()
	if n := strings.Count(log, `level=WARN msg="budget alert"`); n != 2 {
		t.Errorf("%d budget alert lines, want 2; log:\n%s", n, log)
	}
	// The spend is the settled balance when the crossing was seen: the
	// second call's, or the third's too when the two calls (runs of their
	// own, settled after their answers) settled before the second's check.
	if !strings.Contains(log, "threshold=0.1 spent_usd=0.15 limit_usd=1") &&
		!strings.Contains(log, "threshold=0.1 spent_usd=0.225 limit_usd=1") {
		t.Errorf("log lacks the 10%% alert's amounts ($0.15, or $0.225 after three calls):\n%s", log)
	}
}
