package run

import (
	"context"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// Review finding (session 3): the gateway's shutdown (EndFresh) stops a Single run with its step
// still streaming (a soft end); the step then finishes and is charged. The
// stored record must carry the step's cost and tokens, as the ledger does.
func TestReview3SingleEndFreshThenSettleKeepsCost(t *testing.T) {
	for _, inMemory := range []bool{true, false} {
		t.Run(map[bool]string{true: "first-step-in-memory", false: "ledger"}[inMemory], func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.FirstStepInMemory = inMemory })
			r := f.start(t, Spec{ID: "one", Fresh: true, Single: true})
			ctx := context.Background()
			a, err := r.Admit(ctx, modelStep(cents(10)))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := f.m.EndFresh(ctx); err != nil || n != 1 {
				t.Fatalf("EndFresh = %d, %v", n, err)
			}
			// The step, stopped softly, finishes and is charged.
			if err := a.Settle(ctx, usage(2, 1), Outcome{}); err != nil {
				t.Fatal(err)
			}
			if err := f.m.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			rec, err := f.st.GetRun(ctx, "one")
			if err != nil {
				t.Fatal(err)
			}
			led, err := f.st.Balance(ctx, budget.RunScope("one"))
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status == store.RunRunning {
				t.Errorf("record still running: %+v", rec)
			}
			if rec.Cost != led.Settled || rec.Cost != cents(4) || rec.InputTokens != 2 || rec.OutputTokens != 1 {
				t.Errorf("stored record cost %s, tokens %d/%d; ledger settled %s; want %s and 2/1 in both",
					rec.Cost, rec.InputTokens, rec.OutputTokens, led.Settled, cents(4))
			}
		})
	}
}

// Review finding (session 3): a client that sends the id of a gateway-named (Single) run back to
// another replica while the single call is in flight makes that replica
// create the record (Get: not found, so Start). When the single call then
// ends, CreateRunSpent conflicts and its spend — which was to go in the
// same transaction — is never written to the ledger: the tenant's budget
// does not see money that was spent.
func TestReview3SingleCreateConflictLosesSpend(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.FirstStepInMemory = true })
	ctx := context.Background()
	r := f.start(t, Spec{ID: "one", Fresh: true, Single: true})
	a, err := r.Admit(ctx, modelStep(cents(10)))
	if err != nil {
		t.Fatal(err)
	}
	// Another replica, same store: the gateway's runTurns.Admit for a call
	// that names the run (Get: not found, then Start).
	other, err := NewManager(Config{Store: f.st, Pricing: testPricing(t), Sink: &recSink{}, Owner: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Get(ctx, "one"); err == nil {
		t.Fatal("the single run is in the store before it ended")
	}
	if _, err := other.Start(ctx, Spec{ID: "one", Labels: map[string]string{"source": "gateway"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, usage(2, 1), Outcome{}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ := f.st.GetRun(ctx, "one")
	tenant := budget.TenantScope(DefaultTenant, "", rec.Started)
	tb, _ := f.st.Balance(ctx, tenant)
	rb, _ := f.st.Balance(ctx, budget.RunScope("one"))
	if tb.Settled != cents(4) || rb.Settled != cents(4) {
		t.Errorf("ledger after the single step spent %s: tenant settled %s, run settled %s (record cost %s)",
			cents(4), tb.Settled, rb.Settled, rec.Cost)
	}
}

// Review finding (session 3): same root cause as above: a kill lands after the upstream answered
// (the gateway settles with no error); the record keeps cost 0.
func TestReview3SingleKilledThenSettledOKKeepsCost(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.FirstStepInMemory = true })
	ctx := context.Background()
	r := f.start(t, Spec{ID: "one", Fresh: true, Single: true})
	a, err := r.Admit(ctx, modelStep(cents(10)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.m.Kill(ctx, store.KillRun, "one", "ops"); err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, usage(2, 1), Outcome{}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ := f.st.GetRun(ctx, "one")
	led, _ := f.st.Balance(ctx, budget.RunScope("one"))
	if rec.Cost != led.Settled {
		t.Errorf("stored record cost %s (tokens %d/%d, %s); ledger settled %s", rec.Cost,
			rec.InputTokens, rec.OutputTokens, rec.Status, led.Settled)
	}
}

// Review finding (session 3): a second call on a Single run while its one step is in flight is
// to be refused "without stopping the run". When the run has a token (or
// turn) limit, checkLocked refuses the second step first, with
// BudgetExceeded (or MaxTurnsExceeded), and refuse stops the run: the
// single call, which then succeeds, is recorded stopped, and (see the
// EndFresh test) with none of its cost or tokens.
func TestReview3SingleSecondCallStopsRunWithLimits(t *testing.T) {
	for name, lim := range map[string]store.Limits{
		"max_tokens": {MaxTokens: 100},
		"max_turns":  {MaxTurns: 1},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.FirstStepInMemory = true })
			ctx := context.Background()
			r := f.start(t, Spec{ID: "one", Fresh: true, Single: true, Limits: lim})
			step := modelStep(cents(10))
			step.EstimatedTokens = 60
			a, err := r.Admit(ctx, step)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Admit(ctx, step) // the client sent the id back
			if fe := failure.As(err); fe == nil || fe.Reason != failure.RunEnded {
				t.Errorf("second step: %v; want run_ended", err)
			}
			if err := a.Settle(ctx, usage(2, 1), Outcome{}); err != nil {
				t.Fatal(err)
			}
			rec := f.stored(t, "one")
			if rec.Status != store.RunSucceeded || rec.Cost != cents(4) {
				t.Errorf("record = %s %q cost %s; want succeeded, cost %s", rec.Status, rec.StopReason, rec.Cost, cents(4))
			}
		})
	}
}

