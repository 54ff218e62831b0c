package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

func sampleRun(id, tenant string, started time.Time) store.Run {
	return store.Run{
		ID: id, Tenant: tenant, Agent: "support", AgentVersion: "1.2.0", PromptVersion: "p7",
		Labels:  map[string]string{"env": "ci", "suite": "refunds"},
		Limits:  store.Limits{MaxTurns: 20, Deadline: 5 * time.Minute, MaxTokens: 100_000, MaxCost: budget.Dollars(1)},
		Status:  store.RunRunning,
		Started: started,
	}
}

// sameRun compares runs with time.Time.Equal for the times.
func sameRun(t *testing.T, got, want store.Run) {
	t.Helper()
	if !got.Started.Equal(want.Started) || !got.Ended.Equal(want.Ended) {
		t.Errorf("run %s times: got %v..%v, want %v..%v", want.ID, got.Started, got.Ended, want.Started, want.Ended)
	}
	got.Started, got.Ended, want.Started, want.Ended = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("run %s:\n got %+v\nwant %+v", want.ID, got, want)
	}
}

func testRuns(t *testing.T, s store.Store) {
	ctx := context.Background()
	r := sampleRun("run-1", "acme", at(0))
	must(t, s.CreateRun(ctx, r))
	got, err := s.GetRun(ctx, "run-1")
	must(t, err)
	sameRun(t, got, r)

	if err := s.CreateRun(ctx, r); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateRun of an existing id: got %v, want ErrConflict", err)
	}
	if _, err := s.GetRun(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun of an absent id: got %v, want ErrNotFound", err)
	}
	if err := s.UpdateRun(ctx, sampleRun("nope", "acme", at(0))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateRun of an absent id: got %v, want ErrNotFound", err)
	}

	r.Status, r.StopReason, r.Error = store.RunStopped, "budget_exceeded", "budget: reservation exceeds the limit"
	r.Ended = at(90*time.Second + 7)
	r.Turns, r.ToolCalls, r.InputTokens, r.OutputTokens = 7, 3, 12_345, 678
	r.Cost, r.CostEstimated = budget.USD(37_500_000), true // $0.0000375
	r.Labels = nil
	must(t, s.UpdateRun(ctx, r))
	got, err = s.GetRun(ctx, "run-1")
	must(t, err)
	sameRun(t, got, r)
	if got.Started.Location() != time.UTC {
		t.Errorf("Started location = %v, want UTC", got.Started.Location())
	}
}

func testRunsList(t *testing.T, s store.Store) {
	ctx := context.Background()
	add := func(id, tenant string, started time.Duration, status store.RunStatus) {
		r := sampleRun(id, tenant, at(started))
		r.Status = status
		if id == "b" || id == "c" {
			r.Agent = "billing"
		}
		must(t, s.CreateRun(ctx, r))
	}
	add("a", "acme", 1*time.Second, store.RunSucceeded)
	add("b", "acme", 2*time.Second, store.RunFailed)
	add("c", "initech", 3*time.Second, store.RunSucceeded)
	add("d", "acme", 4*time.Second, store.RunRunning)
	add("e", "acme", 4*time.Second, store.RunSucceeded) // same start as d: id breaks the tie

	ids := func(f store.RunFilter) []string {
		t.Helper()
		runs, err := s.ListRuns(ctx, f)
		must(t, err)
		out := []string{}
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	cases := []struct {
		name string
		f    store.RunFilter
		want []string
	}{
		{"all newest first", store.RunFilter{}, []string{"e", "d", "c", "b", "a"}},
		{"tenant", store.RunFilter{Tenant: "acme"}, []string{"e", "d", "b", "a"}},
		{"status", store.RunFilter{Status: store.RunSucceeded}, []string{"e", "c", "a"}},
		{"agent", store.RunFilter{Agent: "billing"}, []string{"c", "b"}},
		{"agent and tenant", store.RunFilter{Agent: "support", Tenant: "acme"}, []string{"e", "d", "a"}},
		{"since inclusive", store.RunFilter{Since: at(3 * time.Second)}, []string{"e", "d", "c"}},
		{"limit", store.RunFilter{Limit: 2}, []string{"e", "d"}},
		{"before exclusive", store.RunFilter{Before: at(3 * time.Second)}, []string{"b", "a"}},
		{"between", store.RunFilter{Since: at(2 * time.Second), Before: at(4 * time.Second)}, []string{"c", "b"}},
		{"all filters", store.RunFilter{Tenant: "acme", Status: store.RunSucceeded, Since: at(2 * time.Second)}, []string{"e"}},
		{"no match", store.RunFilter{Tenant: "umbrella"}, []string{}},
	}
	for _, c := range cases {
		if got := ids(c.f); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: ListRuns(%+v) = %v, want %v", c.name, c.f, got, c.want)
		}
	}
	for i := range 120 {
		add("bulk-"+string(rune('A'+i/26))+string(rune('a'+i%26)), "bulk", time.Hour+time.Duration(i), store.RunRunning)
	}
	if got := ids(store.RunFilter{Tenant: "bulk"}); len(got) != 100 {
		t.Errorf("ListRuns with Limit 0 returned %d runs, want the default 100", len(got))
	}
}

