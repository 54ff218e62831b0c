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

// StartRun refuses a run no request could reach: another tenant than
// "default" on a gateway without tenants, and an id X-Belay-Run-Id could
// not carry (adversary finding: both started, and every call naming them
// was refused, 403 or 400).
func TestStartRunRefusesUnreachableRuns(t *testing.T) {
	open := newGW(t, "store: memory://\n", nil)
	withTenants := newGW(t, "store: memory://\ntenants:\n  - {name: acme, key: k-acme}\n", nil)
	ctx := context.Background()
	long := strings.Repeat("a", 129)
	for _, tc := range []struct {
		name string
		g    *gw
		spec run.Spec
		want string // in the error; "" for a run started
	}{
		{"open: another tenant", open, run.Spec{Tenant: "acme"}, `tenant "acme": the config has no tenants`},
		{"open: default tenant", open, run.Spec{Tenant: "default", ID: "r-1"}, ""},
		{"open: a space", open, run.Spec{ID: "order 42"}, `run id "order 42"`},
		{"open: a slash", open, run.Spec{ID: "run/1"}, `run id "run/1"`},
		{"open: 129 characters", open, run.Spec{ID: long}, "want 1-128 characters"},
		{"open: 128 characters", open, run.Spec{ID: long[:128]}, ""},
		{"tenants: a space", withTenants, run.Spec{Tenant: "acme", ID: "order 42"}, `run id "order 42"`},
		{"tenants: prefixed twice", withTenants, run.Spec{Tenant: "acme", ID: "acme~acme~x"}, `run id "acme~x"`},
		{"tenants: prefixed once", withTenants, run.Spec{Tenant: "acme", ID: "acme~x"}, ""},
	} {
		r, err := tc.g.stack.StartRun(ctx, tc.spec)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
		if err == nil {
			if tc.want != "" {
				t.Errorf("%s: started run %s", tc.name, r.ID())
			}
			_ = r.Finish(ctx, store.RunSucceeded, nil)
		}
	}
}
