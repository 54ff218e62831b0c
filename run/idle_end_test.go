package run

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// With EndIdle (the gateway's setting), a run nobody uses for IdleTTL ends
// by the outcome of its last model call, instead of staying running in
// the store forever.
func TestEndIdleRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1,
			IdleTTL: time.Minute, EndIdle: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		ok, _ := m.Start(ctx, Spec{ID: "ok"})
		bad, _ := m.Start(ctx, Spec{ID: "bad"})
		lastCall := time.Now()
		_ = ok.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil })
		_ = bad.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) {
			return budget.Usage{}, errors.New("upstream gave up")
		})
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if rec, _ := st.GetRun(ctx, "ok"); rec.Status != store.RunRunning {
			t.Fatalf("ended before its idle TTL: %+v", rec)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		// Ended is when it was last active, not when the idle time ran out
		// (a 1 ms call does not last its idle TTL).
		if rec, _ := st.GetRun(ctx, "ok"); rec.Status != store.RunSucceeded || !rec.Ended.Equal(lastCall) {
			t.Errorf("idle run after a good call: %+v, want succeeded, ended at %v", rec, lastCall)
		}
		if rec, _ := st.GetRun(ctx, "bad"); rec.Status != store.RunFailed || !strings.HasPrefix(rec.Error, "idle for 1m0s with no step since") {
			t.Errorf("idle run after a failed call: %+v, want failed with the idle error", rec)
		}
		if m.Live() != 0 {
			t.Errorf("%d runs still in memory", m.Live())
		}
	})
}

// A run's own IdleTTL (the gateway's runs it named itself) replaces the
// Manager's.
func TestSpecIdleTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1,
			IdleTTL: 10 * time.Minute, EndIdle: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		short, _ := m.Start(ctx, Spec{ID: "short", IdleTTL: 30 * time.Second})
		long, _ := m.Start(ctx, Spec{ID: "long"})
		for _, r := range []*Run{short, long} {
			_ = r.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil })
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if rec, _ := st.GetRun(ctx, "short"); rec.Status != store.RunSucceeded {
			t.Errorf("short-lived run after a minute idle: %s, want succeeded", rec.Status)
		}
		if rec, _ := st.GetRun(ctx, "long"); rec.Status != store.RunRunning {
			t.Errorf("run with the default TTL after a minute idle: %s, want running", rec.Status)
		}
		if m.Live() != 1 {
			t.Errorf("%d runs in memory, want 1", m.Live())
		}
	})
}

// Newcomer finding (session 2): with EndIdle, a run whose deadline passed
// while it sat idle (every call answered) was stored stopped /
// deadline_exceeded; under the default limits (5 min deadline, 10 min
// idle) every client-named run ended so. It ends by its last step's
// outcome; a step asked for after the deadline is still refused for it.
func TestDeadlinePassingIdleEndsByOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1,
			IdleTTL: 10 * time.Minute, EndIdle: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		r, _ := m.Start(ctx, Spec{ID: "d", Limits: store.Limits{Deadline: 5 * time.Second}})
		_ = r.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil })
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if err := m.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		rec, _ := st.GetRun(ctx, "d")
		if rec.Status != store.RunSucceeded || rec.StopReason != "" {
			t.Fatalf("run idle at its deadline: %+v, want succeeded", rec)
		}
		_, err = r.Admit(ctx, modelStep(cents(1)))
		wantReason(t, err, failure.DeadlineExceeded, failure.Fatal)
		// So is a call to the ended run read back from the store (once it
		// left memory, or in another process): it got run_ended.
		m2, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1, IdleTTL: 10 * time.Minute, EndIdle: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m2.Close()
		loaded, err := m2.Get(ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		_, err = loaded.Admit(ctx, modelStep(cents(1)))
		wantReason(t, err, failure.DeadlineExceeded, failure.Fatal)

		// Idle at its deadline after a failed call: failed, and the error
		// says the deadline ended it (newcomer finding: it said "idle for
		// 10m0s" after a minute).
		rf, _ := m.Start(ctx, Spec{ID: "df", Limits: store.Limits{Deadline: 5 * time.Second}})
		_ = rf.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) {
			return budget.Usage{}, errors.New("stream cut")
		})
		time.Sleep(6 * time.Second)
		synctest.Wait()
		_ = m.Flush(ctx)
		if rec, _ := st.GetRun(ctx, "df"); rec.Status != store.RunFailed ||
			!strings.HasPrefix(rec.Error, "its deadline of 5s passed with no step since") {
			t.Errorf("run idle at its deadline after a failed call: %+v, want failed, the deadline named", rec)
		}

		// A step still open at the deadline is cut short: a deadline stop.
		r2, _ := m.Start(ctx, Spec{ID: "d2", Limits: store.Limits{Deadline: 5 * time.Second}})
		err = r2.Call(ctx, modelStep(cents(1)), func(ctx context.Context) (budget.Usage, error) {
			<-ctx.Done()
			return budget.Usage{}, ctx.Err()
		})
		wantReason(t, err, failure.DeadlineExceeded, failure.Fatal)
		synctest.Wait()
		_ = m.Flush(ctx)
		if rec, _ := st.GetRun(ctx, "d2"); rec.Status != store.RunStopped || rec.StopReason != string(failure.DeadlineExceeded) {
			t.Fatalf("run cut by its deadline: %+v, want stopped deadline_exceeded", rec)
		}
	})
}

