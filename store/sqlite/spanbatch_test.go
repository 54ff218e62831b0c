package sqlite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/trace"
)

// TestSpansAreOneRowPerRunPerWrite checks schema 5's layout: a WriteSpans
// call stores each run's spans as one row of span_batches (none in the
// per-span table), the index on (run_id, seq) serves RunSpans, and a
// later write replaces a span from an earlier one.
func TestSpansAreOneRowPerRunPerWrite(t *testing.T) {
	ctx := context.Background()
	s, b := openTest(t)
	at := func(sec int) time.Time { return time.Unix(int64(sec), 0).UTC() }
	sp := func(run, id string, sec int) trace.Span {
		return trace.Span{SpanID: id, TraceID: "t-" + run, RunID: run, Kind: trace.KindModel, Name: "chat " + id, Start: at(sec)}
	}
	if err := s.WriteSpans(ctx, []trace.Span{sp("r1", "c", 3), sp("r2", "x", 1), sp("r1", "a", 1), sp("r1", "b", 2)}); err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		var n int
		if err := b.w.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM span_batches`); n != 2 {
		t.Errorf("span_batches rows = %d, want 2 (one per run)", n)
	}
	if n := count(`SELECT count(*) FROM spans`); n != 0 {
		t.Errorf("spans rows = %d, want 0", n)
	}
	later := sp("r1", "a", 4)
	later.Status = trace.StatusError
	if err := s.WriteSpans(ctx, []trace.Span{later}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunSpans(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, g := range got {
		ids = append(ids, g.SpanID)
	}
	if len(got) != 3 || ids[0] != "b" || ids[1] != "c" || ids[2] != "a" || got[2].Status != trace.StatusError {
		t.Errorf("r1 spans = %v (a: %+v); want b, c, a with a's later write", ids, got[len(got)-1])
	}
	rows, err := b.w.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT spans FROM span_batches WHERE run_id = 'r1' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan += detail + "; "
	}
	if want := "USING INDEX span_batches_by_run (run_id=?)"; !strings.Contains(plan, want) || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("RunSpans' plan: %s; want %s and no sort", plan, want)
	}
}
