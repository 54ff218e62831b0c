package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/postgres"
)

// Review: a schema at version 2 (the previous release) holding a run,
// opened by this binary: migrated to 3, the run reads not estimated; a
// record marked estimated is not unmarked by the previous release's
// writes (its INSERT and UPDATE without the column), nor by this
// release's SaveRun of an exact record.
func TestReviewCostEstimatedUpgradeV2(t *testing.T) {
	ctx := context.Background()
	u, admin := schemaAt(t, 2)
	oldInsert := `INSERT INTO runs (id, tenant, agent, agent_version, prompt_version, labels, max_turns,
		deadline_ns, max_tokens, max_cost, status, stop_reason, error, started_ns, ended_ns, turns, tool_calls,
		input_tokens, output_tokens, cost) VALUES ($1, 'acme', 'a', 'v', 'p', NULL, 5, 0, 0, 0, 'running',
		'', '', 10, NULL, 1, 0, 3, 4, 9)`
	if _, err := admin.Exec(ctx, oldInsert, "old-1"); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.GetRun(ctx, "old-1")
	if err != nil || r.CostEstimated || r.Cost != 9 {
		t.Fatalf("old run after migration = %+v, %v", r, err)
	}
	// An old replica still serving inserts a run: no column, default 0.
	if _, err := admin.Exec(ctx, oldInsert, "old-2"); err != nil {
		t.Fatalf("previous release's INSERT on the new schema: %v", err)
	}
	// This release marks old-1 estimated.
	r.CostEstimated = true
	r.Cost = budget.USD(20)
	if err := s.SaveRun(ctx, r, "", ""); err != nil {
		t.Fatal(err)
	}
	// Old replica's record write (its UpdateRun/SaveRun lists only its columns).
	if _, err := admin.Exec(ctx, `UPDATE runs SET cost = 30, status = 'succeeded', ended_ns = 50 WHERE id = 'old-1'`); err != nil {
		t.Fatal(err)
	}
	// This release's exact write.
	r.CostEstimated = false
	r.Status, r.Ended = store.RunSucceeded, time.Unix(0, 60)
	if err := s.SaveRun(ctx, r, "", ""); err != nil && !errors.Is(err, store.ErrRunEnded) {
		t.Fatal(err)
	}
	got, _ := s.GetRun(ctx, "old-1")
	if !got.CostEstimated {
		t.Errorf("mark lost: %+v", got)
	}
	// A replica of the previous release restarting now (schema 3, it knows 2).
	if _, err := admin.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES (4)`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(ctx, u); !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Logf("open of a newer schema: %v", err)
	} else {
		t.Logf("a binary one schema step behind refuses to start: %v", err)
	}
}
