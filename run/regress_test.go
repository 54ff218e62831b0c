package run

import (
	"context"
	"errors"
	"log/slog"
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
)

// open is the gateway's way to find a run: Get, else Start, else (a
// concurrent request started it) Get again.
func open(ctx context.Context, m *Manager, id string, lim store.Limits) (*Run, error) {
	r, err := m.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		r, err = m.Start(ctx, Spec{ID: id, Tenant: "acme", Limits: lim})
		if errors.Is(err, store.ErrConflict) {
			r, err = m.Get(ctx, id)
		}
	}
	return r, err
}

// Adversary finding 1: concurrent first requests on one run id built
// several *Run objects, each with its own turn count, so the run served
// more turns than MaxTurns and a stale object wrote "running" over the
// stopped record.
func TestRegression_ConcurrentStartSameRunID(t *testing.T) {
	for trial := range 20 {
		f := newFixture(t, nil)
		ctx := context.Background()
		lim := store.Limits{MaxTurns: 20}
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			objs   = map[*Run]bool{}
			served atomic.Int64
		)
		turn := func() {
			r, err := open(ctx, f.m, "burst", lim)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			objs[r] = true
			mu.Unlock()
			if r.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil }) == nil {
				served.Add(1)
			}
		}
		for range 60 {
			wg.Go(turn)
		}
		wg.Wait()
		for range 25 {
			turn()
		}
		rec := f.stored(t, "burst")
		// The cost once came out a cent or two high: a record written
		// between a step's ledger settle and its in-memory count took the
		// ledger's figure, and the count was then added on top.
		if len(objs) != 1 || served.Load() != 20 || rec.Turns != 20 || rec.InputTokens != 20 ||
			rec.Cost != cents(20) ||
			rec.Status != store.RunStopped || rec.StopReason != string(failure.MaxTurnsExceeded) {
			t.Fatalf("trial %d: %d objects, %d turns served, record %+v", trial, len(objs), served.Load(), rec)
		}
	}
}

// Adversary finding 2: two processes on one store each counted turns in
// memory, so together they served more than MaxTurns.
func TestRegression_TwoProcessesShareTurnCap(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	m2 := f.second(t)
	lim := store.Limits{MaxTurns: 5}
	served := 0
	for i := range 9 {
		m := f.m
		if i%2 == 1 {
			m = m2
		}
		r, err := open(ctx, m, "shared", lim)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil })
		if err == nil {
			served++
		} else {
			wantReason(t, err, failure.MaxTurnsExceeded, failure.Fatal)
		}
	}
	if err := m2.Flush(ctx); err != nil { // its settles and record writes run in the background
		t.Fatal(err)
	}
	rec := f.stored(t, "shared")
	if served != 5 || rec.Turns != 5 || rec.Cost != cents(5) || rec.Status != store.RunStopped {
		t.Fatalf("served %d turns, record %+v", served, rec)
	}
	if b := f.balance(t, TurnScope("shared")); b.Settled+b.Reserved != 5 {
		t.Fatalf("turn scope %+v", b)
	}
}

// Adversary finding 4: a refused over-cap request canceled the run's
// admitted turns still in flight and recorded them with no spend.
func TestRegression_RefusalKeepsInFlightTurns(t *testing.T) {
	cases := []struct {
		name   string
		limits store.Limits
		want   failure.Reason
	}{
		{"turns", store.Limits{MaxTurns: 3}, failure.MaxTurnsExceeded},
		{"budget", store.Limits{MaxCost: cents(30)}, failure.BudgetExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			ctx := context.Background()
			r := f.start(t, Spec{ID: "slow", Tenant: "acme", Limits: c.limits})
			var in []*Admitted
			for range 3 {
				a, err := r.Admit(ctx, modelStep(cents(10)))
				if err != nil {
					t.Fatal(err)
				}
				in = append(in, a)
			}
			_, err := r.Admit(ctx, modelStep(cents(10)))
			wantReason(t, err, c.want, failure.Fatal)
			if rec := f.stored(t, "slow"); rec.Status != store.RunStopped || rec.StopReason != string(c.want) {
				t.Fatalf("record at the refusal %+v", rec)
			}
			for i, a := range in {
				if a.Context().Err() != nil {
					t.Fatalf("in-flight step %d canceled: %v", i, context.Cause(a.Context()))
				}
			}
			if r.Context().Err() != nil {
				t.Fatal("run context canceled with steps in flight")
			}
			for _, a := range in { // 5 input tokens: 5¢ each
				if err := a.Settle(ctx, usage(5, 0), Outcome{}); err != nil {
					t.Fatal(err)
				}
			}
			rec := f.stored(t, "slow")
			if rec.Status != store.RunStopped || rec.StopReason != string(c.want) || rec.Turns != 3 ||
				rec.Cost != cents(15) || rec.InputTokens != 15 {
				t.Fatalf("record after the steps settled %+v", rec)
			}
			if b := f.balance(t, budget.RunScope("slow")); b.Settled != cents(15) || b.Reserved != 0 {
				t.Fatalf("run scope %+v", b)
			}
			if r.Context().Err() == nil || f.m.Live() != 0 {
				t.Fatalf("run context %v, live %d: want canceled and dropped once drained", r.Context().Err(), f.m.Live())
			}
		})
	}
}

