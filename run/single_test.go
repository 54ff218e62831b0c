package run

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// countWrites counts the run-record writes that reach the store.
type countWrites struct {
	Store
	mu                   sync.Mutex
	creates, saves, upds int
	spent                int // creates with spends (store.RunSpender)
	created              []store.Run
}

func (c *countWrites) CreateRun(ctx context.Context, r store.Run) error {
	c.mu.Lock()
	c.creates++
	c.created = append(c.created, r)
	c.mu.Unlock()
	return c.Store.CreateRun(ctx, r)
}

func (c *countWrites) UpdateRun(ctx context.Context, r store.Run) error {
	c.mu.Lock()
	c.upds++
	c.mu.Unlock()
	return c.Store.UpdateRun(ctx, r)
}

func (c *countWrites) SaveRun(ctx context.Context, r store.Run, turns, cost budget.Scope) error {
	c.mu.Lock()
	c.saves++
	c.mu.Unlock()
	return c.Store.(store.RunSaver).SaveRun(ctx, r, turns, cost)
}

// countSpender is countWrites over a store.RunSpender.
type countSpender struct{ *countWrites }

func (c countSpender) CreateRunSpent(ctx context.Context, r store.Run, spends []budget.Reservation) error {
	c.mu.Lock()
	c.creates++
	c.spent++
	c.created = append(c.created, r)
	c.mu.Unlock()
	return c.Store.(store.RunSpender).CreateRunSpent(ctx, r, spends)
}

// A Spec.Single run (the gateway's run of a call whose client names none)
// ends with its one step, by its outcome, with one record write that is
// already the ending (with its spend, on a store.RunSpender), and leaves
// memory.
func TestSingleRunEndsWithItsStep(t *testing.T) {
	for _, spender := range []bool{true, false} {
		t.Run(fmt.Sprintf("spender=%v", spender), func(t *testing.T) { testSingleRunEnds(t, spender) })
	}
}

func testSingleRunEnds(t *testing.T, spender bool) {
	for _, tc := range []struct {
		name   string
		finish func(a *Admitted) error
		status store.RunStatus
		cost   budget.USD
	}{
		{"settled", func(a *Admitted) error { return a.Settle(context.Background(), usage(2, 1), Outcome{}) },
			store.RunSucceeded, cents(4)},
		{"settled with an error", func(a *Admitted) error {
			return a.Settle(context.Background(), usage(1, 0), Outcome{Err: errors.New("stream cut")})
		}, store.RunFailed, cents(1)},
		{"failed", func(a *Admitted) error { return a.Fail(context.Background(), errors.New("upstream 500")) },
			store.RunFailed, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.FirstStepInMemory = true })
			cw := &countWrites{Store: f.st}
			f.m.st = cw
			if spender {
				f.m.st = countSpender{cw}
			}
			r := f.start(t, Spec{ID: "one", Fresh: true, Single: true})
			a, err := r.Admit(context.Background(), modelStep(cents(10)))
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.finish(a); err != nil {
				t.Fatal(err)
			}
			rec := f.stored(t, "one")
			if rec.Status != tc.status || rec.Turns != 1 || rec.Cost != tc.cost || rec.Ended.IsZero() {
				t.Fatalf("record = %+v; want %s, 1 turn, cost %s, an end time", rec, tc.status, tc.cost)
			}
			if tc.status == store.RunFailed && rec.Error == "" {
				t.Errorf("failed record without its error: %+v", rec)
			}
			cw.mu.Lock()
			creates, saves, upds, first, spent := cw.creates, cw.saves, cw.upds, cw.created[0], cw.spent
			cw.mu.Unlock()
			if spender != (spent == 1) {
				t.Errorf("%d creates with spends; want 1 on a store.RunSpender, else 0", spent)
			}
			if creates != 1 || saves != 0 || upds != 0 || first.Status != tc.status {
				t.Errorf("record writes: %d creates (first %s), %d saves, %d updates; want one create, already %s",
					creates, first.Status, saves, upds, tc.status)
			}
			if got := f.balance(t, budget.RunScope("one")); got.Settled != tc.cost || got.Reserved != 0 {
				t.Errorf("ledger of the run = %+v; want %s settled, nothing reserved", got, tc.cost)
			}
			tenant := budget.TenantScope(DefaultTenant, "", rec.Started)
			if got := f.balance(t, tenant); got.Settled != tc.cost || got.Reserved != 0 {
				t.Errorf("ledger of the tenant = %+v; want %s settled, nothing reserved", got, tc.cost)
			}
			f.m.sweep() // evicts what may go (a write that just ended evicts it too, a moment later)
			if n := f.m.Live(); n != 0 {
				t.Errorf("%d runs in memory after the single step; want 0", n)
			}
			runs := f.sink.byKind(trace.KindRun)
			if len(runs) != 1 || runs[0].End.IsZero() {
				t.Errorf("run spans = %+v; want one, ended", runs)
			}
			// The id came back to the caller: a call with it is refused.
			if _, err := r.Admit(context.Background(), modelStep(cents(1))); err == nil {
				t.Error("a step after the single run ended was admitted")
			}
			got, err := f.m.Get(context.Background(), "one")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := got.Admit(context.Background(), modelStep(cents(1))); failure.As(err) == nil {
				t.Errorf("a step on the ended single run through Get: %v, want a refusal", err)
			}
		})
	}
}