// Newcomer finding (session 2): runs whose process stopped or crashed
// stayed "running" in the store for ever. A gateway's Manager ends a
// running run it does not hold once its deadline passed more than IdleTTL
// ago; one without a deadline is left alone.
func TestEndAbandonedRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		// What a crashed process left: running records, one turn and 2¢
		// in the ledger.
		for _, rec := range []store.Run{
			{ID: "abandoned", Tenant: "acme", Status: store.RunRunning, Started: time.Now(),
				Limits: store.Limits{Deadline: 5 * time.Minute, MaxTurns: 3}},
			{ID: "no-deadline", Tenant: "acme", Status: store.RunRunning, Started: time.Now()},
			{ID: "answered", Tenant: "acme", Status: store.RunRunning, Started: time.Now(),
				Limits: store.Limits{Deadline: 5 * time.Minute}},
		} {
			if err := st.CreateRun(ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		for _, res := range []budget.Reservation{
			{ID: "t", Owner: "gone", Amount: 1, Spend: true, Scopes: []budget.ScopeLimit{{Scope: TurnScope("abandoned")}}},
			{ID: "c", Owner: "gone", Amount: cents(2), Spend: true, Scopes: []budget.ScopeLimit{{Scope: budget.RunScope("abandoned")}}},
		} {
			if err := st.Reserve(ctx, res); err != nil {
				t.Fatal(err)
			}
		}

		// "answered" had two model calls, its last one answered 2s in (a
		// gateway stopped cleanly with the run idle): it ends succeeded,
		// then, not failed at its deadline.
		answered := time.Now().Add(2 * time.Second)
		if err := st.WriteSpans(ctx, []trace.Span{
			{RunID: "answered", SpanID: "m1", Kind: trace.KindModel, Start: time.Now(), End: time.Now().Add(time.Second), Status: trace.StatusError},
			{RunID: "answered", SpanID: "m2", Kind: trace.KindModel, Start: time.Now().Add(time.Second), End: answered, Status: trace.StatusOK},
		}); err != nil {
			t.Fatal(err)
		}
		sink := &recSink{}
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: sink, KillPoll: -1,
			ExpireEvery: time.Minute, IdleTTL: 10 * time.Minute, EndIdle: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		time.Sleep(14 * time.Minute) // deadline 5 min + idle 10 min: not yet
		synctest.Wait()
		if rec, _ := st.GetRun(ctx, "abandoned"); rec.Status != store.RunRunning {
			t.Fatalf("ended before its deadline plus the idle time: %+v", rec)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		rec, _ := st.GetRun(ctx, "abandoned")
		if rec.Status != store.RunFailed || !rec.Ended.Equal(rec.Started.Add(5*time.Minute)) ||
			rec.Turns != 1 || rec.Cost != cents(2) || rec.Error == "" {
			t.Fatalf("abandoned run: %+v, want failed at its deadline with its counts", rec)
		}
		if rec, _ := st.GetRun(ctx, "no-deadline"); rec.Status != store.RunRunning {
			t.Fatalf("a run without a deadline: %+v, want left running", rec)
		}
		if rec, _ := st.GetRun(ctx, "answered"); rec.Status != store.RunSucceeded || !rec.Ended.Equal(answered) || rec.Error != "" {
			t.Fatalf("a run whose last call answered: %+v, want succeeded at that call's end", rec)
		}
		// Each ended run's span, closed with its status.
		got := map[string]trace.Status{}
		for _, sp := range sink.byKind(trace.KindRun) {
			got[sp.RunID] = sp.Status
		}
		if got["answered"] != trace.StatusOK || got["abandoned"] != trace.StatusError || len(got) != 2 {
			t.Errorf("run spans recorded: %v", got)
		}
	})
}