// A kill still cancels the steps a refusal let run on.
func TestRegression_KillAfterRefusalCancelsInFlight(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{ID: "k", Tenant: "acme", Limits: store.Limits{MaxTurns: 1}})
	a, err := r.Admit(ctx, modelStep(cents(1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Admit(ctx, modelStep(cents(1))); err == nil {
		t.Fatal("second turn admitted")
	}
	if err := f.m.Kill(ctx, store.KillRun, "k", "stop it"); err != nil {
		t.Fatal(err)
	}
	wantReason(t, context.Cause(a.Context()), failure.Killed, failure.Fatal)
	if rec := f.stored(t, "k"); rec.StopReason != string(failure.MaxTurnsExceeded) {
		t.Fatalf("the first stop reason was replaced: %+v", rec)
	}
}

// flakyStore fails Settle and UpdateRun a number of times before passing
// them to the memstore, as a locked SQLite file or a dropped connection.
type flakyStore struct {
	*memstore.Store
	settleFails, updateFails atomic.Int64
}

var errBusy = errors.New("database is locked (SQLITE_BUSY)")

func (s *flakyStore) Settle(ctx context.Context, id string, actual budget.USD) error {
	if s.settleFails.Add(-1) >= 0 {
		return errBusy
	}
	return s.Store.Settle(ctx, id, actual)
}

func (s *flakyStore) UpdateRun(ctx context.Context, r store.Run) error {
	if s.updateFails.Add(-1) >= 0 {
		return errBusy
	}
	return s.Store.UpdateRun(ctx, r)
}

func (s *flakyStore) SaveRun(ctx context.Context, r store.Run, turns, cost budget.Scope) error {
	if s.updateFails.Add(-1) >= 0 {
		return errBusy
	}
	return s.Store.SaveRun(ctx, r, turns, cost)
}

var quiet = slog.New(slog.DiscardHandler)

// Adversary finding 5: a settle that met a locked store was dropped and the
// spend lost when the reservation expired.
func TestRegression_SettleRetriedWhenStoreBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flakyStore{Store: memstore.New()}
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1, ExpireEvery: -1,
			Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		r, err := m.Start(ctx, Spec{ID: "busy", Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Admit(ctx, modelStep(cents(10)))
		if err != nil {
			t.Fatal(err)
		}
		// The store stays locked for about 12 s (5 settles, 5 writes).
		st.settleFails.Store(5)
		st.updateFails.Store(5)
		if err := a.Settle(ctx, usage(3, 0), Outcome{}); err != nil {
			t.Fatalf("Settle: %v (want nil: retried in the background)", err)
		}
		if m.Live() != 1 {
			t.Fatal("run dropped while its record write is pending")
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		b, _ := st.Balance(ctx, budget.RunScope("busy"))
		rec, _ := st.GetRun(ctx, "busy")
		s := m.Stats()
		if b.Settled != cents(3) || b.Reserved != 0 || rec.Cost != cents(3) || rec.InputTokens != 3 ||
			s.StoreRetries != 10 || s.StoreFailures != 0 {
			t.Fatalf("balance %+v, record %+v, stats %+v", b, rec, s)
		}

		// A store down for longer than StoreRetryFor: a settle of money
		// spent is not given up (the spend would be lost from the ledger,
		// the step's reservation expiring as unspent: adversarial review,
		// session 26); it lands once the store is back.
		a, err = r.Admit(ctx, modelStep(cents(10)))
		if err != nil {
			t.Fatal(err)
		}
		st.settleFails.Store(1 << 30)
		_ = a.Settle(ctx, usage(1, 0), Outcome{})
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if s := m.Stats(); s.StoreFailures != 0 {
			t.Fatalf("stats %+v after 2 minutes down; want nothing given up", s)
		}
		if b, _ := st.Balance(ctx, budget.RunScope("busy")); b.Settled != cents(3) || b.Reserved != cents(10) {
			t.Fatalf("balance %+v while down; want the step's 10¢ still held", b)
		}
		st.settleFails.Store(0)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if b, _ := st.Balance(ctx, budget.RunScope("busy")); b.Settled != cents(4) || b.Reserved != 0 {
			t.Fatalf("balance %+v once the store is back; want 4¢ settled, nothing held", b)
		}
	})
}

// Adversary finding 7: runs never left the Manager's memory.
func TestRegression_IdleRunsLeaveMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		idle, _ := m.Start(ctx, Spec{ID: "idle"})
		done, _ := m.Start(ctx, Spec{ID: "done"})
		_ = idle.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil })
		if err := done.Finish(ctx, store.RunSucceeded, nil); err != nil {
			t.Fatal(err)
		}
		if m.Live() != 1 {
			t.Fatalf("live %d after Finish, want 1 (the ended run dropped)", m.Live())
		}
		time.Sleep(9 * time.Minute)
		synctest.Wait()
		if m.Live() != 1 {
			t.Fatal("run dropped before its idle TTL")
		}
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if m.Live() != 0 {
			t.Fatalf("live %d after the idle TTL, want 0", m.Live())
		}
		// Get brings it back: the same object while it is held.
		got, err := m.Get(ctx, "idle")
		if err != nil || got != idle || m.Live() != 1 {
			t.Fatalf("Get after eviction: %p %v (held %p), live %d", got, err, idle, m.Live())
		}
		if err := got.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil }); err != nil {
			t.Fatal(err)
		}
		_ = got.Flush(ctx)
		if rec, _ := st.GetRun(ctx, "idle"); rec.Turns != 2 || rec.Status != store.RunRunning {
			t.Fatalf("record %+v", rec)
		}
	})
}

