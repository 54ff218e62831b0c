package postgres_test

import (
	"context"
	"testing"

	"github.com/belay-run/belay/store/postgres"
	"github.com/belay-run/belay/trace"
	"github.com/jackc/pgx/v5"
)

// Review finding (session 3): a schema at version 1 holding spans, opened
// by this binary: every span is kept, and upserts work on the new key.
func TestReview3MigrateSpansV1ToV2(t *testing.T) {
	ctx := context.Background()
	u, admin := schemaAt(t, 1)
	for _, r := range [][]any{
		{"s-b", "t1", "s-a", "r1", "model", "chat m", int64(20), int64(30), "ok", `{"k":"v"}`, nil},
		{"s-a", "t1", "", "r1", "run", "invoke_agent", int64(10), nil, "unset", nil, nil},
		{"s-c", "t2", "", "r2", "run", "invoke_agent", int64(5), int64(6), "error", nil, nil},
	} {
		if _, err := admin.Exec(ctx, `INSERT INTO spans (span_id, trace_id, parent_id, run_id, kind, name, start_ns, end_ns,
			status, attrs, events) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`, r...); err != nil {
			t.Fatal(err)
		}
	}
	s, err := postgres.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.RunSpans(ctx, "r1")
	if err != nil || len(got) != 2 {
		t.Fatalf("r1 spans = %+v, %v", got, err)
	}
	b := got[1]
	b.Status = "error"
	if err := s.WriteSpans(ctx, []trace.Span{b}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.RunSpans(ctx, "r1"); len(got) != 2 || got[1].Status != "error" {
		t.Errorf("r1 = %+v", got)
	}
	if got, _ := s.RunSpans(ctx, "r2"); len(got) != 1 || got[0].SpanID != "s-c" {
		t.Errorf("r2 = %+v", got)
	}
}

// Review finding (session 3): rolling upgrade. A replica of the previous
// release (schema 1) is still serving when a new one migrates the schema
// to 2; its span upsert (ON CONFLICT (span_id)) must still work.
func TestReview3OldReplicaSpanUpsertAfterMigration(t *testing.T) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, schemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := `INSERT INTO spans (span_id, trace_id, parent_id, run_id, kind, name, start_ns, end_ns, status, attrs, events)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)
		ON CONFLICT (span_id) DO UPDATE SET status = excluded.status`
	if _, err := s.Pool().Exec(ctx, old, "s1", "t", "", "r1", "run", "x", int64(1), nil, "ok", nil, nil); err != nil {
		t.Errorf("the previous release's span upsert on the migrated schema: %v", err)
	}
}

// schemaAt makes a fresh schema at version v, as a release of that version
// left it, and returns its URL and a connection to it (closed by t's
// cleanup).
func schemaAt(t *testing.T, v int) (string, *pgx.Conn) {
	t.Helper()
	u := schemaURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	for _, m := range postgres.Migrations[:v] {
		if _, err := admin.Exec(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, `CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, applied TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= v; i++ {
		if _, err := admin.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
	}
	return u, admin
}
