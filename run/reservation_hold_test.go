package run

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
)

// A killed run's in-flight call keeps its reservation until it settles
// what it used (adversarial review: released at the kill, another run of
// the tenant was admitted against the money, and the tenant spent $1.40 of
// a $1.00 budget).
func TestKillKeepsInFlightReservationsUntilTheySettle(t *testing.T) {
	f := acmeFixture(t)
	ctx := context.Background()
	r1 := f.start(t, Spec{ID: "r1", Tenant: "acme"})
	a, err := r1.Admit(ctx, modelStep(cents(80)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Kill(ctx, store.KillRun, "r1", "runaway"); err != nil {
		t.Fatal(err)
	}
	<-a.Context().Done()
	r2 := f.start(t, Spec{ID: "r2", Tenant: "acme"})
	if b, err := r2.Admit(ctx, modelStep(cents(80))); err == nil {
		_ = b.Settle(ctx, usage(80, 0), Outcome{})
		t.Fatal("a second run's 80¢ admitted while the killed run's canceled call still held 80¢ of the tenant's $1.00")
	}
	if err := a.Settle(ctx, usage(60, 0), Outcome{}); err != nil {
		t.Fatal(err)
	}
	bal := f.balance(t, budget.TenantScope("acme", budget.Month, time.Now()))
	if bal.Settled != cents(60) || bal.Reserved != 0 {
		t.Errorf("tenant balance %+v; want 60¢ settled, nothing held", bal)
	}
	// Settled, the money is free for the tenant's next call.
	r3 := f.start(t, Spec{ID: "r3", Tenant: "acme"})
	c, err := r3.Admit(ctx, modelStep(cents(40)))
	if err != nil {
		t.Fatalf("after the settle: %v", err)
	}
	_ = c.Settle(ctx, usage(40, 0), Outcome{})
}

// A call that runs past ReservationTTL keeps its money held: the process
// renews its open steps' reservations (adversarial review: after 15
// minutes the janitor released a live call's 80¢ of a $1.00 tenant budget,
// a second call was admitted against it, and the tenant spent $1.60).
func TestLongCallKeepsItsReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := acmeFixture(t)
		ctx := context.Background()
		long := f.start(t, Spec{ID: "long", Tenant: "acme", Limits: store.Limits{Deadline: time.Hour}})
		a, err := long.Admit(ctx, modelStep(cents(80)))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(16 * time.Minute) // the call still streams (fake time)
		synctest.Wait()
		other := f.start(t, Spec{ID: "other", Tenant: "acme", Limits: store.Limits{Deadline: time.Hour}})
		if b, err := other.Admit(ctx, modelStep(cents(80))); err == nil {
			_ = b.Settle(ctx, usage(80, 0), Outcome{})
			t.Fatal("a second 80¢ call admitted while the first, 16 minutes in, still held 80¢ of the tenant's $1.00")
		}
		if err := a.Settle(ctx, usage(80, 0), Outcome{}); err != nil {
			t.Fatal(err)
		}
		bal := f.balance(t, budget.TenantScope("acme", budget.Month, time.Now()))
		if bal.Settled != cents(80) || bal.Reserved != 0 {
			t.Errorf("tenant balance %+v; want 80¢ settled, nothing held", bal)
		}
	})
}

// A step of an ended run that never settles (a caller that forgets Settle
// and Fail) is not renewed: its money goes a ReservationTTL after its last
// renewal, not never.
func TestEndedRunStepsAreNotRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := acmeFixture(t)
		ctx := context.Background()
		r := f.start(t, Spec{ID: "forgot", Tenant: "acme"})
		if _, err := r.Admit(ctx, modelStep(cents(80))); err != nil {
			t.Fatal(err)
		}
		if err := f.m.Kill(ctx, store.KillRun, "forgot", "test"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultReservationTTL + 2*DefaultExpireEvery)
		synctest.Wait()
		bal := f.balance(t, budget.TenantScope("acme", budget.Month, time.Now()))
		if bal.Reserved != 0 {
			t.Errorf("tenant balance %+v; want the forgotten step's 80¢ released after the TTL", bal)
		}
	})
}

// Outcome.Parts prices each part at its own model, also when there is one
// (adversarial review: one part was priced at Outcome.Model, the deployment
// that served without a charge, and lost its Estimated flag).
func TestPartsPriceAtTheirOwnModel(t *testing.T) {
	p, err := budget.NewPricing(budget.PricingOptions{
		NoBuiltin: true,
		Overrides: map[string]budget.Price{
			"test/m":     {Input: budget.Dollars(10_000), Output: budget.Dollars(20_000)},
			"test/cheap": {Input: budget.Dollars(1), Output: budget.Dollars(1)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Pricing = p; c.KillPoll = -1 })
	ctx := context.Background()
	settle := func(id string, o Outcome, u budget.Usage) (budget.USD, bool) {
		a, err := f.start(t, Spec{ID: id}).Admit(ctx, modelStep(cents(50)))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Settle(ctx, u, o); err != nil {
			t.Fatal(err)
		}
		return a.Cost()
	}
	u := usage(10, 0)
	if c, est := settle("one", Outcome{Provider: "test", Model: "cheap", Parts: []UsagePart{{Provider: "test", Model: "m", Usage: u}}}, u); c != cents(10) || est {
		t.Errorf("one part: %s (estimated %v); want %s at test/m", c, est, cents(10))
	}
	if _, est := settle("est", Outcome{Parts: []UsagePart{{Provider: "test", Model: "m", Usage: u, Estimated: true}}}, u); !est {
		t.Error("one estimated part: the cost is not marked estimated")
	}
	two := []UsagePart{{Provider: "test", Model: "m", Usage: u}, {Provider: "test", Model: "cheap", Usage: usage(1_000_000, 0)}}
	if c, _ := settle("two", Outcome{Parts: two}, u.Add(usage(1_000_000, 0))); c != cents(10).Add(budget.Dollars(1)) {
		t.Errorf("two parts: %s; want %s", c, cents(10).Add(budget.Dollars(1)))
	}
}

// acmeFixture is a Manager whose tenant acme has a $1.00 budget, with no
// kill polling and no idle sweep.
func acmeFixture(t *testing.T) *fixture {
	return newFixture(t, func(c *Config) {
		c.KillPoll = -1
		c.IdleTTL = -1
		c.TenantBudgets = map[string]TenantBudget{"acme": {Limit: cents(100)}}
	})
}
