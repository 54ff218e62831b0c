package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// Cover holds more for a step within the run's limit, refuses what does
// not fit without changing anything, and Settle leaves only the cost.
func TestCoverWithinTheRunLimit(t *testing.T) {
	for _, inMemory := range []bool{false, true} {
		name := "ledger"
		if inMemory {
			name = "in memory"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.FirstStepInMemory = inMemory })
			ctx := context.Background()
			r := f.start(t, Spec{ID: "c", Tenant: "acme", Fresh: true, Limits: store.Limits{MaxCost: cents(30)}})
			a, err := r.Admit(ctx, modelStep(cents(10)))
			if err != nil {
				t.Fatal(err)
			}
			if a.private != inMemory {
				t.Fatalf("step admitted in memory: %v, want %v", a.private, inMemory)
			}
			if err := a.Cover(ctx, cents(5)); err != nil { // below what it holds: nothing to do
				t.Fatal(err)
			}
			if err := a.Cover(ctx, cents(25)); err != nil {
				t.Fatal(err)
			}
			if !inMemory {
				if b := f.balance(t, budget.RunScope("c")); b.Reserved != cents(25) || b.Settled != 0 {
					t.Fatalf("run scope after Cover(25¢) %+v; want 25¢ reserved", b)
				}
			}
			err = a.Cover(ctx, cents(31))
			fe := failure.As(err)
			if fe == nil || fe.Reason != failure.BudgetExceeded || fe.Kind != failure.Fatal || !errors.Is(err, budget.ErrExceeded) {
				t.Fatalf("Cover(31¢) with a 30¢ limit: %v; want a Fatal budget_exceeded", err)
			}
			const want = "the call's cost so far with its next attempt's estimate, $0.31 ($0.06 more than it holds), does not fit the run's cost limit of $0.30 (with what is spent and reserved)"
			if fe.Message != want {
				t.Errorf("message %q\n want %q", fe.Message, want)
			}
			if !inMemory {
				if b := f.balance(t, budget.RunScope("c")); b.Reserved != cents(25) {
					t.Fatalf("run scope after the refusal %+v; want it unchanged (25¢ reserved)", b)
				}
			}
			// 22¢ used: more than the estimate, within what the step holds.
			if err := a.Settle(ctx, usage(22, 0), Outcome{}); err != nil {
				t.Fatal(err)
			}
			if b := f.balance(t, budget.RunScope("c")); b.Settled != cents(22) || b.Reserved != 0 {
				t.Errorf("run scope after Settle %+v; want 22¢ settled, nothing held", b)
			}
			if err := a.Cover(ctx, cents(29)); !errors.Is(err, ErrSettled) {
				t.Errorf("Cover after Settle: %v, want ErrSettled", err)
			}
		})
	}
}

// The tenant's budget bounds Cover as it bounds Admit: money another run
// holds is not there to cover a retry.
func TestCoverWithinTheTenantBudget(t *testing.T) {
	f := acmeFixture(t) // acme: $1.00
	ctx := context.Background()
	other := f.start(t, Spec{ID: "other", Tenant: "acme"})
	b, err := other.Admit(ctx, modelStep(cents(60)))
	if err != nil {
		t.Fatal(err)
	}
	r := f.start(t, Spec{ID: "r", Tenant: "acme"})
	a, err := r.Admit(ctx, modelStep(cents(30)))
	if err != nil {
		t.Fatal(err)
	}
	err = a.Cover(ctx, cents(45))
	if fe := failure.As(err); fe == nil || fe.Reason != failure.BudgetExceeded {
		t.Fatalf("Cover(45¢) with 30¢ of $1.00 left: %v; want budget_exceeded", err)
	}
	if err := a.Cover(ctx, cents(40)); err != nil {
		t.Fatal(err)
	}
	tenant := budget.TenantScope("acme", budget.Month, time.Now())
	if bal := f.balance(t, tenant); bal.Reserved != cents(100) {
		t.Fatalf("tenant %+v; want $1.00 held (60¢ + 40¢)", bal)
	}
	// A failed step gives back all it held.
	if err := a.Fail(ctx, errors.New("no usage")); err != nil {
		t.Fatal(err)
	}
	if err := b.Settle(ctx, usage(60, 0), Outcome{}); err != nil {
		t.Fatal(err)
	}
	if bal := f.balance(t, tenant); bal.Settled != cents(60) || bal.Reserved != 0 {
		t.Errorf("tenant %+v; want 60¢ settled, nothing held", bal)
	}
}

