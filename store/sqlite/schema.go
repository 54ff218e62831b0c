package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations is the schema, one step per version: migrations[i] takes the
// database from version i to i+1. Steps are only ever appended; a released
// step is never edited.
var migrations = []string{
	// 1: the initial schema. Times are Unix nanoseconds (NULL for none),
	// money is picodollars, attributes and events are JSON text. The small
	// hot tables are WITHOUT ROWID (one b-tree, fewer pages per commit);
	// budget_reservations has no expiry index on purpose: it holds only the
	// open reservations, and every page an index adds is written per commit.
	`
CREATE TABLE runs (
	id TEXT PRIMARY KEY,
	tenant TEXT NOT NULL,
	agent TEXT NOT NULL,
	agent_version TEXT NOT NULL,
	prompt_version TEXT NOT NULL,
	labels TEXT,
	max_turns INTEGER NOT NULL,
	deadline_ns INTEGER NOT NULL,
	max_tokens INTEGER NOT NULL,
	max_cost INTEGER NOT NULL,
	status TEXT NOT NULL,
	stop_reason TEXT NOT NULL,
	error TEXT NOT NULL,
	started_ns INTEGER,
	ended_ns INTEGER,
	turns INTEGER NOT NULL,
	tool_calls INTEGER NOT NULL,
	input_tokens INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	cost INTEGER NOT NULL
);
CREATE INDEX runs_by_started ON runs (started_ns DESC, id DESC);
CREATE INDEX runs_by_tenant ON runs (tenant, started_ns DESC, id DESC);

CREATE TABLE spans (
	span_id TEXT PRIMARY KEY,
	trace_id TEXT NOT NULL,
	parent_id TEXT NOT NULL,
	run_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	name TEXT NOT NULL,
	start_ns INTEGER,
	end_ns INTEGER,
	status TEXT NOT NULL,
	attrs TEXT,
	events TEXT
);
CREATE INDEX spans_by_run ON spans (run_id, start_ns, span_id);

CREATE TABLE budget_scopes (
	scope TEXT PRIMARY KEY,
	settled INTEGER NOT NULL,
	reserved INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE budget_reservations (
	id TEXT PRIMARY KEY,
	owner TEXT NOT NULL,
	scopes TEXT NOT NULL,
	amount INTEGER NOT NULL,
	expires_ns INTEGER
) WITHOUT ROWID;
CREATE TABLE budget_closed (
	id TEXT PRIMARY KEY,
	owner TEXT NOT NULL,
	scopes TEXT NOT NULL,
	reserved INTEGER NOT NULL,
	actual INTEGER NOT NULL,
	outcome TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE budget_alerts (
	scope TEXT NOT NULL,
	threshold REAL NOT NULL,
	PRIMARY KEY (scope, threshold)
) WITHOUT ROWID;

CREATE TABLE idempotency (
	key TEXT PRIMARY KEY,
	owner TEXT NOT NULL,
	state TEXT NOT NULL,
	lease_end_ns INTEGER NOT NULL,
	result BLOB,
	is_error INTEGER NOT NULL,
	claimed_ns INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE approvals (
	id TEXT PRIMARY KEY,
	run_id TEXT NOT NULL,
	tenant TEXT NOT NULL,
	tool TEXT NOT NULL,
	arguments BLOB NOT NULL,
	state TEXT NOT NULL,
	requested_ns INTEGER,
	decided_ns INTEGER,
	decided_by TEXT NOT NULL,
	note TEXT NOT NULL
);
CREATE INDEX approvals_by_state ON approvals (state, requested_ns, id);

CREATE TABLE kills (
	target TEXT NOT NULL,
	name TEXT NOT NULL,
	reason TEXT NOT NULL,
	set_by TEXT NOT NULL,
	at_ns INTEGER,
	PRIMARY KEY (target, name)
) WITHOUT ROWID;

CREATE TABLE goldens (
	name TEXT PRIMARY KEY,
	run_id TEXT NOT NULL,
	canonical BLOB NOT NULL
);
`,
	// 2: spans keyed by (run_id, span_id), rows in write order. Version 1
	// kept three b-trees per span (the table, the unique index on the random
	// span id, the run index), and the random span id put every span on a
	// page of its own: at a thousand calls a second that index was most of
	// each commit's pages. Now a span is one row appended to the table and
	// one entry in the run index, next to its run's other entries.
	`
CREATE TABLE spans_v2 (
	seq INTEGER PRIMARY KEY,
	run_id TEXT NOT NULL,
	span_id TEXT NOT NULL,
	trace_id TEXT NOT NULL,
	parent_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	name TEXT NOT NULL,
	start_ns INTEGER,
	end_ns INTEGER,
	status TEXT NOT NULL,
	attrs TEXT,
	events TEXT
);
INSERT INTO spans_v2 (run_id, span_id, trace_id, parent_id, kind, name, start_ns, end_ns, status, attrs, events)
	SELECT run_id, span_id, trace_id, parent_id, kind, name, start_ns, end_ns, status, attrs, events
	FROM spans ORDER BY rowid;
DROP TABLE spans;
ALTER TABLE spans_v2 RENAME TO spans;
CREATE UNIQUE INDEX spans_by_run ON spans (run_id, span_id);
`,
	// 3: the run-listing indexes ascending. ListRuns reads them backwards
	// just as fast, and a new run, started last, is appended at the right
	// edge of each (SQLite's quick balance) instead of being inserted at
	// the left edge, which split pages on every commit.
	`
DROP INDEX runs_by_started;
DROP INDEX runs_by_tenant;
CREATE INDEX runs_by_started ON runs (started_ns, id);
CREATE INDEX runs_by_tenant ON runs (tenant, started_ns, id);
`,
	// 4: runs WITHOUT ROWID, stored in the b-tree of their id: a new run
	// is three b-tree inserts (the record and two listing indexes), not
	// four (a rowid table kept the id's unique index besides).
	`
CREATE TABLE runs_v4 (
	id TEXT PRIMARY KEY,
	tenant TEXT NOT NULL,
	agent TEXT NOT NULL,
	agent_version TEXT NOT NULL,
	prompt_version TEXT NOT NULL,
	labels TEXT,
	max_turns INTEGER NOT NULL,
	deadline_ns INTEGER NOT NULL,
	max_tokens INTEGER NOT NULL,
	max_cost INTEGER NOT NULL,
	status TEXT NOT NULL,
	stop_reason TEXT NOT NULL,
	error TEXT NOT NULL,
	started_ns INTEGER,
	ended_ns INTEGER,
	turns INTEGER NOT NULL,
	tool_calls INTEGER NOT NULL,
	input_tokens INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	cost INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO runs_v4 SELECT id, tenant, agent, agent_version, prompt_version, labels, max_turns, deadline_ns,
	max_tokens, max_cost, status, stop_reason, error, started_ns, ended_ns, turns, tool_calls, input_tokens,
	output_tokens, cost FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;
CREATE INDEX runs_by_started ON runs (started_ns, id);
CREATE INDEX runs_by_tenant ON runs (tenant, started_ns, id);
`,
	// 5: cost_estimated, 1 when some of the run's cost was estimated (a
	// stream cut without usage, a lost attempt, an unpriced model).
	`
ALTER TABLE runs ADD COLUMN cost_estimated INTEGER NOT NULL DEFAULT 0;
`,
}

// version reads the schema version (0 for a database without one).
func version(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master
		WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	var v sql.NullInt64
	err := db.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v)
	return int(v.Int64), err
}

// migrate brings db to SchemaVersion, one transaction per step. db's
// transactions are BEGIN IMMEDIATE, so two processes opening one new file
// at once apply each step once: the second waits, then sees it applied.
func migrate(ctx context.Context, db *sql.DB) error {
	v, err := version(ctx, db)
	if err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("%w: the database is at version %d, this binary knows up to %d; upgrade belay",
			ErrSchemaTooNew, v, len(migrations))
	}
	for next := v + 1; next <= len(migrations); next++ {
		if err := step(ctx, db, next); err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", next, err)
		}
	}
	return nil
}

func step(ctx context.Context, db *sql.DB, next int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		applied TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))`); err != nil {
		return err
	}
	var cur sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&cur); err != nil {
		return err
	}
	if int(cur.Int64) >= next {
		return nil // another process applied it meanwhile
	}
	if _, err := tx.ExecContext(ctx, migrations[next-1]); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version) VALUES (?)`, next); err != nil {
		return err
	}
	return tx.Commit()
}
