package run

import (
	"context"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// A call served with priority processing is charged the model's priority
// price; on a model without one it is charged the standard price, marked
// estimated (the provider bills more). A priority call that used no token
// counts as no usage.
func TestPriorityUsagePrice(t *testing.T) {
	ctx := context.Background()
	m, err := NewManager(Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := m.Start(ctx, Spec{Limits: store.Limits{MaxCost: budget.Dollars(10)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model     string
		want      string
		estimated bool
	}{
		{"gpt-4o", "0.442", false}, // 100,000 × $4.25/M + 1,000 × $17/M
		{"o3", "0.208", true},      // no priority price: 100,000 × $2/M + 1,000 × $8/M, estimated
	} {
		a, err := r.Admit(ctx, Step{Provider: "openai", Model: c.model, PromptTokens: 100_000, MaxOutputTokens: 1000, EstimatedCost: budget.Dollars(1)})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Settle(ctx, budget.Usage{InputTokens: 100_000, OutputTokens: 1000, Priority: true}, Outcome{}); err != nil {
			t.Fatal(err)
		}
		want, _ := budget.ParseUSD(c.want)
		if got, est := a.Cost(); got != want || est != c.estimated {
			t.Errorf("%s priority call: cost %s (estimated %v), want %s (estimated %v)", c.model, got, est, want, c.estimated)
		}
	}
	a, err := r.Admit(ctx, Step{Provider: "acme", Model: "unknown", PromptTokens: 10, MaxOutputTokens: 10, EstimatedCost: budget.Micros(500)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, budget.Usage{Priority: true}, Outcome{Err: context.Canceled}); err != nil {
		t.Fatal(err)
	}
	if got, est := a.Cost(); got != 0 || est {
		t.Errorf("failed priority call without tokens on an unpriced model: cost %s (estimated %v), want $0", got, est)
	}
}
