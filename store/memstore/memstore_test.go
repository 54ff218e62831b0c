package memstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func TestRuns(t *testing.T) {
	ctx := context.Background()
	s := New()
	for i, ten := range []string{"a", "b", "a"} {
		r := store.Run{ID: fmt.Sprint("r", i), Tenant: ten, Status: store.RunRunning, Started: t0.Add(time.Duration(i) * time.Minute), Labels: map[string]string{"k": "v"}}
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateRun(ctx, store.Run{ID: "r0"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate create: %v", err)
	}
	r, _ := s.GetRun(ctx, "r2")
	r.Labels["k"] = "changed" // a copy: the store is unaffected
	r.Status, r.Cost = store.RunSucceeded, budget.Dollars(2)
	if err := s.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateRun(ctx, store.Run{ID: "nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}
	if _, err := s.GetRun(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	list, _ := s.ListRuns(ctx, store.RunFilter{Tenant: "a"})
	if len(list) != 2 || list[0].ID != "r2" || list[0].Cost != budget.Dollars(2) || list[1].ID != "r0" {
		t.Fatalf("ListRuns(a) = %+v", list)
	}
	list, _ = s.ListRuns(ctx, store.RunFilter{Status: store.RunRunning, Since: t0.Add(time.Second)})
	if len(list) != 1 || list[0].ID != "r1" {
		t.Fatalf("ListRuns(running, since) = %+v", list)
	}
	if list, _ = s.ListRuns(ctx, store.RunFilter{Limit: 1}); len(list) != 1 || list[0].ID != "r2" {
		t.Fatalf("ListRuns(limit 1) = %+v", list)
	}
}

func TestSpans(t *testing.T) {
	ctx := context.Background()
	s := New()
	a := trace.Span{SpanID: "a", RunID: "r", Start: t0.Add(time.Second), Name: "started"}
	b := trace.Span{SpanID: "b", RunID: "r", Start: t0, Attrs: map[string]any{"x": int64(1)}}
	if err := s.WriteSpans(ctx, []trace.Span{a, b}); err != nil {
		t.Fatal(err)
	}
	a.Name, a.Status = "ended", trace.StatusOK
	if err := s.WriteSpans(ctx, []trace.Span{a}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.RunSpans(ctx, "r")
	if len(got) != 2 || got[0].SpanID != "b" || got[1].Name != "ended" || got[0].Attrs["x"] != int64(1) {
		t.Fatalf("RunSpans = %+v", got)
	}
	if got, _ := s.RunSpans(ctx, "other"); len(got) != 0 {
		t.Fatalf("other run spans %+v", got)
	}
}

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	s := New()
	lease := time.Minute
	c, _ := s.Claim(ctx, "k", "p1", lease, t0)
	if c.State != store.ClaimNew || !c.LeaseEnd.Equal(t0.Add(lease)) {
		t.Fatalf("first claim %+v", c)
	}
	if c, _ = s.Claim(ctx, "k", "p2", lease, t0.Add(time.Second)); c.State != store.ClaimInFlight || c.Owner != "p1" {
		t.Fatalf("second claim %+v", c)
	}
	if _, err := s.TakeOver(ctx, "k", "p2", lease, t0.Add(time.Second)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("takeover of live key: %v", err)
	}
	if c, _ = s.Claim(ctx, "k", "p2", lease, t0.Add(lease)); c.State != store.ClaimExpired {
		t.Fatalf("claim after lease %+v", c)
	}
	if c, err := s.TakeOver(ctx, "k", "p2", lease, t0.Add(lease)); err != nil || c.State != store.ClaimNew || c.Owner != "p2" {
		t.Fatalf("takeover %+v %v", c, err)
	}
	if err := s.Complete(ctx, "k", "p1", []byte("x"), false); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("complete by old owner: %v", err)
	}
	if err := s.Complete(ctx, "k", "p2", []byte(`{"ok":true}`), true); err != nil {
		t.Fatal(err)
	}
	c, _ = s.Claim(ctx, "k", "p3", lease, t0.Add(time.Hour))
	if c.State != store.ClaimCompleted || string(c.Result) != `{"ok":true}` || !c.IsError || c.Owner != "p2" {
		t.Fatalf("claim of completed %+v", c)
	}
	if err := s.Abandon(ctx, "k", "p2"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("abandon completed: %v", err)
	}
	_, _ = s.Claim(ctx, "j", "p1", lease, t0)
	if err := s.Abandon(ctx, "j", "p1"); err != nil {
		t.Fatal(err)
	}
	if c, _ = s.Claim(ctx, "j", "p2", lease, t0); c.State != store.ClaimNew {
		t.Fatalf("claim after abandon %+v", c)
	}
}

func TestConcurrentClaimHasOneOwner(t *testing.T) {
	ctx := context.Background()
	s := New()
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if c, _ := s.Claim(ctx, "k", fmt.Sprint(i), time.Minute, t0); c.State == store.ClaimNew {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d owners", wins.Load())
	}
}

func TestApprovals(t *testing.T) {
	ctx := context.Background()
	s := New()
	_ = s.CreateApproval(ctx, store.Approval{ID: "b", Tool: "refund", Requested: t0.Add(time.Second), Arguments: []byte(`{"n":1}`)})
	_ = s.CreateApproval(ctx, store.Approval{ID: "a", Tool: "delete", Requested: t0})
	if err := s.CreateApproval(ctx, store.Approval{ID: "a"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate approval: %v", err)
	}
	pend, _ := s.ListApprovals(ctx, store.ApprovalPending)
	if len(pend) != 2 || pend[0].ID != "a" || string(pend[1].Arguments) != `{"n":1}` {
		t.Fatalf("pending %+v", pend)
	}
	a, err := s.DecideApproval(ctx, "b", store.ApprovalApproved, "alice", "ok", t0.Add(time.Minute))
	if err != nil || a.State != store.ApprovalApproved || a.DecidedBy != "alice" || !a.Decided.Equal(t0.Add(time.Minute)) {
		t.Fatalf("decide %+v %v", a, err)
	}
	if a, err = s.DecideApproval(ctx, "b", store.ApprovalDenied, "bob", "", t0); !errors.Is(err, store.ErrConflict) || a.DecidedBy != "alice" {
		t.Fatalf("second decision %+v %v", a, err)
	}
	if _, err = s.DecideApproval(ctx, "a", store.ApprovalPending, "x", "", t0); err == nil {
		t.Fatal("decided as pending")
	}
	if _, err = s.DecideApproval(ctx, "zz", store.ApprovalDenied, "x", "", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("decide missing: %v", err)
	}
	if all, _ := s.ListApprovals(ctx, ""); len(all) != 2 {
		t.Fatalf("all %+v", all)
	}
}

func TestKillsAndWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s := New()
		ch, err := s.WatchKills(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = s.SetKill(ctx, store.Kill{Target: store.KillTool, Name: "rm", Reason: "bad"})
		_ = s.SetKill(ctx, store.Kill{Target: store.KillAll})
		synctest.Wait()
		select {
		case <-ch:
		default:
			t.Fatal("no notification after SetKill")
		}
		ks, _ := s.ListKills(ctx)
		if len(ks) != 2 || ks[0].Target != store.KillAll || ks[1].Reason != "bad" {
			t.Fatalf("kills %+v", ks)
		}
		_ = s.ClearKill(ctx, store.KillAll, "")
		synctest.Wait()
		if _, ok := <-ch; !ok {
			t.Fatal("channel closed early")
		}
		if ks, _ = s.ListKills(ctx); len(ks) != 1 {
			t.Fatalf("after clear %+v", ks)
		}
		cancel()
		synctest.Wait()
		// A notification may still be buffered (changes close together
		// are coalesced, or not): after it, the channel must be closed.
		// Had it stayed open, the bubble would deadlock here.
		n := 0
		for range ch {
			n++
		}
		if n > 1 {
			t.Fatalf("%d notifications after ctx end, want at most the one buffered", n)
		}
	})
}

func TestGoldensAndClose(t *testing.T) {
	ctx := context.Background()
	s := New()
	_ = s.SaveGolden(ctx, "g", "r1", []byte("canon"))
	c, run, err := s.Golden(ctx, "g")
	if err != nil || string(c) != "canon" || run != "r1" {
		t.Fatalf("golden %q %q %v", c, run, err)
	}
	if _, _, err := s.Golden(ctx, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing golden: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, "r"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if err := s.Reserve(ctx, budget.Reservation{ID: "x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("reserve after close: %v", err)
	}
}
