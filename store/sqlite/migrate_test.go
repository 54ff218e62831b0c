package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// TestMigrateFromV1 takes a file at schema version 1 holding a run and
// spans of two runs to the current version: the run and every span are kept
// with all their columns, a rewrite of a kept span replaces it, and the
// same span id under another run is a second span.
func TestMigrateFromV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "belay.db")
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	if err := step(ctx, db, 1); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][]any{
		{"s-b", "t1", "s-a", "r1", "model", "chat m", int64(20), int64(30), "ok", `{"k":"v"}`, nil},
		{"s-a", "t1", "", "r1", "run", "invoke_agent", int64(10), nil, "unset", nil, `[{"name":"e","time_ns":15}]`},
		{"s-c", "t2", "", "r2", "run", "invoke_agent", int64(5), int64(6), "error", nil, nil},
	} {
		if _, err := db.Exec(`INSERT INTO spans (span_id, trace_id, parent_id, run_id, kind, name, start_ns, end_ns,
			status, attrs, events) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, r...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO runs (id, tenant, agent, agent_version, prompt_version, labels, max_turns,
		deadline_ns, max_tokens, max_cost, status, stop_reason, error, started_ns, ended_ns, turns, tool_calls,
		input_tokens, output_tokens, cost) VALUES ('run-1', 'acme', 'a', 'v', 'p', '{"k":"v"}', 5, 60, 100, 7, 'failed',
		'', 'boom', 10, 20, 2, 1, 30, 40, 9)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := version(ctx, s.Backend().(*backend).w); err != nil || v != len(migrations) {
		t.Fatalf("version after Open = %d, %v; want %d", v, err, len(migrations))
	}
	run, err := s.GetRun(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Tenant != "acme" || run.Labels["k"] != "v" || run.Status != "failed" || run.Error != "boom" ||
		run.Started.UnixNano() != 10 || run.Ended.UnixNano() != 20 || run.Turns != 2 || run.ToolCalls != 1 ||
		run.InputTokens != 30 || run.OutputTokens != 40 || run.Cost != 9 || run.Limits.MaxTurns != 5 {
		t.Errorf("run after migration = %+v", run)
	}
	if list, err := s.ListRuns(ctx, store.RunFilter{Tenant: "acme"}); err != nil || len(list) != 1 {
		t.Errorf("ListRuns after migration = %+v, %v", list, err)
	}
	got, err := s.RunSpans(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].SpanID != "s-a" || got[1].SpanID != "s-b" {
		t.Fatalf("r1 spans after migration = %+v; want s-a then s-b", got)
	}
	a, b := got[0], got[1]
	if a.Start.UnixNano() != 10 || !a.End.IsZero() || a.Kind != "run" || a.Name != "invoke_agent" ||
		len(a.Events) != 1 || a.Events[0].Name != "e" || a.TraceID != "t1" {
		t.Errorf("s-a after migration = %+v", a)
	}
	if b.ParentID != "s-a" || b.End.UnixNano() != 30 || b.Status != "ok" || b.Attrs["k"] != "v" {
		t.Errorf("s-b after migration = %+v", b)
	}

	b.Status = "error"
	other := b
	other.RunID = "r2"
	if err := s.WriteSpans(ctx, []trace.Span{b, other}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RunSpans(ctx, "r1"); len(got) != 2 || got[1].Status != "error" {
		t.Errorf("r1 after rewriting s-b = %+v; want 2 spans, s-b with status error", got)
	}
	if got, _ := s.RunSpans(ctx, "r2"); len(got) != 2 || got[0].SpanID != "s-c" || got[1].SpanID != "s-b" {
		t.Errorf("r2 after writing s-b under it = %+v; want s-c, s-b", got)
	}
}

// TestListRunsUsesIndexes checks that the run listings read an index in
// order (schema version 3 made the indexes ascending; ListRuns orders
// newest first): no temporary b-tree sorts the runs.
func TestListRunsUsesIndexes(t *testing.T) {
	ctx := context.Background()
	_, b := openTest(t)
	db := b.w
	for _, q := range []string{
		`SELECT id FROM runs ORDER BY started_ns DESC, id DESC LIMIT 100`,
		`SELECT id FROM runs WHERE tenant = 'acme' ORDER BY started_ns DESC, id DESC LIMIT 100`,
		`SELECT id FROM runs WHERE tenant = 'acme' AND started_ns < 5 ORDER BY started_ns DESC, id DESC LIMIT 100`,
	} {
		rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		joined := fmt.Sprint(plan)
		if !strings.Contains(joined, "runs_by_") || strings.Contains(joined, "TEMP B-TREE") {
			t.Errorf("plan of %s: %v; want an index read in order", q, plan)
		}
	}
}
