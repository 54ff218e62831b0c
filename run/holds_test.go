package run

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// slowSettle is a store whose ledger settles take 40 ms, as a loaded
// store's writes do: a settle written in the background lands after the
// answer, and after the next call's admission if that comes at once.
type slowSettle struct{ *memstore.Store }

func (s slowSettle) Settle(ctx context.Context, id string, actual budget.USD) error {
	time.Sleep(40 * time.Millisecond)
	return s.Store.Settle(ctx, id, actual)
}

// A run's next call, made as soon as the last one is answered, fits its
// cost limit by what was spent, not by the estimate a settle not yet
// written still holds: in this process (its settles are waited for) and
// in another (the refusal is asked again while holds clear) (adversarial
// review, session 26: runs were stopped budget_exceeded with 1% of their
// limit spent).
func TestNextCallFitsOnceHoldsClear(t *testing.T) {
	for _, other := range []bool{false, true} {
		name := "same process"
		if other {
			name = "another process"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := slowSettle{memstore.New()}
				f := newFixture(t, func(c *Config) { c.Store = st })
				ctx := context.Background()
				r := f.start(t, Spec{ID: "holds", Limits: store.Limits{MaxCost: cents(5)}})
				a, err := r.Admit(ctx, modelStep(cents(3)))
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Settle(ctx, usage(1, 0), Outcome{}); err != nil { // 1¢ of the 3 held
					t.Fatal(err)
				}
				next := r
				if other {
					m, err := NewManager(Config{Store: st.Store, Pricing: testPricing(t), Sink: f.sink, Owner: "second"})
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					if next, err = m.Get(ctx, "holds"); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				b, err := next.Admit(ctx, modelStep(cents(3)))
				if err != nil {
					t.Fatalf("the next call: %v", err)
				}
				if d := time.Since(start); d > 100*time.Millisecond {
					t.Errorf("admitted after %v; want it as soon as the settle landed (40ms)", d)
				}
				if err := b.Settle(ctx, usage(1, 0), Outcome{}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			})
		})
	}
}

// A refusal that holds cannot clear (what is settled already leaves no
// room) comes at once, without waiting.
func TestRefusalBySpendIsImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx := context.Background()
		r := f.start(t, Spec{ID: "spent", Limits: store.Limits{MaxCost: cents(5)}})
		a, err := r.Admit(ctx, modelStep(cents(4)))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Settle(ctx, usage(4, 0), Outcome{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		if _, err := r.Admit(ctx, modelStep(cents(2))); err == nil {
			t.Fatal("admitted 2¢ with 4¢ of 5¢ spent")
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the refusal came after %v; want it at once", d)
		}
	})
}

// The run span a process writes carries the whole run's counts, every
// process's steps, as the run's record does (adversarial review, session
// 26: each replica overwrote the span with its own share).
func TestRunSpanCountsEveryProcess(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := f.start(t, Spec{ID: "shared"})
	r2, err := f.second(t).Get(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	call := func(r *Run, in int64) {
		t.Helper()
		if err := r.Call(ctx, modelStep(cents(5)), func(context.Context) (budget.Usage, error) { return usage(in, 1), nil }); err != nil {
			t.Fatal(err)
		}
	}
	call(r1, 1)
	call(r2, 2)
	call(r2, 3)
	if err := r2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r1.Finish(ctx, store.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	spans := f.sink.byKind(trace.KindRun)
	var last trace.Span
	for _, s := range spans {
		if s.RunID == "shared" {
			last = s
		}
	}
	if last.Attrs["belay.run.turns"] != int64(3) || last.Attrs[trace.AttrInputTokens] != int64(6) ||
		last.Attrs[trace.AttrOutputTokens] != int64(3) || last.Attrs[trace.AttrCostUSD] != cents(12).Float() {
		t.Errorf("run span %v; want 3 turns, 6/3 tokens, $0.12 (both processes' steps)", last.Attrs)
	}
}

// The end answer counts a call another process answered just before,
// whose settle reaches the ledger after the end is asked (adversarial
// review, session 26).
func TestEndCountsAnotherProcessesLastCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx := context.Background()
		m2, err := NewManager(Config{Store: slowSettle{f.st}, Pricing: testPricing(t), Sink: f.sink, Owner: "second"})
		if err != nil {
			t.Fatal(err)
		}
		defer m2.Close()
		r1 := f.start(t, Spec{ID: "ended", Tenant: "acme"})
		if err := r1.Call(ctx, modelStep(cents(5)), func(context.Context) (budget.Usage, error) { return usage(1, 1), nil }); err != nil {
			t.Fatal(err)
		}
		r2, err := m2.Get(ctx, "ended")
		if err != nil {
			t.Fatal(err)
		}
		step := modelStep(cents(5))
		step.EstimatedTokens = 10 // held in the token scope until settled, as a gateway call's prompt and output limit
		if err := r2.Call(ctx, step, func(context.Context) (budget.Usage, error) { return usage(2, 1), nil }); err != nil {
			t.Fatal(err)
		}
		rec, err := f.m.End(ctx, "ended", "acme", store.RunSucceeded, "")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Turns != 2 || rec.Cost != cents(7) || rec.InputTokens != 3 || rec.OutputTokens != 2 {
			t.Errorf("end answer: %d turns, %s, %d/%d tokens; want 2 turns, $0.07, 3/2 (both processes' calls)",
				rec.Turns, rec.Cost, rec.InputTokens, rec.OutputTokens)
		}
	})
}

