package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations is the schema, one step per version: migrations[i] takes the
// database from version i to i+1. Steps are only ever appended. Tables go
// in the first schema of the connection's search_path.
var migrations = []string{
	// 1: the initial schema. Times are Unix nanoseconds (NULL for none; the
	// same exact encoding as store/sqlite, rather than timestamptz, which
	// keeps only microseconds), money is picodollars, attributes and events
	// are JSON text (not jsonb, which would rewrite 3.0 as 3).
	`
CREATE TABLE runs (
	id TEXT PRIMARY KEY,
	tenant TEXT NOT NULL,
	agent TEXT NOT NULL,
	agent_version TEXT NOT NULL,
	prompt_version TEXT NOT NULL,
	labels TEXT,
	max_turns BIGINT NOT NULL,
	deadline_ns BIGINT NOT NULL,
	max_tokens BIGINT NOT NULL,
	max_cost BIGINT NOT NULL,
	status TEXT NOT NULL,
	stop_reason TEXT NOT NULL,
	error TEXT NOT NULL,
	started_ns BIGINT,
	ended_ns BIGINT,
	turns BIGINT NOT NULL,
	tool_calls BIGINT NOT NULL,
	input_tokens BIGINT NOT NULL,
	output_tokens BIGINT NOT NULL,
	cost BIGINT NOT NULL
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
	start_ns BIGINT,
	end_ns BIGINT,
	status TEXT NOT NULL,
	attrs TEXT,
	events TEXT
);
CREATE INDEX spans_by_run ON spans (run_id, start_ns, span_id);

CREATE TABLE budget_scopes (
	scope TEXT PRIMARY KEY,
	settled BIGINT NOT NULL,
	reserved BIGINT NOT NULL
);
CREATE TABLE budget_reservations (
	id TEXT PRIMARY KEY,
	owner TEXT NOT NULL,
	scopes TEXT NOT NULL,
	amount BIGINT NOT NULL,
	expires_ns BIGINT
);
CREATE TABLE budget_closed (
	id TEXT PRIMARY KEY,
	owner TEXT NOT NULL,
	scopes TEXT NOT NULL,
	reserved BIGINT NOT NULL,
	actual BIGINT NOT NULL,
	outcome TEXT NOT NULL
);
CREATE TABLE budget_alerts (
	scope TEXT NOT NULL,
	threshold DOUBLE PRECISION NOT NULL,
	PRIMARY KEY (scope, threshold)
);

CREATE TABLE idempotency (
	key TEXT PRIMARY KEY,
	owner TEXT NOT NULL,
	state TEXT NOT NULL,
	lease_end_ns BIGINT NOT NULL,
	result BYTEA,
	is_error BOOLEAN NOT NULL,
	claimed_ns BIGINT NOT NULL
);

CREATE TABLE approvals (
	id TEXT PRIMARY KEY,
	run_id TEXT NOT NULL,
	tenant TEXT NOT NULL,
	tool TEXT NOT NULL,
	arguments BYTEA NOT NULL,
	state TEXT NOT NULL,
	requested_ns BIGINT,
	decided_ns BIGINT,
	decided_by TEXT NOT NULL,
	note TEXT NOT NULL
);
CREATE INDEX approvals_by_state ON approvals (state, requested_ns, id);

CREATE TABLE kills (
	target TEXT NOT NULL,
	name TEXT NOT NULL,
	reason TEXT NOT NULL,
	set_by TEXT NOT NULL,
	at_ns BIGINT,
	PRIMARY KEY (target, name)
);

CREATE TABLE goldens (
	name TEXT PRIMARY KEY,
	run_id TEXT NOT NULL,
	canonical BYTEA NOT NULL
);
`,
	// 2: a unique key on (run_id, span_id), the key store/sqlite uses (one
	// upsert for both), which is also the run index now. The span_id key
	// stays: replicas of the previous release, still serving during a
	// rolling upgrade, upsert ON CONFLICT (span_id).
	`
CREATE UNIQUE INDEX spans_by_run_span ON spans (run_id, span_id);
DROP INDEX spans_by_run;
`,
	// 3: cost_estimated, 1 when some of the run's cost was estimated (a
	// stream cut without usage, a lost attempt, an unpriced model).
	// Replicas of the previous release leave it as it is.
	`
ALTER TABLE runs ADD COLUMN cost_estimated BIGINT NOT NULL DEFAULT 0;
`,
}

// lockMigrations serializes migrations of one schema across replicas: a
// transaction-scoped advisory lock keyed by the schema's name.
const lockMigrations = `SELECT pg_advisory_xact_lock(hashtext('belay_migrate:' || current_schema()))`

// migrate brings the schema to the newest version, one transaction per
// step, each under the advisory lock, so replicas starting at once apply
// each step once.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	for next := 1; ; next++ {
		done, err := step(ctx, pool, next)
		if err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", next, err)
		}
		if done {
			return nil
		}
	}
}

// step applies migration next if it is due; done reports that the schema
// is current.
func step(ctx context.Context, pool *pgxpool.Pool, next int) (done bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockMigrations); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version BIGINT PRIMARY KEY,
			applied TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var cur int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
			return err
		}
		if cur > len(migrations) {
			return fmt.Errorf("%w: the database is at version %d, this binary knows up to %d; upgrade belay",
				ErrSchemaTooNew, cur, len(migrations))
		}
		if cur >= next || next > len(migrations) {
			done = cur >= len(migrations)
			return nil
		}
		if _, err := tx.Exec(ctx, migrations[next-1]); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, next)
		return err
	})
	return done, err
}
