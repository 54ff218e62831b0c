package run

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// An Owned run (belay eval's) is ended by its caller only: with EndIdle
// (the gateway's setting, which eval's stack shares) it is not ended for
// being idle, and a deadline that passes between two of its steps stops it
// (deadline_exceeded) instead of ending it by its last step's outcome. A
// newcomer's eval run whose deadline passed while its agent slept between
// two calls was recorded succeeded, though the agent's second call was
// refused and it exited 1. The same run not Owned keeps the gateway's
// rule (the control).
func TestOwnedRunNotEndedIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: &recSink{}, KillPoll: -1,
			IdleTTL: time.Minute, EndIdle: true})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		limits := store.Limits{Deadline: 10 * time.Second}
		owned, _ := m.Start(ctx, Spec{ID: "owned", Limits: limits, Owned: true})
		gw, _ := m.Start(ctx, Spec{ID: "gateway", Limits: limits})
		idle, _ := m.Start(ctx, Spec{ID: "idle", Owned: true})
		for _, r := range []*Run{owned, gw, idle} {
			if err := r.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil }); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(15 * time.Second) // past the deadline, between steps
		synctest.Wait()
		err = owned.Call(ctx, modelStep(cents(1)), func(context.Context) (budget.Usage, error) { return usage(1, 0), nil })
		if fe := failure.As(err); fe == nil || fe.Reason != failure.DeadlineExceeded {
			t.Errorf("owned run's call after its deadline: %v, want deadline_exceeded", err)
		}
		if err := owned.Finish(ctx, store.RunFailed, context.Canceled); err != nil {
			t.Fatal(err)
		}
		if rec, _ := st.GetRun(ctx, "owned"); rec.Status != store.RunStopped || rec.StopReason != string(failure.DeadlineExceeded) {
			t.Errorf("owned run whose deadline passed between steps: %s (stop reason %q), want stopped, deadline_exceeded", rec.Status, rec.StopReason)
		}
		if rec, _ := st.GetRun(ctx, "gateway"); rec.Status != store.RunSucceeded {
			t.Errorf("gateway run whose deadline passed between steps: %s, want succeeded by its last step", rec.Status)
		}
		time.Sleep(5 * time.Minute) // far past the idle TTL
		synctest.Wait()
		if rec, _ := st.GetRun(ctx, "idle"); rec.Status != store.RunRunning {
			t.Errorf("owned run idle past its idle TTL: %s, want still running until its caller ends it", rec.Status)
		}
		if err := idle.Finish(ctx, store.RunFailed, context.Canceled); err != nil {
			t.Fatal(err)
		}
		if rec, _ := st.GetRun(ctx, "idle"); rec.Status != store.RunFailed {
			t.Errorf("owned run finished failed after a long idle: %s, want failed", rec.Status)
		}
	})
}
