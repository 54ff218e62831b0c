package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/store/sqlite"
)

// Regressions found by the review of the background settle (session 2).

// gatedSettle is a store whose Settle waits for gate: a slow store, or a
// settle queued behind other writes.
type gatedSettle struct {
	Store
	gate chan struct{}
}

func (g gatedSettle) Settle(ctx context.Context, id string, actual budget.USD) error {
	<-g.gate
	return g.Store.Settle(ctx, id, actual)
}

// A step reserved at 1¢ that cost 9¢ leaves 1¢ of the run's 10¢ and of
// the tenant's 10¢: the next 5¢ step must be refused, in this run and in
// another run of the tenant, even while background writes are slow. With
// the settle in the background the ledger held only the 1¢ estimate and
// let the next step through.
func TestRegression_CostAboveEstimateSettledFirst(t *testing.T) {
	for _, scope := range []string{"run", "tenant"} {
		t.Run(scope, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				// The gate holds every settle until the test opens it
				// (the step's tokens are settled in the background too).
				gate := make(chan struct{})
				var once sync.Once
				open := func() { once.Do(func() { close(gate) }) }
				defer open()
				st := gatedSettle{Store: memstore.New(), gate: gate}
				cfg := Config{Store: st, Pricing: testPricing(t), Owner: "p", KillPoll: -1, ExpireEvery: -1,
					TenantBudgets: map[string]TenantBudget{}}
				lim := store.Limits{}
				if scope == "run" {
					lim.MaxCost = cents(10)
				} else {
					cfg.TenantBudgets["acme"] = TenantBudget{Limit: cents(10)}
				}
				m, err := NewManager(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				r1, err := m.Start(ctx, Spec{Tenant: "acme", Limits: lim})
				if err != nil {
					t.Fatal(err)
				}
				a, err := r1.Admit(ctx, modelStep(cents(1)))
				if err != nil {
					t.Fatal(err)
				}
				settled := make(chan error, 1)
				go func() { settled <- a.Settle(ctx, usage(9, 0), Outcome{}) }()
				synctest.Wait() // the settle waits at the gate
				select {
				case err := <-settled:
					t.Fatalf("Settle returned (%v) before the ledger settled a cost above the reservation", err)
				default:
				}
				open()
				if err := <-settled; err != nil {
					t.Fatal(err)
				}
				next := r1
				if scope == "tenant" {
					if next, err = m.Start(ctx, Spec{Tenant: "acme"}); err != nil {
						t.Fatal(err)
					}
				}
				_, err = next.Admit(ctx, modelStep(cents(5)))
				wantReason(t, err, failure.BudgetExceeded, failure.Fatal)
			})
		})
	}
}

// The same on the real stores without delays: 14¢ must never be spent
// against a 10¢ limit.
func TestRegression_CostAboveEstimateRealStores(t *testing.T) {
	for _, name := range []string{"memstore", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			var st Store = memstore.New()
			if name == "sqlite" {
				s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "b.db"))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				st = s
			}
			m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Owner: "p"})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			for i := range 50 {
				r, err := m.Start(ctx, Spec{Tenant: "acme", Limits: store.Limits{MaxCost: cents(10)}})
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(9, 0), nil }); err != nil {
					t.Fatal(err)
				}
				err = r.Call(ctx, modelStep(cents(5)), func(context.Context) (budget.Usage, error) { return usage(5, 0), nil })
				if fe := failure.As(err); fe == nil || fe.Reason != failure.BudgetExceeded {
					t.Fatalf("run %d: second step: %v, want budget_exceeded (9¢ spent of 10¢)", i, err)
				}
			}
		})
	}
}