// testSaveRun checks store.RunSaver: the write is raised to the ledger's
// counts, never lowers the token counts, and never puts a running record
// over an ended one.
func testSaveRun(t *testing.T, s store.Store) {
	saver, ok := s.(store.RunSaver)
	if !ok {
		t.Skip("the store has no store.RunSaver")
	}
	ctx := context.Background()
	turns, cost := budget.Scope("turns:save"), budget.Scope("run:save")
	r := sampleRun("save", "acme", time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	r.Status, r.Turns, r.Cost = store.RunRunning, 2, budget.Micros(50000)
	if err := saver.SaveRun(ctx, r, turns, cost); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SaveRun of an absent record: got %v, want ErrNotFound", err)
	}
	must(t, s.CreateRun(ctx, r))
	// The ledger counts more than this process: 3 turns, 7¢ settled.
	must(t, s.Reserve(ctx, budget.Reservation{ID: "save-t", Owner: "p", Amount: 3, Scopes: []budget.ScopeLimit{{Scope: turns}}}))
	must(t, s.Reserve(ctx, budget.Reservation{ID: "save-c", Owner: "p", Amount: budget.Micros(90000), Scopes: []budget.ScopeLimit{{Scope: cost}}}))
	must(t, s.Settle(ctx, "save-c", budget.Micros(70000)))
	r.InputTokens = 11
	must(t, saver.SaveRun(ctx, r, turns, cost))
	got, err := s.GetRun(ctx, "save")
	must(t, err)
	if got.Turns != 3 || got.Cost != budget.Micros(70000) || got.InputTokens != 11 {
		t.Fatalf("after SaveRun: turns %d cost %v input %d, want 3, 7¢, 11 (raised to the ledger)", got.Turns, got.Cost, got.InputTokens)
	}
	// Counts above the ledger's are kept; no scope raises nothing; the
	// tenant and start stay those of the creation.
	r.Turns, r.Cost = 9, budget.Micros(200000)
	moved := r
	moved.Tenant, moved.Started = "other", r.Started.Add(time.Hour)
	must(t, saver.SaveRun(ctx, moved, "", ""))
	if got, _ = s.GetRun(ctx, "save"); got.Turns != 9 || got.Cost != budget.Micros(200000) {
		t.Fatalf("after SaveRun above the ledger: turns %d cost %v", got.Turns, got.Cost)
	}
	if !got.Started.Equal(r.Started) || got.Tenant != "acme" {
		t.Fatalf("SaveRun changed the tenant or start: %q %v, want acme %v", got.Tenant, got.Started, r.Started)
	}
	// Token counts are never lowered (a process that read the ledger
	// earlier writes after one that read it later), and are raised.
	stale := r
	stale.InputTokens, stale.OutputTokens = 5, 40
	must(t, saver.SaveRun(ctx, stale, "", ""))
	if got, _ = s.GetRun(ctx, "save"); got.InputTokens != 11 || got.OutputTokens != 40 {
		t.Fatalf("after SaveRun of fewer input tokens: input %d output %d, want 11 and 40", got.InputTokens, got.OutputTokens)
	}
	// A cost estimated by one process stays marked: another's record,
	// all of whose costs it had from usage, does not clear the mark.
	est := stale
	est.CostEstimated = true
	must(t, saver.SaveRun(ctx, est, "", ""))
	if got, _ = s.GetRun(ctx, "save"); !got.CostEstimated {
		t.Fatalf("after SaveRun with an estimated cost: CostEstimated false")
	}
	must(t, saver.SaveRun(ctx, stale, "", ""))
	if got, _ = s.GetRun(ctx, "save"); !got.CostEstimated {
		t.Fatalf("a record without the mark cleared it")
	}
	// Another process ends the run: a running record does not overwrite
	// it, an ended one does.
	ended := r
	ended.Status, ended.StopReason, ended.Ended = store.RunStopped, "killed", r.Started.Add(time.Minute)
	must(t, saver.SaveRun(ctx, ended, turns, cost))
	if err := saver.SaveRun(ctx, r, turns, cost); !errors.Is(err, store.ErrRunEnded) {
		t.Fatalf("SaveRun running over stopped: got %v, want ErrRunEnded", err)
	}
	if got, _ = s.GetRun(ctx, "save"); got.Status != store.RunStopped || got.StopReason != "killed" {
		t.Fatalf("the ending was overwritten: %+v", got)
	}
	ended.Turns = 12
	must(t, saver.SaveRun(ctx, ended, turns, cost))
	if got, _ = s.GetRun(ctx, "save"); got.Turns != 12 {
		t.Fatalf("an ended record's write was refused: %+v", got)
	}
}

