package run

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// An in-process Kill cancels the in-flight step before it returns.
func TestKillCancelsInFlightStepAtOnce(t *testing.T) {
	for _, target := range []store.KillTarget{store.KillRun, store.KillTenant, store.KillAll} {
		t.Run(string(target), func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.KillPoll = -1 })
			ctx := context.Background()
			r := f.start(t, Spec{Tenant: "acme"})
			other := f.start(t, Spec{Tenant: "globex"})
			a, err := r.Admit(ctx, modelStep(cents(5)))
			if err != nil {
				t.Fatal(err)
			}
			name := map[store.KillTarget]string{store.KillRun: r.ID(), store.KillTenant: "acme"}[target]
			if err := f.m.Kill(ctx, target, name, "runaway"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-a.Context().Done():
			default:
				t.Fatal("step context not done when Kill returned")
			}
			wantReason(t, context.Cause(a.Context()), failure.Killed, failure.Fatal)
			// The step ends with the partial usage it consumed: charged.
			if err := a.Settle(ctx, usage(2, 0), Outcome{Err: context.Cause(a.Context())}); err != nil {
				t.Fatal(err)
			}
			rec := f.stored(t, r.ID())
			if rec.Status != store.RunStopped || rec.StopReason != "killed" || rec.Cost != cents(2) {
				t.Fatalf("record %+v", rec)
			}
			if b := f.balance(t, budget.RunScope(r.ID())); b.Settled != cents(2) || b.Reserved != 0 {
				t.Fatalf("ledger %+v", b)
			}
			otherKilled := other.Context().Err() != nil
			if otherKilled != (target == store.KillAll) {
				t.Fatalf("other run killed = %v", otherKilled)
			}
			var kills int
			for _, sp := range f.sink.byKind(trace.KindRun) {
				for _, e := range sp.Events {
					if e.Name == "kill" && e.Attrs["reason"] == "runaway" {
						kills++
					}
				}
			}
			if kills == 0 {
				t.Fatal("no kill event on the run span")
			}
		})
	}
}

func TestCallReturnsTheKill(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{})
	err := r.Call(ctx, modelStep(cents(5)), func(ctx context.Context) (budget.Usage, error) {
		_ = f.m.Kill(context.Background(), store.KillRun, r.ID(), "stop")
		<-ctx.Done()
		return budget.Usage{}, ctx.Err()
	})
	wantReason(t, err, failure.Killed, failure.Fatal)
	if b := f.balance(t, budget.RunScope(r.ID())); b.Settled != 0 || b.Reserved != 0 {
		t.Fatalf("ledger %+v", b)
	}
}

// hidden hides the store's KillWatcher so only polling sees flags.
type hidden struct{ Store }

// A flag set by another process is seen within one poll interval.
func TestKillFlagFromStoreSeenWithinPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.Store = hidden{c.Store} })
		ctx := context.Background()
		r := f.start(t, Spec{})
		a, err := r.Admit(ctx, modelStep(cents(1)))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		_ = f.st.SetKill(ctx, store.Kill{Target: store.KillRun, Name: r.ID(), Reason: "ops"})
		set := time.Now()
		<-a.Context().Done()
		if d := time.Since(set); d > DefaultKillPoll {
			t.Fatalf("kill seen after %v, want within %v", d, DefaultKillPoll)
		}
		synctest.Wait()
		if rec := f.stored(t, r.ID()); rec.StopReason != "killed" {
			t.Fatalf("record %+v", rec)
		}
		_ = a.Fail(ctx, context.Cause(a.Context()))
	})
}