// Adversary finding 8: with a deadline of 1ns, the deadline callback read
// r.stopAF while newRun wrote it, and the run that ended at once was put in
// the live table after it had been removed, so it stayed there forever.
func TestRegression_InstantDeadlineRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		// Each reading of the clock is 1ms later, so the deadline has
		// passed when the run is built.
		var ticks atomic.Int64
		now := func() time.Time { return time.Now().Add(time.Duration(ticks.Add(1)) * time.Millisecond) }
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		for _, id := range []string{"a", "b", "c"} {
			r, err := m.Start(ctx, Spec{ID: id, Limits: store.Limits{Deadline: time.Nanosecond}})
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			_, err = r.Admit(ctx, modelStep(0))
			wantReason(t, err, failure.DeadlineExceeded, failure.Fatal)
			if rec, _ := st.GetRun(ctx, id); rec.Status != store.RunStopped || rec.StopReason != string(failure.DeadlineExceeded) {
				t.Fatalf("record %+v", rec)
			}
		}
		if m.Live() != 0 {
			t.Fatalf("live %d, want 0: the runs that ended at once stayed", m.Live())
		}
	})
}

// A run stopped by another process stays stopped: this process's late
// settle does not write "running" over it, and its next step is refused.
func TestRegression_StoppedElsewhereStaysStopped(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	m2 := f.second(t)
	r1 := f.start(t, Spec{ID: "x", Tenant: "acme"})
	a, err := r1.Admit(ctx, modelStep(cents(1)))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m2.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Finish(ctx, store.RunFailed, errors.New("agent gave up")); err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, usage(2, 0), Outcome{}); err != nil {
		t.Fatal(err)
	}
	rec := f.stored(t, "x")
	if rec.Status != store.RunFailed || rec.Cost != cents(2) || rec.Turns != 1 {
		t.Fatalf("record %+v", rec)
	}
	_, err = r1.Admit(ctx, modelStep(cents(1)))
	wantReason(t, err, failure.RunEnded, failure.Fatal)
	if !errors.Is(err, ErrEnded) {
		t.Errorf("a step of an ended run: %v; want it to match ErrEnded, as its doc says", err)
	}
}

