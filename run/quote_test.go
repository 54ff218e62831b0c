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
)

// Quote prices a step as Settle then charges it, and says whether the
// reservation covers the cost.
func TestQuoteIsWhatSettleCharges(t *testing.T) {
	errCut := errors.New("cut")
	for _, tc := range []struct {
		name string
		step Step
		u    budget.Usage
		o    Outcome
		want Quote
	}{
		{"within the reservation", modelStep(cents(5)), usage(2, 1), Outcome{}, Quote{Cost: cents(4), Covered: true}},
		{"above the reservation", modelStep(cents(1)), usage(2, 1), Outcome{}, Quote{Cost: cents(4)}},
		{"usage estimated", modelStep(cents(5)), usage(2, 1), Outcome{Estimated: true},
			Quote{Cost: cents(4), Estimated: true, Covered: true}},
		{"no price: the estimate", Step{Kind: KindModel, Provider: "test", Model: "unpriced", EstimatedCost: cents(3)},
			usage(2, 1), Outcome{}, Quote{Cost: cents(3), Estimated: true, Covered: true}},
		{"no price, failed unused: free", Step{Kind: KindModel, Provider: "test", Model: "unpriced", EstimatedCost: cents(3)},
			budget.Usage{}, Outcome{Err: errCut}, Quote{Covered: true}},
		{"served by another model", Step{Kind: KindModel, Provider: "test", Model: "unpriced", EstimatedCost: cents(5)},
			usage(2, 1), Outcome{Provider: "test", Model: "m"}, Quote{Cost: cents(4), Covered: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewManager(Config{Store: memstore.New(), Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			r, err := m.Start(ctx, Spec{ID: "q"})
			if err != nil {
				t.Fatal(err)
			}
			a, err := r.Admit(ctx, tc.step)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Quote(tc.u, tc.o); got != tc.want {
				t.Errorf("Quote = %+v, want %+v", got, tc.want)
			}
			if err := a.Settle(ctx, tc.u, tc.o); err != nil {
				t.Fatal(err)
			}
			if cost, est := a.Cost(); cost != tc.want.Cost || est != tc.want.Estimated {
				t.Errorf("Settle charged %v (estimated %v), Quote said %v (%v)", cost, est, tc.want.Cost, tc.want.Estimated)
			}
			if got := a.Quote(tc.u, tc.o); got != (Quote{}) {
				t.Errorf("Quote after Settle = %+v, want the zero Quote", got)
			}
			if err := r.Flush(ctx); err != nil { // nothing announced is left to wait for
				t.Fatal(err)
			}
		})
	}
}

// quotedStep starts run "q" on a Manager closed at the test's end, admits
// a 5-cent step and quotes it at 4 cents (usage 2 in, 1 out).
func quotedStep(t *testing.T) (*Manager, *Run, *Admitted) {
	t.Helper()
	m, err := NewManager(Config{Store: memstore.New(), Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	r, err := m.Start(ctx, Spec{ID: "q"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Admit(ctx, modelStep(cents(5)))
	if err != nil {
		t.Fatal(err)
	}
	a.Quote(usage(2, 1), Outcome{})
	return m, r, a
}

// Once a step is quoted, Flush (the run's and the Manager's) waits for its
// Settle or Fail: a caller that answers its client between the two leaves
// no window in which a reader that flushed finds the step unsettled.
func TestFlushWaitsForAQuotedStep(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := "settle"
		if fail {
			name = "fail"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, r, a := quotedStep(t)
				ctx := context.Background()
				a.Quote(usage(2, 1), Outcome{}) // a second Quote announces nothing more
				runDone, mgrDone := make(chan error, 1), make(chan error, 1)
				go func() { runDone <- r.Flush(ctx) }()
				go func() { mgrDone <- m.Flush(ctx) }()
				synctest.Wait()
				select {
				case err := <-runDone:
					t.Fatalf("Run.Flush returned (%v) before the quoted step settled", err)
				case err := <-mgrDone:
					t.Fatalf("Manager.Flush returned (%v) before the quoted step settled", err)
				default:
				}
				want := cents(4)
				var err error
				if fail {
					err, want = a.Fail(ctx, errors.New("upstream gone")), 0
				} else {
					err = a.Settle(ctx, usage(2, 1), Outcome{})
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := <-runDone; err != nil {
					t.Fatal(err)
				}
				if err := <-mgrDone; err != nil {
					t.Fatal(err)
				}
				if rec := r.Record(); rec.Cost != want {
					t.Errorf("record after Flush: cost %v, want %v", rec.Cost, want)
				}
			})
		})
	}
}

// Finish waits for a quoted step: an agent that finishes right after its
// last answer finds that step's cost in the record.
func TestFinishWaitsForAQuotedStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, r, a := quotedStep(t)
		ctx := context.Background()
		finished := make(chan error, 1)
		go func() { finished <- r.Finish(ctx, store.RunSucceeded, nil) }()
		synctest.Wait()
		select {
		case err := <-finished:
			t.Fatalf("Finish returned (%v) before the quoted step settled", err)
		default:
		}
		if err := a.Settle(ctx, usage(2, 1), Outcome{}); err != nil {
			t.Fatal(err)
		}
		if err := <-finished; err != nil {
			t.Fatal(err)
		}
		if rec := r.Record(); rec.Status != store.RunSucceeded || rec.Cost != cents(4) || rec.InputTokens != 2 {
			t.Errorf("record after Finish = %+v; want succeeded with the step's cost and tokens", rec)
		}
	})
}

