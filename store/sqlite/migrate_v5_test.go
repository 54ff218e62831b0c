package sqlite

import (
	"context"
	"testing"

	"github.com/belay-run/belay/store"
)

// Review: a file at schema 4 (the previous release) with runs, opened by
// this binary: migrated, runs intact and not estimated, the mark settable
// and kept, listing works.
func TestReviewCostEstimatedUpgradeV4(t *testing.T) {
	ctx := context.Background()
	path := adv2OldFile(t, 4, 40)
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := version(ctx, s.Backend().(*backend).w); err != nil || v != 5 {
		t.Fatalf("version %d %v", v, err)
	}
	list, err := s.ListRuns(ctx, store.RunFilter{Limit: 1000})
	if err != nil || len(list) != 40 {
		t.Fatalf("list %d %v", len(list), err)
	}
	for _, r := range list {
		if r.CostEstimated {
			t.Fatalf("%s estimated after migration", r.ID)
		}
	}
	var running store.Run
	for _, r := range list {
		if r.Status == store.RunRunning {
			running = r
			break
		}
	}
	running.CostEstimated = true
	if err := s.SaveRun(ctx, running, "", ""); err != nil {
		t.Fatal(err)
	}
	running.CostEstimated = false
	if err := s.SaveRun(ctx, running, "", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetRun(ctx, running.ID); !got.CostEstimated {
		t.Errorf("mark lost")
	}
	// UpdateRun (the path of a store without RunSaver semantics) lowers it.
	running.CostEstimated = false
	if err := s.UpdateRun(ctx, running); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetRun(ctx, running.ID)
	t.Logf("after UpdateRun with false: CostEstimated=%v", got.CostEstimated)
}