// A store that pushes changes (KillWatcher) is seen without waiting a poll.
func TestKillFlagFromWatcherSeenAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.KillPoll = -1 })
		ctx := context.Background()
		r := f.start(t, Spec{Tenant: "acme"})
		_ = f.st.SetKill(ctx, store.Kill{Target: store.KillTenant, Name: "acme"})
		synctest.Wait()
		if r.Context().Err() == nil {
			t.Fatal("run not killed after the store's notification")
		}
		// A new run of the killed tenant is refused at its first step.
		r2 := f.start(t, Spec{Tenant: "acme"})
		_, err := r2.Admit(ctx, modelStep(0))
		wantReason(t, err, failure.Killed, failure.Fatal)
	})
}

// TestReservationTTLExpiry: a step whose process stopped renewing its
// reservation (here a second Manager on the same store, its janitor and
// renewal off) loses it to the janitor of another process after
// ReservationTTL; the step's late settle is still recorded. (A live
// process renews its open steps' reservations: TestLongCallKeepsItsReservation.)
func TestReservationTTLExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(c *Config) {
			c.ReservationTTL = time.Minute
			c.ExpireEvery = 10 * time.Second
			c.TenantBudgets = map[string]TenantBudget{"acme": {Limit: budget.Dollars(1)}}
		})
		gone, err := NewManager(Config{Store: f.st, Pricing: testPricing(t), Sink: f.sink, Owner: "gone",
			ReservationTTL: time.Minute, ExpireEvery: -1, KillPoll: -1,
			TenantBudgets: map[string]TenantBudget{"acme": {Limit: budget.Dollars(1)}}})
		if err != nil {
			t.Fatal(err)
		}
		defer gone.Close()
		ctx := context.Background()
		tenant := budget.TenantScope("acme", budget.Month, time.Now())
		r, err := gone.Start(ctx, Spec{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		stuck, err := r.Admit(ctx, modelStep(cents(80)))
		if err != nil {
			t.Fatal(err)
		}
		if err := gone.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Second)
		if b := f.balance(t, tenant); b.Reserved != cents(80) {
			t.Fatalf("before the TTL %+v", b)
		}
		time.Sleep(30 * time.Second) // past 1m, and a janitor tick
		if b := f.balance(t, tenant); b.Reserved != 0 {
			t.Fatalf("after the TTL %+v", b)
		}
		if _, err := f.start(t, Spec{Tenant: "acme"}).Admit(ctx, modelStep(cents(50))); err != nil {
			t.Fatalf("reservation after expiry: %v", err)
		}
		// The stuck step finishes late: its spend is still recorded.
		if err := stuck.Settle(ctx, usage(80, 0), Outcome{}); err != nil {
			t.Fatal(err)
		}
		if err := gone.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if b := f.balance(t, tenant); b.Settled != cents(80) || b.Reserved != cents(50) {
			t.Fatalf("after the late settle %+v", b)
		}
	})
}

func TestDeadlineStopsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx := context.Background()
		r := f.start(t, Spec{Limits: store.Limits{Deadline: 30 * time.Second}})
		a, err := r.Admit(ctx, modelStep(cents(1)))
		if err != nil {
			t.Fatal(err)
		}
		<-a.Context().Done()
		if d := time.Since(r.Record().Started); d != 30*time.Second {
			t.Fatalf("canceled after %v", d)
		}
		synctest.Wait()
		if rec := f.stored(t, r.ID()); rec.Status != store.RunStopped || rec.StopReason != "deadline_exceeded" {
			t.Fatalf("record %+v", rec)
		}
		if err := a.Fail(ctx, context.Cause(a.Context())); err != nil {
			t.Fatal(err)
		}
		_, err = r.Admit(ctx, modelStep(0))
		if !errors.Is(err, failure.DeadlineExceeded) {
			t.Fatalf("admit after deadline: %v", err)
		}
	})
}

