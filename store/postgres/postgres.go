// Package postgres is the shared store: every replica of belay serve points
// at one PostgreSQL database (pgx/v5, a connection pool). Budgets, idempotency
// keys, approvals, kill flags and traces are then common to all replicas;
// kill flag changes reach every replica through LISTEN/NOTIFY (WatchKills).
//
// Tables live in the first schema of the connection's search_path; set it
// in the URL (postgres://host/db?search_path=belay) to keep belay apart.
// The schema is migrated on Open, under an advisory lock, so replicas that
// start together are safe.
//
// # Guarantees
//
// Every write is one transaction (READ COMMITTED): a connection lost
// midway leaves nothing half applied, and the method returns an error
// naming the operation. Reserve updates each scope with a conditional
// upsert (settled+reserved+amount ≤ limit), row-locking the scopes in name
// order, so concurrent reservations from any number of replicas never pass
// a limit and cannot deadlock. Idempotency keys are a primary key: of
// concurrent claims exactly one wins.
//
// Times are stored as Unix nanoseconds and come back in UTC, exact; span
// attributes follow the same JSON round-trip rule as store/sqlite.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrSchemaTooNew is returned by Open for a database written by a newer
// belay whose schema this binary does not know.
var ErrSchemaTooNew = errors.New("schema is newer than this binary")

// Store is a store.Store over PostgreSQL. It also implements
// store.KillWatcher. It is safe for concurrent use.
type Store struct {
	*sqlstore.Core
	pool   *pgxpool.Pool
	schema string // current_schema(), the payload of this store's notifications
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.KillWatcher = (*Store)(nil)
	_ store.RunPruner   = (*Store)(nil)
)

// Open connects to the database at url (a postgres:// or postgresql://
// URL, or a key=value DSN, as pgxpool.ParseConfig reads it), checks the
// connection and migrates the schema. A schema newer than this binary is
// ErrSchemaTooNew.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: open: %w", err) // pgx redacts the password
	}
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: open %s: %w", where, err)
	}
	s := &Store{pool: pool}
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&s.schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: open %s: %w", where, err)
	}
	if s.schema == "" {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: open %s: no schema on the search_path exists", where)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: open %s: %w", where, err)
	}
	s.Core = sqlstore.New(backend{pool}, sqlstore.Dialect{Name: "store/postgres", SkipLocked: " FOR UPDATE SKIP LOCKED"})
	return s, nil
}

// Pool returns the connection pool, for health checks and metrics.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// killChannel is the NOTIFY channel of kill flag changes; the payload is the
// schema, so stores in different schemas of one database ignore each other.
const killChannel = "belay_kills"

func (s *Store) notify(ctx context.Context, tx sqlstore.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, killChannel, s.schema)
	return err
}

// SetKill stores k and notifies every WatchKills, on commit.
func (s *Store) SetKill(ctx context.Context, k store.Kill) error {
	return s.SetKillNotify(ctx, k, s.notify)
}

// ClearKill removes a flag and, if there was one, notifies every
// WatchKills on commit.
func (s *Store) ClearKill(ctx context.Context, target store.KillTarget, name string) error {
	return s.ClearKillNotify(ctx, target, name, s.notify)
}

// backend is sqlstore.Backend over a pgx pool.
type backend struct{ pool *pgxpool.Pool }

func (b backend) Write(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return fn(pgTx{tx}) })
}

func (b backend) Read() sqlstore.Tx { return pgTx{b.pool} }

func (b backend) Classify(err error) error { return err }

func (b backend) Close() error {
	b.pool.Close()
	return nil
}

// querier is what pgx.Tx and *pgxpool.Pool share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

type pgTx struct{ q querier }

func (t pgTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := t.q.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (t pgTx) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	return t.q.Query(ctx, q, args...)
}

func (t pgTx) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return row{t.q.QueryRow(ctx, q, args...)}
}

// ExecBatch sends every argument list in one pipeline.
func (t pgTx) ExecBatch(ctx context.Context, q string, args [][]any) error {
	var b pgx.Batch
	for _, a := range args {
		b.Queue(q, a...)
	}
	return t.q.SendBatch(ctx, &b).Close()
}

type row struct{ pgx.Row }

func (r row) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sqlstore.ErrNoRows
	}
	return err
}