// The run's next Admit waits for a quoted step: a client's next call, sent
// on the answer, is admitted against the step's actual tokens. Here the
// run's token limit holds the quoted step's estimate (1000) but not that
// and the next step's; once the step settles at 3 tokens, it holds both.
func TestAdmitWaitsForAQuotedStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := NewManager(Config{Store: memstore.New(), Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		r, err := m.Start(ctx, Spec{ID: "q", Limits: store.Limits{MaxTokens: 1500}})
		if err != nil {
			t.Fatal(err)
		}
		step := Step{Kind: KindModel, Provider: "test", Model: "m", PromptTokens: 500, MaxOutputTokens: 500}
		a, err := r.Admit(ctx, step)
		if err != nil {
			t.Fatal(err)
		}
		a.Quote(usage(2, 1), Outcome{})

		admitted := make(chan error, 1)
		go func() {
			b, err := r.Admit(ctx, step)
			if err == nil {
				err = b.Settle(ctx, usage(2, 1), Outcome{})
			}
			admitted <- err
		}()
		synctest.Wait()
		select {
		case err := <-admitted:
			t.Fatalf("Admit returned (%v) before the quoted step settled", err)
		default:
		}
		if err := a.Settle(ctx, usage(2, 1), Outcome{}); err != nil {
			t.Fatal(err)
		}
		if err := <-admitted; err != nil {
			t.Errorf("next step after the quoted one settled: %v; want admitted", err)
		}
	})
}

// An Admit whose context ends while it waits for a quoted step admits
// nothing and says why: a DeadlineExceeded failure (the adversary's
// finding: a tool step was admitted with an expired context). The run is
// not stopped: once the step settles, the next Admit goes through.
func TestAdmitWaitingForAQuotedStepEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, r, a := quotedStep(t)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		b, err := r.Admit(ctx, Step{Kind: KindTool, Tool: "lookup"})
		if fe := failure.As(err); b != nil || fe == nil || fe.Reason != failure.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Admit = %v, %v; want nothing admitted and a deadline_exceeded failure", b, err)
		}
		if rec := r.Record(); rec.ToolCalls != 0 || rec.Turns != 1 {
			t.Errorf("record after the refused Admit: %d turns, %d tool calls; want 1 and 0", rec.Turns, rec.ToolCalls)
		}
		if err := a.Settle(context.Background(), usage(2, 1), Outcome{}); err != nil {
			t.Fatal(err)
		}
		b, err = r.Admit(context.Background(), Step{Kind: KindTool, Tool: "lookup"})
		if err != nil {
			t.Fatalf("Admit after the settle: %v", err)
		}
		_ = b.Settle(context.Background(), budget.Usage{}, Outcome{})
	})
}