// A Fresh run started with a context already done (a client gone) took
// persist's fallback, which left the record dirty: the run stayed in
// memory for ever and Flush never returned.
func TestRegression_FreshStartCanceledContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := NewManager(Config{Store: memstore.New(), Pricing: testPricing(t), Owner: "p",
			IdleTTL: time.Second, KillPoll: -1, ExpireEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		const n = 40
		for i := range n {
			r, err := m.Start(canceled, Spec{ID: fmt.Sprintf("c%02d", i), Tenant: "acme", Fresh: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Finish(context.Background(), store.RunSucceeded, nil); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Second) // several idle sweeps
		synctest.Wait()
		if err := m.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if live := m.Live(); live != 0 {
			t.Fatalf("%d of %d finished Fresh runs still held in memory", live, n)
		}
	})
}

// gatedCreate delays CreateRun: a Fresh run's first background write that
// has not landed yet.
type gatedCreate struct {
	Store
	gate chan struct{}
}

func (g gatedCreate) CreateRun(ctx context.Context, r store.Run) error {
	<-g.gate
	return g.Store.CreateRun(ctx, r)
}

// A Fresh run's id reached another process (the client's next call went
// to another replica) before the first process's record landed; that
// process started and ended the run. The first process's create then
// conflicted and its write must take the stored ending, not overwrite it
// with "running", and refuse the run's next step.
func TestRegression_FreshCreateKeepsOtherProcessEnding(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	gate := make(chan struct{})
	m1, err := NewManager(Config{Store: gatedCreate{Store: st, gate: gate}, Pricing: testPricing(t), Owner: "p1",
		FirstStepInMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	m2, err := NewManager(Config{Store: st, Pricing: testPricing(t), Owner: "p2"})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	r1, err := m1.Start(ctx, Spec{ID: "x", Tenant: "acme", Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil }); err != nil {
		t.Fatal(err)
	}
	// The id is out: the client's next call reaches the second process.
	r2, err := m2.Start(ctx, Spec{ID: "x", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Finish(ctx, store.RunFailed, nil); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if err := m1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetRun(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != store.RunFailed || rec.Turns != 1 || rec.Cost != cents(1) {
		t.Fatalf("stored %+v, want the other process's ending (failed) with the first step counted", rec)
	}
	if _, err := r1.Admit(ctx, modelStep(cents(1))); err == nil {
		t.Fatal("a step admitted in a run another process ended")
	}
}

// failingStore fails every write while fail is set.
type failingStore struct {
	Store
	fail atomic.Bool
}

var errDown = errors.New("connection refused")

func (f *failingStore) ReserveAll(ctx context.Context, rs []budget.Reservation) error {
	if f.fail.Load() {
		return errDown
	}
	return f.Store.(budget.BatchLedger).ReserveAll(ctx, rs)
}

func (f *failingStore) Reserve(ctx context.Context, r budget.Reservation) error {
	return f.ReserveAll(ctx, []budget.Reservation{r})
}

func (f *failingStore) Settle(ctx context.Context, id string, actual budget.USD) error {
	if f.fail.Load() {
		return errDown
	}
	return f.Store.Settle(ctx, id, actual)
}

func (f *failingStore) CreateRun(ctx context.Context, r store.Run) error {
	if f.fail.Load() {
		return errDown
	}
	return f.Store.CreateRun(ctx, r)
}

func (f *failingStore) UpdateRun(ctx context.Context, r store.Run) error {
	if f.fail.Load() {
		return errDown
	}
	return f.Store.UpdateRun(ctx, r)
}

// The first step of a Fresh run is admitted in memory and its ledger
// entries written when it closes; once that write has failed (the store is
// down), first steps go through the ledger and fail with the store
// instead of piling up unrecorded spend. When the store is back, the
// retried write records the first step.
func TestFreshFirstStepStoreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &failingStore{Store: memstore.New()}
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Owner: "p", KillPoll: -1, ExpireEvery: -1, Logger: quiet,
			FirstStepInMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		st.fail.Store(true)
		call := func(id string) error {
			r, err := m.Start(ctx, Spec{ID: id, Tenant: "acme", Fresh: true, Limits: store.Limits{MaxTurns: 5}})
			if err != nil {
				t.Fatal(err)
			}
			return r.Call(ctx, modelStep(cents(2)), func(context.Context) (budget.Usage, error) { return usage(2, 0), nil })
		}
		if err := call("first"); err != nil {
			t.Fatalf("first step of a Fresh run with the store down: %v (want served, recorded later)", err)
		}
		synctest.Wait() // its ledger write failed once and waits to retry
		if err := call("second"); err == nil || !errors.Is(err, errDown) {
			t.Fatalf("a first step once the store is known down: %v, want the store's error", err)
		}
		st.fail.Store(false)
		time.Sleep(10 * time.Second) // past the retry backoff (fake time)
		synctest.Wait()
		if err := m.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if b, _ := st.Balance(ctx, budget.RunScope("first")); b.Settled != cents(2) {
			t.Fatalf("the first step's spend after the store came back: %+v", b)
		}
		if b, _ := st.Balance(ctx, TurnScope("first")); b.Settled != 1 {
			t.Fatalf("the first step's turn after the store came back: %+v", b)
		}
	})
}

// Regressions from the review of the in-memory first step (session 2).

// flakySpend fails spend writes: the first failSpends fail; with
// lostAnswer they commit first (a dropped connection after COMMIT).
type flakySpend struct {
	Store
	mu         sync.Mutex
	failSpends int
	lostAnswer bool
}

var errBusyStore = errors.New("database is locked")

func (f *flakySpend) ReserveAll(ctx context.Context, rs []budget.Reservation) error {
	f.mu.Lock()
	fail := f.failSpends > 0 && len(rs) > 0 && rs[0].Spend
	if fail {
		f.failSpends--
	}
	lost := f.lostAnswer
	f.mu.Unlock()
	if fail && !lost {
		return errBusyStore
	}
	if err := f.Store.(budget.BatchLedger).ReserveAll(ctx, rs); err != nil || !fail {
		return err
	}
	return errBusyStore
}

func (f *flakySpend) Reserve(ctx context.Context, r budget.Reservation) error {
	return f.ReserveAll(ctx, []budget.Reservation{r})
}

// The first step's spend failed once and was retried in the background:
// the next step was let through at once, reserving against a ledger
// without the first step's 9¢, and the run spent 14¢ of 10¢. It now waits
// for the write.
func TestRegression_FirstStepSpendRetriedBeforeNextStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &flakySpend{Store: memstore.New(), failSpends: 1}
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Owner: "p", KillPoll: -1, ExpireEvery: -1,
			Logger: quiet, FirstStepInMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		r, _ := m.Start(ctx, Spec{Fresh: true, Limits: store.Limits{MaxCost: cents(10)}})
		a, err := r.Admit(ctx, modelStep(cents(5)))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Settle(ctx, usage(9, 0), Outcome{}); err != nil {
			t.Fatal(err)
		}
		_, err = r.Admit(ctx, modelStep(cents(5))) // waits for the retried spend, then 9+5 > 10
		wantReason(t, err, failure.BudgetExceeded, failure.Fatal)
	})
}

