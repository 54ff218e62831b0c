package transport_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/transport"
)

// An in-process client that has its whole answer (it decodes the JSON
// and closes the body, not reading to EOF) and closes the stack at once
// finds the call settled and recorded: the step is quoted before the
// answer is written, and Stack.Close waits for quoted steps. (A review
// found a settle in a goroutine of its own could land after Close.)
func TestCloseRightAfterAnswerKeepsTheCall(t *testing.T) {
	ctx := context.Background()
	const rounds = 50
	lost, noCost := 0, 0
	for i := range rounds {
		ms := memstore.New()
		cfg := config.Default()
		cfg.Store = "memory://"
		st, err := gateway.Build(ctx, cfg, gateway.Options{Store: ms, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: transport.New(transport.Options{Handler: st.Server.Handler(), RunID: "r"})}
		req, _ := http.NewRequest("POST", "http://x/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
			t.Fatalf("round %d: %d %v", i, resp.StatusCode, err)
		}
		resp.Body.Close()
		cost := resp.Header.Get("X-Belay-Cost-Usd")
		if err := st.Close(ctx); err != nil {
			t.Logf("round %d: close: %v", i, err)
		}
		spans, _ := ms.RunSpans(ctx, "r")
		rec, _ := ms.GetRun(ctx, "r")
		model := 0
		for _, s := range spans {
			if s.Kind == "model" || strings.HasPrefix(s.Name, "chat") {
				model++
			}
		}
		if model == 0 {
			lost++
			if lost <= 3 {
				t.Logf("round %d: answered (cost %s) but no model span stored after Close; record turns=%d cost=%s spans=%d", i, cost, rec.Turns, rec.Cost.Decimal(), len(spans))
			}
		}
		if rec.Cost.Decimal() != cost {
			noCost++
			if noCost <= 3 {
				t.Logf("round %d: header cost %s, stored record cost %s", i, cost, rec.Cost.Decimal())
			}
		}
	}
	if lost > 0 || noCost > 0 {
		t.Errorf("of %d answered calls followed by Stack.Close: %d lost their model span, %d have a stored cost different from x-belay-cost-usd", rounds, lost, noCost)
	}
}
