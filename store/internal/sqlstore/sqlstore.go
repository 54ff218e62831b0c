// Package sqlstore is the one implementation of store.Store over SQL that
// store/sqlite and store/postgres share. A backend supplies a connection
// (Backend), its own schema migrations and error classification; the
// queries here are written in the SQL both engines accept, with $1-style
// placeholders (the SQLite backend rewrites them to ?1).
//
// Times are stored as int64 Unix nanoseconds (NULL for the zero time) and
// come back in UTC; money as int64 picodollars; span attributes and events
// as JSON text under the rule in codec.
package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
)

// ErrNoRows is what a Backend's Row.Scan returns when the query matched
// nothing.
var ErrNoRows = errors.New("no rows")

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("store is closed")

// Tx runs statements inside a transaction, or against the pool.
type Tx interface {
	// Exec runs a statement and returns the number of rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Batcher is implemented by a Tx that can send one statement with many
// argument lists in one round trip (PostgreSQL's pipeline).
type Batcher interface {
	ExecBatch(ctx context.Context, query string, args [][]any) error
}

// Rows is a result set; Close must be called.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is a single-row result; Scan returns ErrNoRows when there is none.
type Row interface {
	Scan(dest ...any) error
}

// Backend is one database engine.
type Backend interface {
	// Write runs fn in one write transaction, committing when fn returns
	// nil and rolling back otherwise. Concurrent Write calls must see each
	// other's committed effects (SQLite: BEGIN IMMEDIATE on one writer;
	// PostgreSQL: READ COMMITTED with row locks).
	Write(ctx context.Context, fn func(Tx) error) error
	// Read is the pool for single statements outside a transaction.
	Read() Tx
	// Classify turns a driver error into one that names the database and
	// wraps the backend's sentinels; other errors pass through.
	Classify(err error) error
	// Close releases the connections.
	Close() error
}

// Core implements store.Store (less the backend-specific extras) over a
// Backend.
type Core struct {
	name   string // error prefix: "store/sqlite"
	b      Backend
	skip   string // suffix that makes a SELECT skip rows other transactions lock
	closed atomic.Bool
}

// Dialect options for New.
type Dialect struct {
	// Name prefixes every error: "store/sqlite", "store/postgres".
	Name string
	// SkipLocked is appended to SELECTs whose rows the transaction then
	// deletes, so that concurrent callers do not queue on each other
	// (PostgreSQL: " FOR UPDATE SKIP LOCKED"; SQLite, with one writer: "").
	SkipLocked string
}

// New returns a Core over b. b must already hold the current schema.
func New(b Backend, d Dialect) *Core { return &Core{name: d.Name, b: b, skip: d.SkipLocked} }

var _ store.Store = (*Core)(nil)

// Close closes the backend; further calls fail with ErrClosed.
func (c *Core) Close() error {
	if c.closed.Swap(true) {
		return fmt.Errorf("%s: close: %w", c.name, ErrClosed)
	}
	if err := c.b.Close(); err != nil {
		return fmt.Errorf("%s: close: %w", c.name, c.b.Classify(err))
	}
	return nil
}

// Backend returns the backend, for the extras a backend package adds.
func (c *Core) Backend() Backend { return c.b }

func (c *Core) fail(op string, err error) error {
	return fmt.Errorf("%s: %s: %w", c.name, op, c.b.Classify(err))
}

func (c *Core) open(op string) error {
	if c.closed.Load() {
		return fmt.Errorf("%s: %s: %w", c.name, op, ErrClosed)
	}
	return nil
}

// write runs fn in a write transaction and wraps its error for op.
func (c *Core) write(ctx context.Context, op string, fn func(Tx) error) error {
	if err := c.open(op); err != nil {
		return err
	}
	if err := c.b.Write(ctx, fn); err != nil {
		return c.fail(op, err)
	}
	return nil
}

// read returns the read pool, or an error after Close.
func (c *Core) read(op string) (Tx, error) {
	if err := c.open(op); err != nil {
		return nil, err
	}
	return c.b.Read(), nil
}

var (
	_ budget.BatchLedger = (*Core)(nil)
	_ store.RunSaver     = (*Core)(nil)
)

// queryIDs runs query (one text column) in tx and returns its rows.
func queryIDs(ctx context.Context, tx Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