// gateCreate is a memstore whose CreateRun (the plain one) signals entered
// and waits for release.
type gateCreate struct {
	*memstore.Store
	entered, release chan struct{}
}

func (g *gateCreate) CreateRun(ctx context.Context, r store.Run) error {
	close(g.entered)
	<-g.release
	return g.Store.CreateRun(ctx, r)
}

// Review finding (session 3): a kill of a Single run writes its record (CreateRun, no spends yet)
// while the killed step settles in another goroutine (the gateway's
// request). Settle hands its spend to the record's creation
// (spendWithCreate: the record is not created yet); the kill's write then
// marks the record created and drops withCreate/createSpends it never
// wrote. The spend never reaches the ledger, and the step's privateOpen is
// never released.
func TestReview3SingleKillRacesSettleLosesSpend(t *testing.T) {
	st := &gateCreate{Store: memstore.New(), entered: make(chan struct{}), release: make(chan struct{})}
	m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1, FirstStepInMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	r, err := m.Start(ctx, Spec{ID: "one", Fresh: true, Single: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Admit(ctx, modelStep(cents(10)))
	if err != nil {
		t.Fatal(err)
	}
	killed := make(chan error, 1)
	go func() { killed <- m.Kill(ctx, store.KillRun, "one", "ops") }()
	<-st.entered // the kill is writing the record
	<-a.Context().Done()
	// The gateway's request: the stream was cut by the kill; its partial
	// usage is charged.
	if err := a.Settle(ctx, usage(2, 1), Outcome{Err: a.cause(context.Canceled)}); err != nil {
		t.Fatal(err)
	}
	close(st.release)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ := st.GetRun(ctx, "one")
	rb, _ := st.Balance(ctx, budget.RunScope("one"))
	tb, _ := st.Balance(ctx, budget.TenantScope(DefaultTenant, "", rec.Started))
	if fe := failure.As(a.cause(context.Canceled)); fe == nil || fe.Reason != failure.Killed {
		t.Fatalf("cause = %v", a.cause(context.Canceled))
	}
	r.mu.Lock()
	po := r.privateOpen
	r.mu.Unlock()
	if rb.Settled != cents(4) || tb.Settled != cents(4) || po != 0 {
		t.Errorf("after a %s step: run ledger %s, tenant ledger %s, record cost %s (%s), privateOpen %d",
			cents(4), rb.Settled, tb.Settled, rec.Cost, rec.Status, po)
	}
}
