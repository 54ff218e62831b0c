package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
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
	r.Cost = budget.USD(37_500_000) // $0.0000375
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