// testCreateRunSpent checks store.RunSpender: the record and its spends
// land together, a repeat writes nothing again, and a spend that does not
// fit writes neither.
func testCreateRunSpent(t *testing.T, s store.Store) {
	sp, ok := s.(store.RunSpender)
	if !ok {
		t.Skip("the store has no store.RunSpender")
	}
	ctx := context.Background()
	tenant, runScope := budget.Scope("tenant:acme:2026-11"), budget.RunScope("one")
	r := sampleRun("one", "acme", time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	r.Status, r.Ended, r.Turns, r.Cost = store.RunSucceeded, r.Started.Add(time.Second), 1, budget.Micros(3000)
	spends := []budget.Reservation{{ID: "ignored", Owner: "p", Amount: budget.Micros(3000), Spend: true,
		Scopes: []budget.ScopeLimit{{Scope: runScope}, {Scope: tenant, Limit: budget.Micros(5000)}}}}
	must(t, sp.CreateRunSpent(ctx, r, spends))
	got, err := s.GetRun(ctx, "one")
	must(t, err)
	sameRun(t, got, r)
	for _, sc := range []budget.Scope{runScope, tenant} {
		if b, err := s.Balance(ctx, sc); err != nil || b.Settled != budget.Micros(3000) || b.Reserved != 0 {
			t.Fatalf("balance of %s = %+v, %v; want 3000µ$ settled", sc, b, err)
		}
	}
	// A repeat (an answer lost after the commit) is a conflict and spends
	// nothing again.
	if err := sp.CreateRunSpent(ctx, r, spends); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateRunSpent again: %v, want ErrConflict", err)
	}
	if b, _ := s.Balance(ctx, tenant); b.Settled != budget.Micros(3000) {
		t.Fatalf("a repeated CreateRunSpent spent again: %+v", b)
	}
	// The tenant's limit refuses the next spend: neither the record nor
	// the spend lands.
	r2 := r
	r2.ID = "two"
	err = sp.CreateRunSpent(ctx, r2, spends)
	if !errors.Is(err, budget.ErrExceeded) {
		t.Fatalf("CreateRunSpent over the tenant limit: %v, want ErrExceeded", err)
	}
	if _, err := s.GetRun(ctx, "two"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused CreateRunSpent left its record: %v", err)
	}
	if b, _ := s.Balance(ctx, budget.RunScope("two")); b.Settled != 0 {
		t.Fatalf("a refused CreateRunSpent left a spend: %+v", b)
	}
	// No spends: the record alone.
	r3 := r
	r3.ID = "three"
	must(t, sp.CreateRunSpent(ctx, r3, nil))
	if _, err := s.GetRun(ctx, "three"); err != nil {
		t.Fatal(err)
	}
}