// What Cover reserved is renewed with the step's reservation while the
// call runs: a long call keeps all it holds.
func TestCoverIsRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := acmeFixture(t)
		ctx := context.Background()
		long := f.start(t, Spec{ID: "long", Tenant: "acme", Limits: store.Limits{Deadline: time.Hour}})
		a, err := long.Admit(ctx, modelStep(cents(40)))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Cover(ctx, cents(80)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultReservationTTL + 2*DefaultExpireEvery)
		synctest.Wait()
		tenant := budget.TenantScope("acme", budget.Month, time.Now())
		if bal := f.balance(t, tenant); bal.Reserved != cents(80) {
			t.Fatalf("tenant %+v after the TTL; want the live step's 80¢ still held", bal)
		}
		if err := a.Settle(ctx, usage(70, 0), Outcome{}); err != nil {
			t.Fatal(err)
		}
		if bal := f.balance(t, tenant); bal.Settled != cents(70) || bal.Reserved != 0 {
			t.Errorf("tenant %+v; want 70¢ settled, nothing held", bal)
		}
	})
}

// barrierStore holds Reserve calls until n of them have arrived (once
// armed), so that concurrent Covers interleave in the ledger.
type barrierStore struct {
	*memstore.Store
	mu      sync.Mutex
	n       int
	waiting int
	release chan struct{}
}

func (s *barrierStore) arm(n int) {
	s.mu.Lock()
	s.n, s.release = n, make(chan struct{})
	s.mu.Unlock()
}

func (s *barrierStore) Reserve(ctx context.Context, r budget.Reservation) error {
	s.mu.Lock()
	if ch := s.release; ch != nil {
		s.waiting++
		if s.waiting == s.n {
			close(ch)
		}
		s.mu.Unlock()
		select { // Covers made one at a time never let a second arrive
		case <-ch:
		case <-time.After(time.Second): // fake time: at once, when every goroutine of the bubble waits
		}
	} else {
		s.mu.Unlock()
	}
	return s.Store.Reserve(ctx, r)
}

// Two concurrent Cover(25¢) of a step holding 10¢ hold 25¢ in all, not
// 40¢, and neither is refused by a 30¢ limit the step then fits (an
// adversarial review: both read the 10¢ and reserved 15¢ each).
func TestConcurrentCoversAddUpOnce(t *testing.T) {
	for _, limit := range []int64{45, 30} {
		t.Run(fmt.Sprintf("limit %d¢", limit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bs := &barrierStore{Store: memstore.New()}
				m, err := NewManager(Config{Store: bs, Pricing: testPricing(t), Owner: "o", KillPoll: -1, IdleTTL: -1})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = m.Close() })
				ctx := context.Background()
				r, err := m.Start(ctx, Spec{ID: "cc", Limits: store.Limits{MaxCost: cents(limit)}})
				if err != nil {
					t.Fatal(err)
				}
				a, err := r.Admit(ctx, modelStep(cents(10)))
				if err != nil {
					t.Fatal(err)
				}
				bs.arm(2)
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for i := range 2 {
					wg.Go(func() { errs[i] = a.Cover(ctx, cents(25)) })
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						t.Errorf("Cover(25¢): %v", err)
					}
				}
				if b, _ := bs.Balance(ctx, budget.RunScope("cc")); b.Reserved != cents(25) {
					t.Errorf("two Cover(25¢) of one step hold %s; want 25¢", b.Reserved)
				}
				if err := a.Settle(ctx, usage(20, 0), Outcome{}); err != nil {
					t.Fatal(err)
				}
				_ = m.Flush(ctx)
				if b, _ := bs.Balance(ctx, budget.RunScope("cc")); b.Reserved != 0 || b.Settled != cents(20) {
					t.Errorf("after Settle %+v; want 20¢ settled, nothing held", b)
				}
			})
		})
	}
}

// A run stopped by its own limit says why on its span (the limit and the
// amounts), as its record does: trace show printed the stop reason alone.
func TestStoppedRunSpanSaysWhy(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{ID: "why", Tenant: "acme", Limits: store.Limits{MaxCost: cents(5)}})
	if _, err := r.Admit(ctx, modelStep(cents(10))); err == nil {
		t.Fatal("a 10¢ step admitted under a 5¢ limit")
	}
	rec := f.stored(t, "why")
	runs := f.sink.byKind(trace.KindRun)
	if len(runs) != 1 || rec.Error == "" {
		t.Fatalf("run spans %d, record error %q", len(runs), rec.Error)
	}
	msg, _ := runs[0].Attrs[trace.AttrFailureMessage].(string)
	if msg != rec.Error || !strings.Contains(msg, "does not fit the run's cost limit of $0.05") {
		t.Errorf("run span's failure message %q; want the record's %q", msg, rec.Error)
	}
}

