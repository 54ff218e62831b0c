package run

import (
	"context"
	"errors"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// tokStep is a model step estimated at prompt and out tokens and 1¢.
func tokStep(prompt, out int64) Step {
	return Step{Kind: KindModel, Provider: "test", Model: "m", EstimatedCost: cents(1), PromptTokens: prompt, MaxOutputTokens: out}
}

// twoManagers returns two Managers on st: two processes sharing a store.
func twoManagers(t *testing.T, st Store) (*Manager, *Manager) {
	t.Helper()
	mk := func(owner string) *Manager {
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Owner: owner, KillPoll: -1, ExpireEvery: -1, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	return mk("a"), mk("b")
}

// reservedTokens returns run id's TokenScope balance once m's background
// writes have landed.
func reservedTokens(t *testing.T, m *Manager, st Store, id string) budget.Balance {
	t.Helper()
	if err := m.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := st.Balance(context.Background(), TokenScope(id))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A step of a run with a token limit is not quoted as covered: its caller
// settles it before answering, so that the run's next call, in any
// process, is admitted against the tokens it used, not its estimate (an
// adversarial review: the gateway answered first, and another process
// refused the run's next call and stopped the run at 100 of its 1,000
// tokens).
func TestQuoteOfATokenLimitedStepSettlesFirst(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	ma, mb := twoManagers(t, st)
	ra, err := ma.Start(ctx, Spec{ID: "q", Tenant: "acme", Limits: store.Limits{MaxTokens: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	s := tokStep(100, 800)
	s.EstimatedCost = cents(1000)
	a, err := ra.Admit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if q := a.Quote(usage(50, 50), Outcome{}); q.Covered {
		t.Fatalf("quote %+v: want not covered (the tokens settle before Settle returns)", q)
	}
	if err := a.Settle(ctx, usage(50, 50), Outcome{}); err != nil {
		t.Fatal(err)
	}
	rb, err := mb.Get(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	b, err := rb.Admit(ctx, tokStep(100, 700)) // 100 used + 800 = 900 <= 1000
	if err != nil {
		t.Fatalf("the run's next call in another process: %v", err)
	}
	_ = b.Fail(ctx, errors.New("done"))
	// Without a token limit the quote is covered as before.
	rc, err := ma.Start(ctx, Spec{ID: "c", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.Admit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if q := c.Quote(usage(50, 50), Outcome{}); !q.Covered {
		t.Errorf("quote without a token limit %+v: want covered", q)
	}
	_ = c.Settle(ctx, usage(50, 50), Outcome{})
}

// Every way a step closes releases its token holds: Reserved of its run's
// TokenScope returns to 0 (from an adversarial review's cases).
func TestTokenReservationsReleasedOnEveryPath(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		limit int64
		close func(t *testing.T, r *Run, a *Admitted)
	}{
		{"settle", 10000, func(t *testing.T, r *Run, a *Admitted) { _ = a.Settle(ctx, usage(10, 10), Outcome{}) }},
		{"settle-nolimit", 0, func(t *testing.T, r *Run, a *Admitted) { _ = a.Settle(ctx, usage(10, 10), Outcome{}) }},
		{"fail", 10000, func(t *testing.T, r *Run, a *Admitted) { _ = a.Fail(ctx, errors.New("x")) }},
		{"hold-settle", 10000, func(t *testing.T, r *Run, a *Admitted) {
			if err := a.HoldTokens(ctx, 500); err != nil {
				t.Fatal(err)
			}
			if err := a.HoldTokens(ctx, 900); err != nil {
				t.Fatal(err)
			}
			_ = a.Settle(ctx, usage(300, 10), Outcome{})
		}},
		{"hold-settle-nolimit", 0, func(t *testing.T, r *Run, a *Admitted) {
			if err := a.HoldTokens(ctx, 900); err != nil {
				t.Fatal(err)
			}
			_ = a.Settle(ctx, usage(300, 10), Outcome{})
		}},
		{"hold-fail", 10000, func(t *testing.T, r *Run, a *Admitted) {
			if err := a.HoldTokens(ctx, 900); err != nil {
				t.Fatal(err)
			}
			_ = a.FailWith(ctx, Outcome{Err: failure.Wrap(failure.Canceled, errors.New("x"))})
		}},
		{"hold-refused-then-settle", 1000, func(t *testing.T, r *Run, a *Admitted) {
			if err := a.HoldTokens(ctx, 5000); err == nil {
				t.Fatal("hold over the limit accepted")
			}
			_ = a.Settle(ctx, usage(10, 10), Outcome{})
		}},
		{"kill-then-fail", 10000, func(t *testing.T, r *Run, a *Admitted) {
			_ = r.m.Kill(ctx, store.KillRun, r.ID(), "runaway")
			<-a.Context().Done()
			_ = a.Fail(ctx, a.cause(context.Canceled))
		}},
		{"finish-then-settle", 10000, func(t *testing.T, r *Run, a *Admitted) {
			_ = r.Finish(ctx, store.RunSucceeded, nil)
			_ = a.Settle(ctx, usage(10, 10), Outcome{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			ma, _ := twoManagers(t, st)
			r, err := ma.Start(ctx, Spec{ID: "l", Tenant: "acme", Limits: store.Limits{MaxTokens: tc.limit}})
			if err != nil {
				t.Fatal(err)
			}
			a, err := r.Admit(ctx, tokStep(100, 100))
			if err != nil {
				t.Fatal(err)
			}
			tc.close(t, r, a)
			if b := reservedTokens(t, ma, st, "l"); b.Reserved != 0 {
				t.Fatalf("TokenScope after %s: %+v, want nothing reserved", tc.name, b)
			}
		})
	}
}