// A second step while the single step is in flight (its id is in the
// stream's headers) is refused without stopping the run, which ends by its
// step's outcome.
func TestSingleRunRefusesASecondStep(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.FirstStepInMemory = true })
	r := f.start(t, Spec{ID: "one", Fresh: true, Single: true})
	ctx := context.Background()
	a, err := r.Admit(ctx, modelStep(cents(10)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Admit(ctx, modelStep(cents(10)))
	wantReason(t, err, failure.RunEnded, failure.Fatal)
	if a.Context().Err() != nil {
		t.Fatal("the refusal of a second step canceled the first")
	}
	if err := a.Settle(ctx, usage(1, 1), Outcome{}); err != nil {
		t.Fatal(err)
	}
	if rec := f.stored(t, "one"); rec.Status != store.RunSucceeded || rec.Turns != 1 || rec.StopReason != "" {
		t.Fatalf("record = %+v; want succeeded with one turn", rec)
	}
}

// A single run whose one admission is refused by a limit ends stopped; one
// whose admission fails otherwise (the store) ends failed, not running.
func TestSingleRunAdmissionFails(t *testing.T) {
	f := newFixture(t, nil)
	r := f.start(t, Spec{ID: "over", Fresh: true, Single: true, Limits: store.Limits{MaxCost: cents(1)}})
	_, err := r.Admit(context.Background(), modelStep(cents(5)))
	wantReason(t, err, failure.BudgetExceeded, failure.Fatal)
	if rec := f.stored(t, "over"); rec.Status != store.RunStopped || rec.StopReason != string(failure.BudgetExceeded) {
		t.Errorf("record after a refused single step = %+v; want stopped budget_exceeded", rec)
	}

	synctest.Test(t, func(t *testing.T) {
		st := &failingStore{Store: memstore.New()}
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		r, err := m.Start(ctx, Spec{ID: "down", Fresh: true, Single: true})
		if err != nil {
			t.Fatal(err)
		}
		st.fail.Store(true)
		if _, err := r.Admit(ctx, modelStep(cents(5))); !errors.Is(err, errDown) {
			t.Fatalf("Admit with the store down: %v, want its error", err)
		}
		if rec := r.Record(); rec.Status != store.RunFailed || rec.Turns != 0 {
			t.Errorf("single run after its admission failed = %+v; want failed, no turn", rec)
		}
		st.fail.Store(false) // the record write is retried until it lands
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if rec, err := st.GetRun(ctx, "down"); err != nil || rec.Status != store.RunFailed {
			t.Errorf("stored record = %+v, %v; want failed", rec, err)
		}
	})
}

// A Single run has no timer of its own: its step's context ends at the
// run's deadline, with the run's DeadlineExceeded cause.
func TestSingleRunDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := NewManager(Config{Store: memstore.New(), Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		r, err := m.Start(ctx, Spec{ID: "slow", Fresh: true, Single: true, Limits: store.Limits{Deadline: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Admit(ctx, modelStep(cents(1)))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(999 * time.Millisecond)
		if a.Context().Err() != nil {
			t.Fatal("the step's context ended before the run's deadline")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if a.Context().Err() == nil {
			t.Fatal("the step's context outlived the run's deadline")
		}
		fe := wantReason(t, context.Cause(a.Context()), failure.DeadlineExceeded, failure.Fatal)
		if err := a.Fail(ctx, fe); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if rec := r.Record(); rec.Status != store.RunStopped || rec.StopReason != string(failure.DeadlineExceeded) {
			t.Errorf("record = %+v; want stopped deadline_exceeded", rec)
		}
	})
}

// Newcomer finding (session 3): a tenant alert fired by a Single run's
// step was recorded as an event after the run's span had been written at
// its end, so no trace showed it. The run span is written again with it.
func TestSingleRunAlertInTrace(t *testing.T) {
	for _, inMemory := range []bool{true, false} {
		t.Run(fmt.Sprintf("first-step-in-memory=%v", inMemory), func(t *testing.T) {
			f := newFixture(t, func(c *Config) {
				c.FirstStepInMemory = inMemory
				c.TenantBudgets = map[string]TenantBudget{DefaultTenant: {Limit: budget.Dollars(1), AlertAt: []float64{0.01}}}
			})
			r := f.start(t, Spec{ID: "one", Fresh: true, Single: true})
			a, err := r.Admit(context.Background(), modelStep(cents(10)))
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Settle(context.Background(), usage(2, 1), Outcome{}); err != nil {
				t.Fatal(err)
			}
			if rec := f.stored(t, "one"); rec.Status != store.RunSucceeded {
				t.Fatalf("record = %+v", rec)
			}
			runs := f.sink.byKind(trace.KindRun)
			if len(runs) != 1 {
				t.Fatalf("run spans: %+v", runs)
			}
			found := false
			for _, e := range runs[0].Events {
				found = found || e.Name == "budget.alert"
			}
			if !found {
				t.Errorf("the run span's events %+v have no budget.alert", runs[0].Events)
			}
		})
	}
}

// A Single run's step has no link from the run's context (see Run.Admit):
// a kill of the run, of its tenant or of everything cancels the step in
// flight all the same, with the kill as its cause, and the run stops.
func TestSingleRunKillCancelsItsStep(t *testing.T) {
	for _, k := range []store.Kill{
		{Target: store.KillRun, Name: "one"},
		{Target: store.KillTenant, Name: DefaultTenant},
		{Target: store.KillAll},
	} {
		t.Run(string(k.Target), func(t *testing.T) {
			m, err := NewManager(Config{Store: memstore.New(), Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			r, err := m.Start(ctx, Spec{ID: "one", Fresh: true, Single: true})
			if err != nil {
				t.Fatal(err)
			}
			a, err := r.Admit(ctx, modelStep(cents(1)))
			if err != nil {
				t.Fatal(err)
			}
			k.Reason = "test"
			if err := m.SetKill(ctx, k); err != nil {
				t.Fatal(err)
			}
			if a.Context().Err() == nil { // SetKill applies the flag before it returns
				t.Fatal("the kill did not cancel the step in flight")
			}
			fe := wantReason(t, context.Cause(a.Context()), failure.Killed, failure.Fatal)
			if err := a.Fail(ctx, fe); err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if rec := r.Record(); rec.Status != store.RunStopped || rec.StopReason != string(failure.Killed) {
				t.Errorf("record = %+v; want stopped killed", rec)
			}
		})
	}
}

// Manager.Note records an event on a run this process holds, of the
// tenant named, and on no other: not another tenant's, not a run only in
// the store.
func TestManagerNote(t *testing.T) {
	sink := &recSink{}
	st := memstore.New()
	m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: sink, KillPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if _, err := m.Start(ctx, Spec{ID: "held", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if m.Note("held", "other", "request.refused", nil) {
		t.Error("noted on another tenant's run")
	}
	if m.Note("absent", "acme", "request.refused", nil) {
		t.Error("noted on a run this process does not hold")
	}
	if !m.Note("held", "acme", "request.refused", map[string]any{"reason": "invalid_request"}) {
		t.Fatal("not noted on the run held")
	}
	runs := sink.byKind(trace.KindRun)
	if len(runs) != 1 || len(runs[0].Events) != 1 || runs[0].Events[0].Name != "request.refused" || runs[0].Events[0].Attrs["reason"] != "invalid_request" {
		t.Errorf("run spans %+v; want the run's with the note", runs)
	}
}
