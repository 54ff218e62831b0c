package run

import (
	"context"
	"errors"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// A model without a price: a call that used tokens is charged its reserved
// estimate (never $0); a call that failed before using any is charged $0.
func TestUnpricedModelCharges(t *testing.T) {
	ctx := context.Background()
	m, err := NewManager(Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := m.Start(ctx, Spec{Limits: store.Limits{MaxCost: budget.Dollars(1)}})
	if err != nil {
		t.Fatal(err)
	}
	step := Step{Provider: "acme", Model: "unknown-model", PromptTokens: 1000, MaxOutputTokens: 1000, EstimatedCost: budget.Micros(500)}

	a, err := r.Admit(ctx, step)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, budget.Usage{}, Outcome{Err: errors.New("connection refused")}); err != nil {
		t.Fatal(err)
	}
	if c, est := a.Cost(); c != 0 || est {
		t.Errorf("failed call with no usage: cost %s (estimated %v), want $0", c, est)
	}

	a, err = r.Admit(ctx, step)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, budget.Usage{InputTokens: 1000, OutputTokens: 10}, Outcome{}); err != nil {
		t.Fatal(err)
	}
	if c, est := a.Cost(); c != budget.Micros(500) || !est {
		t.Errorf("call with usage: cost %s (estimated %v), want the estimate $0.0005, estimated", c, est)
	}
	if got := r.Record().Cost; got != budget.Micros(500) {
		t.Errorf("run cost %s, want $0.0005", got)
	}
}