// A turn written alone (the first step failed) was counted twice when its
// write committed and the answer was lost: the run's second turn of two
// was refused.
func TestRegression_FirstStepTurnNotCountedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &flakySpend{Store: memstore.New(), failSpends: 1, lostAnswer: true}
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Owner: "p", KillPoll: -1, ExpireEvery: -1,
			Logger: quiet, FirstStepInMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		r, _ := m.Start(ctx, Spec{Fresh: true, Limits: store.Limits{MaxTurns: 2}})
		a, err := r.Admit(ctx, modelStep(cents(1)))
		if err != nil {
			t.Fatal(err)
		}
		_ = a.Fail(ctx, errors.New("upstream 503"))
		a2, err := r.Admit(ctx, modelStep(cents(1)))
		if err != nil {
			t.Fatalf("second turn of two: %v", err)
		}
		_ = a2.Fail(ctx, errors.New("upstream 503"))
		if b, _ := st.Balance(ctx, TurnScope(r.ID())); b.Settled != 2 {
			t.Fatalf("turn scope %+v, want 2 turns", b)
		}
	})
}

// While the first step is open, a step that reserves nothing (a free tool
// call) does not wait for it; it waited for ever under a context with no
// deadline.
func TestRegression_FreeToolDoesNotWaitForFirstStep(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.KillPoll, c.ExpireEvery, c.FirstStepInMemory = -1, -1, true })
	ctx := context.Background()
	r := f.start(t, Spec{Fresh: true})
	a, err := r.Admit(ctx, modelStep(cents(1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Tool(ctx, ToolCall{Name: "lookup"}, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, usage(1, 0), Outcome{}); err != nil {
		t.Fatal(err)
	}
}

// At shutdown a Fresh run with a step still open stayed running for ever:
// it is now stopped softly, and the step is charged when it closes.
func TestRegression_EndFreshWithStepOpen(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.KillPoll, c.ExpireEvery, c.EndIdle, c.FirstStepInMemory = -1, -1, true, true })
	ctx := context.Background()
	r := f.start(t, Spec{ID: "e", Fresh: true})
	a, err := r.Admit(ctx, modelStep(cents(5)))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.m.EndFresh(ctx); err != nil || n != 1 {
		t.Fatalf("EndFresh: %d runs, %v", n, err)
	}
	if err := a.Settle(ctx, usage(3, 0), Outcome{}); err != nil {
		t.Fatal(err)
	}
	rec := f.stored(t, "e")
	if rec.Status != store.RunStopped || rec.StopReason != string(failure.Canceled) || rec.Cost != cents(3) {
		t.Fatalf("after EndFresh with a step open: %+v", rec)
	}
}