// Two processes serving one run's calls in turn (a newcomer and an
// adversarial review): the run's token limit holds across them, and its
// record counts every process's tokens (it showed the largest of the two
// processes' counts, and a third call passed a limit that held two).
func TestRegression_TwoProcessesShareTokens(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	m2 := f.second(t)
	// Each call is estimated at 27 tokens and uses 7 in and 20 out: two fit in 60.
	step := Step{Kind: KindModel, Provider: "test", Model: "m", PromptTokens: 7, MaxOutputTokens: 20}
	lim := store.Limits{MaxTokens: 60}
	var served int
	for i := range 4 {
		m := f.m
		if i%2 == 1 {
			m = m2
		}
		r, err := open(ctx, m, "tok", lim)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Call(ctx, step, func(context.Context) (budget.Usage, error) { return usage(7, 20), nil })
		if err == nil {
			served++
		} else {
			fe := wantReason(t, err, failure.BudgetExceeded, failure.Fatal)
			if i == 2 && !strings.Contains(fe.Message, "token limit") {
				t.Errorf("call 3 refused for %q; want the token limit", fe.Message)
			}
		}
	}
	if err := m2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rec := f.stored(t, "tok")
	if served != 2 || rec.InputTokens != 14 || rec.OutputTokens != 40 {
		t.Fatalf("served %d calls, record %+v; want 2 calls, 14 in and 40 out", served, rec)
	}

	// Without a token limit the record still counts both processes' tokens.
	for i := range 3 {
		m := f.m
		if i == 1 {
			m = m2
		}
		r, err := open(ctx, m, "aba", store.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Call(ctx, step, func(context.Context) (budget.Usage, error) { return usage(7, 20), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := m2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rec := f.stored(t, "aba"); rec.InputTokens != 21 || rec.OutputTokens != 60 || rec.Turns != 3 {
		t.Fatalf("record %+v; want 3 turns, 21 in and 60 out", rec)
	}
}

// A step's token hold (HoldTokens, before a retry) counts for the run's
// other processes too: it is reserved in the ledger (an adversarial
// review: B admitted 500 tokens while A held 700 of the run's 1,000, and
// the run used 1,200). The hold is released when the step settles.
func TestRegression_TokenHoldAcrossProcesses(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	ra := f.start(t, Spec{ID: "hold", Limits: store.Limits{MaxTokens: 1000}})
	rb, err := f.second(t).Get(ctx, "hold")
	if err != nil {
		t.Fatal(err)
	}
	sa, err := ra.Admit(ctx, Step{Provider: "test", Model: "m", PromptTokens: 200, MaxOutputTokens: 200})
	if err != nil {
		t.Fatal(err)
	}
	// Attempt 1 used 300 tokens and failed; the retry's estimate is 400.
	if err := sa.HoldTokens(ctx, 700); err != nil {
		t.Fatalf("HoldTokens: %v", err)
	}
	if b := f.balance(t, TokenScope("hold")); b.Reserved != 700 {
		t.Fatalf("token scope %+v; want 700 reserved (the estimate and the hold)", b)
	}
	_, err = rb.Admit(ctx, Step{Provider: "test", Model: "m", PromptTokens: 250, MaxOutputTokens: 250})
	wantReason(t, err, failure.BudgetExceeded, failure.Fatal)
	if err := sa.Settle(ctx, usage(600, 100), Outcome{}); err != nil {
		t.Fatal(err)
	}
	if b := f.balance(t, TokenScope("hold")); b.Reserved != 0 || b.Settled != 700 {
		t.Fatalf("token scope after the settle %+v; want 700 settled, nothing held", b)
	}
}

// A step whose settle the store keeps failing past the reservation's TTL
// keeps its reservation while the settle is retried: the settle lands at
// the step's cost (an adversarial review: renewal stopped at the step's
// close, the janitor expired the reservation, and the retry took the
// spend for done, recording nothing).
func TestRegression_SettleRetriedPastTheTTLKeepsItsReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flakyStore{Store: memstore.New()}
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1, Logger: quiet,
			ReservationTTL: 2 * time.Minute, ExpireEvery: 30 * time.Second, StoreRetryFor: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		r, err := m.Start(ctx, Spec{ID: "ttl", Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Admit(ctx, modelStep(cents(10)))
		if err != nil {
			t.Fatal(err)
		}
		st.settleFails.Store(1 << 30) // the store refuses settles until told otherwise
		if err := a.Settle(ctx, usage(3, 0), Outcome{}); err != nil {
			t.Fatalf("Settle: %v (want nil: retried in the background)", err)
		}
		time.Sleep(5 * time.Minute) // past the TTL, with the janitor running
		synctest.Wait()
		if b, _ := st.Balance(ctx, budget.RunScope("ttl")); b.Reserved != cents(10) {
			t.Fatalf("run scope while the settle is retried %+v; want the 10¢ reservation kept", b)
		}
		st.settleFails.Store(0)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if b, _ := st.Balance(ctx, budget.RunScope("ttl")); b.Settled != cents(3) || b.Reserved != 0 {
			t.Fatalf("run scope %+v; want the step's 3¢ settled, nothing held", b)
		}
	})
}
