package storetest

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
)

func testApprovals(t *testing.T, s store.Store) {
	ctx := context.Background()
	mk := func(id string, requested time.Duration) store.Approval {
		return store.Approval{ID: id, RunID: "r1", Tenant: "acme", Tool: "issue_refund",
			Arguments: []byte(`{"amount":120,"order":"A-17"}`), Requested: at(requested)}
	}
	must(t, s.CreateApproval(ctx, mk("ap2", 2*time.Second)))
	must(t, s.CreateApproval(ctx, mk("ap1", time.Second)))
	must(t, s.CreateApproval(ctx, mk("ap3", 3*time.Second)))
	if err := s.CreateApproval(ctx, mk("ap1", 0)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateApproval of an existing id: got %v, want ErrConflict", err)
	}
	a, err := s.GetApproval(ctx, "ap1")
	must(t, err)
	if a.State != store.ApprovalPending || !bytes.Equal(a.Arguments, mk("", 0).Arguments) ||
		!a.Requested.Equal(at(time.Second)) || !a.Decided.IsZero() || a.Tool != "issue_refund" {
		t.Errorf("GetApproval = %+v", a)
	}

	d, err := s.DecideApproval(ctx, "ap2", store.ApprovalApproved, "alice", "ok for A-17", at(time.Minute))
	must(t, err)
	if d.State != store.ApprovalApproved || d.DecidedBy != "alice" || d.Note != "ok for A-17" ||
		!d.Decided.Equal(at(time.Minute)) || d.ID != "ap2" || d.RunID != "r1" {
		t.Errorf("DecideApproval = %+v", d)
	}
	if cur, err := s.DecideApproval(ctx, "ap2", store.ApprovalDenied, "bob", "", at(2*time.Minute)); !errors.Is(err, store.ErrConflict) ||
		cur.ID != "ap2" || cur.State != store.ApprovalApproved || cur.DecidedBy != "alice" || cur.Note != "ok for A-17" {
		t.Errorf("second DecideApproval: got %+v, %v; want ErrConflict with the approval as alice decided it", cur, err)
	}
	if a, _ := s.GetApproval(ctx, "ap2"); a.State != store.ApprovalApproved || a.DecidedBy != "alice" {
		t.Errorf("a refused second decision changed the approval: %+v", a)
	}
	if _, err := s.DecideApproval(ctx, "ghost", store.ApprovalDenied, "bob", "", at(0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DecideApproval of an absent id: got %v, want ErrNotFound", err)
	}
	if _, err := s.DecideApproval(ctx, "ap3", store.ApprovalPending, "bob", "", at(0)); err == nil {
		t.Error("DecideApproval to pending: nil error")
	}
	_, err = s.DecideApproval(ctx, "ap3", store.ApprovalExpired, "belay", "timeout", at(time.Hour))
	must(t, err)
	if _, err := s.GetApproval(ctx, "ghost"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetApproval of an absent id: got %v, want ErrNotFound", err)
	}

	ids := func(state store.ApprovalState) []string {
		list, err := s.ListApprovals(ctx, state)
		must(t, err)
		out := []string{}
		for _, a := range list {
			out = append(out, a.ID)
		}
		return out
	}
	for state, want := range map[store.ApprovalState][]string{
		"":                     {"ap1", "ap2", "ap3"},
		store.ApprovalPending:  {"ap1"},
		store.ApprovalApproved: {"ap2"},
		store.ApprovalExpired:  {"ap3"},
		store.ApprovalDenied:   {},
	} {
		if got := ids(state); !reflect.DeepEqual(got, want) {
			t.Errorf("ListApprovals(%q) = %v, want %v", state, got, want)
		}
	}
}

func testKills(t *testing.T, s store.Store) {
	ctx := context.Background()
	if ks, err := s.ListKills(ctx); err != nil || len(ks) != 0 {
		t.Fatalf("ListKills on a fresh store = %v, %v", ks, err)
	}
	k1 := store.Kill{Target: store.KillTool, Name: "send_email", Reason: "spam loop", By: "oncall", At: at(time.Second)}
	k2 := store.Kill{Target: store.KillAll, Reason: "incident", By: "oncall", At: at(2 * time.Second)}
	k3 := store.Kill{Target: store.KillRun, Name: "r1", At: at(2 * time.Second)}
	for _, k := range []store.Kill{k2, k1, k3} {
		must(t, s.SetKill(ctx, k))
	}
	k1.Reason = "still looping" // setting again replaces
	must(t, s.SetKill(ctx, k1))
	list, err := s.ListKills(ctx)
	must(t, err)
	want := []store.Kill{k1, k2, k3} // by time, then target ("all" < "run")
	if len(list) != len(want) {
		t.Fatalf("ListKills = %+v, want %+v", list, want)
	}
	for i := range want {
		g, w := list[i], want[i]
		if !g.At.Equal(w.At) {
			t.Errorf("kill %d At = %v, want %v", i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("kill %d = %+v, want %+v", i, g, w)
		}
	}
	must(t, s.ClearKill(ctx, store.KillAll, ""))
	must(t, s.ClearKill(ctx, store.KillAll, "")) // absent: no error
	list, err = s.ListKills(ctx)
	must(t, err)
	if len(list) != 2 || list[0].Target != store.KillTool || list[1].Target != store.KillRun {
		t.Errorf("after ClearKill: %+v", list)
	}
	for _, bad := range []store.Kill{{Target: "galaxy", Name: "x"}, {Target: store.KillRun}, {Target: store.KillAll, Name: "x"}} {
		if err := s.SetKill(ctx, bad); err == nil {
			t.Errorf("SetKill(%+v): nil error", bad)
		}
	}
}

func testGoldens(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, _, err := s.Golden(ctx, "refund-happy"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Golden of an absent name: got %v, want ErrNotFound", err)
	}
	must(t, s.SaveGolden(ctx, "refund-happy", "r1", []byte(`[{"name":"chat"}]`)))
	must(t, s.SaveGolden(ctx, "other", "r9", []byte(`[]`)))
	must(t, s.SaveGolden(ctx, "refund-happy", "r2", []byte(`[{"name":"chat"},{"name":"execute_tool"}]`)))
	c, run, err := s.Golden(ctx, "refund-happy")
	must(t, err)
	if run != "r2" || string(c) != `[{"name":"chat"},{"name":"execute_tool"}]` {
		t.Errorf("Golden = %q, %q; want the second save", c, run)
	}
	list, err := s.ListGoldens(ctx)
	must(t, err)
	want := []store.GoldenInfo{{Name: "other", RunID: "r9", Bytes: 2}, {Name: "refund-happy", RunID: "r2", Bytes: 41}}
	if !slices.Equal(list, want) {
		t.Errorf("ListGoldens = %+v, want %+v", list, want)
	}
	must(t, s.DeleteGolden(ctx, "other"))
	if err := s.DeleteGolden(ctx, "other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteGolden of a deleted name: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Golden(ctx, "other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Golden after DeleteGolden: %v, want ErrNotFound", err)
	}
	if list, err := s.ListGoldens(ctx); err != nil || len(list) != 1 || list[0].Name != "refund-happy" {
		t.Errorf("ListGoldens after a delete = %+v, %v", list, err)
	}
}
