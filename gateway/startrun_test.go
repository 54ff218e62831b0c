package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
)

// Stack.StartRun bounds a library run by the config's limits for its
// tenant, as the gateway bounds a run named by X-Belay-Run-Id: a limit
// the spec leaves 0 is the config's, one it sets is kept where tighter
// (newcomer finding: Runs.Start with zero Limits ran unbounded under a
// config with limits).
func TestStartRunTakesConfigLimits(t *testing.T) {
	g := newGW(t, `
store: memory://
limits: {max_turns: 8, deadline: 2m, max_cost_usd: 1.00}
tenants:
  - {name: acme, key: k-acme, limits: {max_turns: 4, max_tokens: 5000}}
  - {name: globex, key: k-globex}
`, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec run.Spec
		want store.Limits
	}{
		{"zero takes the config's", run.Spec{Tenant: "globex"},
			store.Limits{MaxTurns: 8, Deadline: 2 * time.Minute, MaxCost: budget.Dollars(1)}},
		{"tighter kept, looser bounded", run.Spec{Tenant: "globex", Limits: store.Limits{MaxTurns: 3, Deadline: time.Hour, MaxTokens: 100, MaxCost: budget.Dollars(5)}},
			store.Limits{MaxTurns: 3, Deadline: 2 * time.Minute, MaxTokens: 100, MaxCost: budget.Dollars(1)}},
		{"the tenant's limits over the global ones", run.Spec{Tenant: "acme", Limits: store.Limits{MaxTurns: 6}},
			store.Limits{MaxTurns: 4, Deadline: 2 * time.Minute, MaxTokens: 5000, MaxCost: budget.Dollars(1)}},
	} {
		r, err := g.stack.StartRun(ctx, tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Record().Limits; got != tc.want {
			t.Errorf("%s: limits %+v, want %+v", tc.name, got, tc.want)
		}
		if !strings.HasPrefix(r.ID(), tc.spec.Tenant+"~") {
			t.Errorf("%s: run id %q, want it under %s~ (the id the tenant's requests reach)", tc.name, r.ID(), tc.spec.Tenant)
		}
		if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Runs.Start applies the spec alone.
	r, err := g.stack.Runs.Start(ctx, run.Spec{Tenant: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Record().Limits; got != (store.Limits{}) {
		t.Errorf("Runs.Start: limits %+v, want none", got)
	}
}