// testPruneRuns: PruneRuns deletes ended runs that ended before the cut,
// oldest first and at most max at a time, with their spans, run scopes
// and alert marks; a running run, a run that ended after the cut, another
// run's spans and a tenant's scope stay.
func testPruneRuns(t *testing.T, s store.Store) {
	p, ok := s.(store.RunPruner)
	if !ok {
		t.Skip("the store does not prune runs")
	}
	ctx := context.Background()
	add := func(id string, started, ended time.Duration, status store.RunStatus) {
		r := sampleRun(id, "acme", at(started))
		r.Status = status
		if status != store.RunRunning {
			r.Ended = at(ended)
		}
		must(t, s.CreateRun(ctx, r))
		must(t, s.WriteSpans(ctx, []trace.Span{span(id, "s-"+id, "", started)}))
		must(t, s.Reserve(ctx, budget.Reservation{ID: "spend-" + id, Owner: "p", Amount: budget.Micros(1000), Spend: true,
			Scopes: []budget.ScopeLimit{{Scope: budget.RunScope(id)}, {Scope: "tenant:acme:2026-11"}}}))
		_, err := s.MarkAlert(ctx, budget.RunScope(id), 0.5)
		must(t, err)
	}
	add("old-1", 1*time.Second, 2*time.Second, store.RunSucceeded)
	add("old-2", 3*time.Second, 4*time.Second, store.RunFailed)
	add("old-3", 5*time.Second, 6*time.Second, store.RunStopped)
	add("live", 0, 0, store.RunRunning)                       // started first, never ended
	add("late", 7*time.Second, time.Hour, store.RunSucceeded) // ended after the cut
	scopes := func(id string) []budget.Scope {
		return []budget.Scope{budget.RunScope(id), budget.Scope("turns:" + id)}
	}
	cut := at(time.Minute)

	if _, err := p.PruneRuns(ctx, cut, 0, scopes); err == nil {
		t.Error("PruneRuns with max 0: no error")
	}
	n, err := p.PruneRuns(ctx, cut, 2, scopes)
	if err != nil || n != 2 {
		t.Fatalf("first prune: %d, %v; want 2", n, err)
	}
	for id, kept := range map[string]bool{"old-1": false, "old-2": false, "old-3": true, "live": true, "late": true} {
		_, err := s.GetRun(ctx, id)
		if kept != (err == nil) {
			t.Errorf("after pruning 2 of 3 (oldest first): run %s kept %v, got err %v", id, kept, err)
		}
	}
	n, err = p.PruneRuns(ctx, cut, 100, scopes)
	if err != nil || n != 1 {
		t.Fatalf("second prune: %d, %v; want 1 (old-3)", n, err)
	}
	if n, err := p.PruneRuns(ctx, cut, 100, scopes); err != nil || n != 0 {
		t.Errorf("third prune: %d, %v; want 0", n, err)
	}
	for _, id := range []string{"old-1", "old-2", "old-3"} {
		if spans, err := s.RunSpans(ctx, id); err != nil || len(spans) != 0 {
			t.Errorf("spans of pruned run %s: %d, %v", id, len(spans), err)
		}
		if b, err := s.Balance(ctx, budget.RunScope(id)); err != nil || b.Settled != 0 || b.Reserved != 0 {
			t.Errorf("scope of pruned run %s: %+v, %v; want none", id, b, err)
		}
		// Its alert mark is gone: marking it again is a first time.
		if first, err := s.MarkAlert(ctx, budget.RunScope(id), 0.5); err != nil || !first {
			t.Errorf("alert of pruned run %s: first %v, %v; want the mark gone", id, first, err)
		}
	}
	for _, id := range []string{"live", "late"} {
		if spans, err := s.RunSpans(ctx, id); err != nil || len(spans) != 1 {
			t.Errorf("spans of kept run %s: %d, %v", id, len(spans), err)
		}
		if b, err := s.Balance(ctx, budget.RunScope(id)); err != nil || b.Settled != budget.Micros(1000) {
			t.Errorf("scope of kept run %s: %+v, %v", id, b, err)
		}
	}
	if b, err := s.Balance(ctx, "tenant:acme:2026-11"); err != nil || b.Settled != budget.Micros(5000) {
		t.Errorf("tenant scope after pruning: %+v, %v; want all five spends kept", b, err)
	}
}