// A call refused by a run that already spent past its limit (an answer
// longer than its reservation) says what the run spent: a newcomer read
// "estimated cost $0.000058 does not fit the run's cost limit of $0.03"
// with no hint that the run was over.
func TestRefusalSaysWhatTheRunSpent(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{ID: "over", Tenant: "acme", Limits: store.Limits{MaxCost: cents(30)}})
	a, err := r.Admit(ctx, modelStep(cents(10)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, usage(35, 0), Outcome{}); err != nil {
		t.Fatal(err)
	}
	_, err = r.Admit(ctx, modelStep(cents(1)))
	if fe := failure.As(err); fe == nil || fe.Reason != failure.BudgetExceeded || !strings.Contains(fe.Message, "the run has spent $0.35") {
		t.Errorf("refusal %v; want budget_exceeded saying the run has spent $0.35", err)
	}
}

// HoldTokens counts more of a step against the run's token limit: the
// run's other admissions see it, what does not fit is refused without
// change, and the hold ends with the step.
func TestHoldTokens(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	step := func() Step { s := modelStep(cents(1)); s.EstimatedTokens = 40; return s }

	// A hold counts for the run's next admission.
	r1 := f.start(t, Spec{ID: "tok1", Limits: store.Limits{MaxTokens: 100}})
	a, err := r1.Admit(ctx, step())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.HoldTokens(ctx, 70); err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Admit(ctx, step()); failure.As(err) == nil || failure.As(err).Reason != failure.BudgetExceeded {
		t.Fatalf("a 40-token step beside a 70-token hold under a 100-token limit: %v; want budget_exceeded", err)
	}

	r := f.start(t, Spec{ID: "tok", Limits: store.Limits{MaxTokens: 100}})
	a, err = r.Admit(ctx, step())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.HoldTokens(ctx, 30); err != nil { // below its estimate: nothing to do
		t.Fatal(err)
	}
	if err := a.HoldTokens(ctx, 70); err != nil {
		t.Fatal(err)
	}
	err = a.HoldTokens(ctx, 101)
	if fe := failure.As(err); fe == nil || fe.Reason != failure.BudgetExceeded || fe.Kind != failure.Fatal ||
		!strings.Contains(fe.Message, "101, do not fit the run's limit of 100") {
		t.Fatalf("HoldTokens(101): %v; want a Fatal budget_exceeded", err)
	}
	if err := a.Settle(ctx, budget.Usage{InputTokens: 20, OutputTokens: 10}, Outcome{}); err != nil {
		t.Fatal(err)
	}
	if err := a.HoldTokens(ctx, 80); !errors.Is(err, ErrSettled) {
		t.Fatalf("HoldTokens after Settle: %v; want ErrSettled", err)
	}
	// 30 used and the hold gone: a 40-token step fits, a second does not (30 + 40 + 40 > 100).
	b, err := r.Admit(ctx, step())
	if err != nil {
		t.Fatalf("after the settle: %v", err)
	}
	defer b.Fail(ctx, errors.New("done"))
	if _, err := r.Admit(ctx, step()); failure.As(err) == nil {
		t.Fatal("a third step fit 30 used and 40 in flight under 100")
	}
}

// A refusal by the tenant's budget says what the tenant has spent and
// holds, and when its period ends (helper finding: it named only the
// budget).
func TestTenantRefusalSaysSpentAndEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := acmeFixture(t) // acme: $1.00 a month
		ctx := context.Background()
		spent := f.start(t, Spec{ID: "spent", Tenant: "acme"})
		a, err := spent.Admit(ctx, modelStep(cents(60)))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Settle(ctx, usage(50, 0), Outcome{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the settle's ledger write
		holding := f.start(t, Spec{ID: "holding", Tenant: "acme"})
		if _, err := holding.Admit(ctx, modelStep(cents(30))); err != nil {
			t.Fatal(err)
		}
		r := f.start(t, Spec{ID: "r", Tenant: "acme"})
		_, err = r.Admit(ctx, modelStep(cents(30)))
		fe := failure.As(err)
		want := "estimated cost $0.30 does not fit the tenant's budget of $1.00 (with what is spent and reserved); " +
			"the tenant has spent $0.50 and holds $0.30 for calls in flight in tenant:acme:2000-01, which ends 2000-02-01T00:00:00Z"
		if fe == nil || fe.Reason != failure.BudgetExceeded || fe.Message != want {
			t.Errorf("refusal: %v\nwant %s", err, want)
		}
	})
}