// Steps racing a kill leave nothing reserved, and the ledger agrees with
// the run's counters.
func TestKillRacingSteps(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{Tenant: "acme"})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_ = r.Call(ctx, modelStep(cents(2)), func(ctx context.Context) (budget.Usage, error) {
				if i%2 == 0 {
					return usage(1, 0), nil
				}
				<-ctx.Done()
				return usage(1, 0), ctx.Err() // partial usage is charged
			})
		})
		if i == 25 {
			wg.Go(func() { _ = f.m.Kill(ctx, store.KillRun, r.ID(), "race") })
		}
	}
	wg.Wait()
	b := f.balance(t, budget.RunScope(r.ID()))
	rec := f.stored(t, r.ID())
	if b.Reserved != 0 || b.Settled != rec.Cost || rec.StopReason != "killed" || rec.Cost != cents(rec.InputTokens) {
		t.Fatalf("ledger %+v, record %+v", b, rec)
	}
}

// staleKills is a store whose next ListKills, once armed, reads the flags
// and then waits for release before returning them: a refresh that read
// the store just before a Kill in this process wrote it.
type staleKills struct {
	Store
	armed         atomic.Bool
	read, release chan struct{}
}

func (s *staleKills) ListKills(ctx context.Context) ([]store.Kill, error) {
	ks, err := s.Store.ListKills(ctx)
	if s.armed.CompareAndSwap(true, false) {
		close(s.read)
		<-s.release
	}
	return ks, err
}

// A refresh of the flags that read the store before a Kill in this
// process, and finishes after it, does not put back the set without that
// kill: the process would stop honouring its own flag until the next
// refresh (and the Kill, applying the set the refresh overwrote, could
// miss its runs).
func TestRefreshBegunBeforeAKillKeepsIt(t *testing.T) {
	st := &staleKills{Store: memstore.New(), read: make(chan struct{}), release: make(chan struct{})}
	m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	st.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- m.refreshKills(ctx) }()
	<-st.read // the refresh holds the flags as they were: none
	if err := m.Kill(ctx, store.KillTenant, "acme", "runaway"); err != nil {
		t.Fatal(err)
	}
	close(st.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Killed(store.KillTenant, "acme"); !ok {
		t.Error("the refresh that read the store before the kill dropped it from this process's flags")
	}
}

// A killed run refuses its next step with the kill's reason (newcomer
// finding: "run … was stopped (killed)" said neither who nor why), also
// when another Manager loads the stopped record from the store.
func TestKilledRunRefusalNamesTheKill(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.KillPoll = -1 })
	ctx := context.Background()
	r := f.start(t, Spec{ID: "killme", Tenant: "acme"})
	if err := f.m.Kill(ctx, store.KillRun, r.ID(), "runaway loop"); err != nil {
		t.Fatal(err)
	}
	want := "run killme was stopped (killed): killed by the kill switch (run killme): runaway loop"
	_, err := r.Admit(ctx, modelStep(cents(1)))
	if fe := failure.As(err); fe == nil || fe.Reason != failure.Killed || fe.Message != want {
		t.Errorf("in memory: %v; want killed, %q", err, want)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m2, err := NewManager(Config{Store: f.st, Pricing: testPricing(t), Sink: &recSink{}, Owner: "other-owner", KillPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	r2, err := m2.Get(ctx, "killme")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r2.Admit(ctx, modelStep(cents(1)))
	if fe := failure.As(err); fe == nil || fe.Reason != failure.Killed || fe.Message != want {
		t.Errorf("loaded from the store: %v; want killed, %q", err, want)
	}
}

func TestStopMessage(t *testing.T) {
	for recErr, want := range map[string]string{
		"fatal: killed: killed by the kill switch (tenant acme)": "killed by the kill switch (tenant acme)",
		"fatal: budget_exceeded: token limit: 9 used":            "token limit: 9 used",
		"abandoned: no process held the run":                     "abandoned: no process held the run",
		"":                                                       "",
	} {
		reason := "killed"
		if strings.Contains(recErr, "budget") {
			reason = "budget_exceeded"
		}
		if got := stopMessage(recErr, reason); got != want {
			t.Errorf("stopMessage(%q, %q) = %q; want %q", recErr, reason, got, want)
		}
	}
}