// A model call its admission refuses while the run runs (a turn limit)
// is in the trace, a chat span with the refusal (adversarial review,
// session 26: the 403s past the turn limit were nowhere).
func TestRefusedCallIsTraced(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{ID: "capped", Limits: store.Limits{MaxTurns: 1}})
	a, err := r.Admit(ctx, modelStep(cents(1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Admit(ctx, modelStep(cents(1))); err == nil { // the turn is in flight
		t.Fatal("a second turn admitted under max_turns 1")
	}
	if err := a.Settle(ctx, usage(1, 0), Outcome{}); err != nil {
		t.Fatal(err)
	}
	var refused int
	for _, s := range f.sink.byKind(trace.KindModel) {
		if s.RunID == "capped" && s.Status == trace.StatusError && s.Attrs[trace.AttrErrorType] == "max_turns_exceeded" {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d refused chat spans; want 1", refused)
	}
}

// A model step that cannot be priced before it runs is refused in a run
// with a money limit, which goes on; without one it is admitted
// (adversarial review, session 26: such steps reserved $0, and 43 of 50
// concurrent ones were admitted against a $0.01 limit).
func TestUnestimatedStepUnderAMoneyLimit(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	limited := f.start(t, Spec{ID: "limited", Limits: store.Limits{MaxCost: cents(10)}})
	for _, s := range []Step{
		{Kind: KindModel, Provider: "test", Model: "m"},                                                    // no tokens
		{Kind: KindModel, Provider: "test", Model: "no-such-model", PromptTokens: 10, MaxOutputTokens: 10}, // no price
	} {
		_, err := limited.Admit(ctx, s)
		if !errors.Is(err, ErrNoEstimate) || failure.As(err) != nil {
			t.Errorf("Admit(%+v) = %v; want ErrNoEstimate, not a failure that stops the run", s, err)
		}
	}
	if limited.isEnded() {
		t.Error("the run stopped on a step it could not estimate")
	}
	a, err := limited.Admit(ctx, Step{Kind: KindModel, Provider: "test", Model: "m", PromptTokens: 1, MaxOutputTokens: 1})
	if err != nil {
		t.Fatalf("a priced step: %v", err)
	}
	_ = a.Settle(ctx, usage(1, 1), Outcome{})
	free := f.start(t, Spec{ID: "free"})
	if b, err := free.Admit(ctx, Step{Kind: KindModel, Provider: "test", Model: "m"}); err != nil {
		t.Errorf("no money limit: %v", err)
	} else {
		_ = b.Settle(ctx, usage(1, 1), Outcome{})
	}
}

// A refusal whose holds may clear waits on time and on the run's own
// settles only: not on another run's quoted step (adversarial review of
// this session: it waited for the caller's context to end), and a kill
// during the wait ends it with the kill.
func TestHoldWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx := context.Background()
		b := f.start(t, Spec{ID: "B"})
		bs, err := b.Admit(ctx, modelStep(cents(1)))
		if err != nil {
			t.Fatal(err)
		}
		bs.Quote(usage(1, 0), Outcome{}) // answered; its settle comes later (a client slow to read)
		a := f.start(t, Spec{ID: "A", Limits: store.Limits{MaxCost: cents(10)}})
		a1, err := a.Admit(ctx, modelStep(cents(6)))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = a.Admit(ctx, modelStep(cents(6)))
		if !errors.Is(err, failure.BudgetExceeded) {
			t.Errorf("A's second step: %v; want budget_exceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("refused after %v; want within the hold waits (under 1s)", d)
		}
		_ = a1.Settle(ctx, usage(1, 0), Outcome{})
		_ = bs.Settle(ctx, usage(1, 0), Outcome{})

		c := f.start(t, Spec{ID: "C", Limits: store.Limits{MaxCost: cents(10)}})
		c1, err := c.Admit(ctx, modelStep(cents(6)))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(30 * time.Millisecond)
			_ = f.m.Kill(ctx, store.KillRun, "C", "test")
		}()
		if _, err := c.Admit(ctx, modelStep(cents(6))); !errors.Is(err, failure.Killed) {
			t.Errorf("a step whose hold wait a kill ended: %v; want killed", err)
		}
		_ = c1.Settle(ctx, usage(1, 0), Outcome{})
	})
}
