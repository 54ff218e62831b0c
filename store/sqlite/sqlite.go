// Package sqlite is the embedded store: one SQLite file, pure Go
// (modernc.org/sqlite, no cgo). It is belay's default store and serves one
// process, or several processes on one machine sharing the file.
//
// # Durability
//
// The file is in WAL mode with synchronous=NORMAL: a write is durable once
// its method returns against a crash of the process (SIGKILL, panic, OOM
// kill), because the commit is in the WAL file (in the OS page cache)
// before the call returns. An OS crash or power loss may roll back the
// last commits (never corrupt the file); Options.Durable selects
// synchronous=FULL, which fsyncs every commit, for that case.
//
// # Concurrency
//
// All writes go through one connection, the writer goroutine's own, and
// run as BEGIN IMMEDIATE transactions, so a Reserve reads and updates its
// scopes without another writer in between, in this process and in any
// other process using the file. Writes queued at the same time share one
// transaction (group commit): a write that fails is undone alone, rolled
// back to a savepoint, and the others commit. Other processes' writers wait up to
// Options.BusyTimeout for the write lock, then fail with an error wrapping
// ErrLocked. Reads use a pool of connections and do
// not wait for writers.
//
// # Stored values
//
// Times come back in UTC with nanosecond precision; they must lie between
// the years 1678 and 2262. Span attributes are JSON: strings and bools come
// back as they were, Go integers as int64, floats as float64 (3.0 stays a
// float64), NaN and ±Inf as the strings "NaN", "+Inf", "-Inf", a
// homogeneous array as []string, []int64, []float64 or []bool (an empty one
// as []string{}), a mixed one as []any; an empty attribute map comes back
// nil.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/sqlstore"
	_ "modernc.org/sqlite" // registers driver "sqlite"
)

// ErrSchemaTooNew is returned by Open for a file written by a newer belay
// whose schema this binary does not know.
var ErrSchemaTooNew = errors.New("schema is newer than this binary")

// ErrLocked wraps errors from a file another connection kept locked past
// the busy timeout (SQLITE_BUSY, SQLITE_LOCKED).
var ErrLocked = errors.New("database is locked")

// ErrNotDatabase wraps errors from a file that is not an SQLite database or
// is corrupt (SQLITE_NOTADB, SQLITE_CORRUPT).
var ErrNotDatabase = errors.New("not a database or corrupt")

// Options tune Open. The zero value is the default for each field.
type Options struct {
	// BusyTimeout is how long a write waits for another connection's lock
	// before failing with ErrLocked. Default 5s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool. Default 4.
	ReadConns int
	// Durable fsyncs every commit (synchronous=FULL) so that commits also
	// survive an OS crash or power loss, at a cost in write throughput.
	// Default false (synchronous=NORMAL: commits survive a process crash).
	Durable bool
}

// Store is a store.Store over one SQLite file. It is safe for concurrent
// use. The methods are those of store.Store; their behaviour beyond the
// interface's contract (ordering, id reuse, argument checks) is documented
// in the conformance suite store/storetest.
type Store struct {
	*sqlstore.Core
	b    *backend
	path string
}

// Hurry runs the deferrable writes the writer holds (store.Deferrable) now
// rather than after their linger; see store.Hurrier. Safe for concurrent
// use.
func (s *Store) Hurry() { s.b.gw.hurryUp() }

var (
	_ store.Store     = (*Store)(nil)
	_ store.Hurrier   = (*Store)(nil)
	_ store.RunPruner = (*Store)(nil)
)

// Open opens (creating it on first use) the SQLite file at path and
// migrates it to the current schema. The parent directory must exist.
// Errors name the path: a missing directory wraps fs.ErrNotExist, a file
// that is not a database ErrNotDatabase, a file locked past the busy
// timeout ErrLocked, a newer schema ErrSchemaTooNew.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenOptions(ctx, path, Options{})
}

// OpenOptions is Open with options.
func OpenOptions(ctx context.Context, path string, o Options) (*Store, error) {
	b, err := openBackend(ctx, path, o)
	if err != nil {
		return nil, fmt.Errorf("store/sqlite: open %s: %w", path, err)
	}
	return &Store{Core: sqlstore.New(b, sqlstore.Dialect{Name: "store/sqlite"}), b: b, path: path}, nil
}

// Path returns the file's path as given to Open.
func (s *Store) Path() string { return s.path }

// openWriter opens the writer's connection (its pragmas switch the file
// to WAL) and migrates the schema. SQLITE_BUSY is retried, with waits
// doubling from 1 ms to 100 ms, until busyTimeout has passed: SQLite
// returns it without calling the busy handler where waiting could
// deadlock (https://www.sqlite.org/c3ref/busy_handler.html), as when
// several processes open one file in rollback-journal mode at once and
// each switches it to WAL.
func openWriter(ctx context.Context, w *sql.DB, busyTimeout time.Duration) error {
	give := time.Now().Add(busyTimeout)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := w.PingContext(ctx)
		if err == nil {
			err = migrate(ctx, w)
		}
		if err = code(err); err == nil || !errors.Is(err, ErrLocked) || time.Now().Add(wait).After(give) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func openBackend(ctx context.Context, path string, o Options) (*backend, error) {
	if path == "" {
		return nil, errors.New("empty path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, errors.New("path must not contain '?' or '#'")
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("directory %s: %w", dir, fs.ErrNotExist)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	sync := "NORMAL"
	if o.Durable {
		sync = "FULL"
	}
	base := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", path, o.BusyTimeout.Milliseconds())
	b := &backend{path: path}
	var err error
	wdsn := base + fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)&_pragma=temp_store(memory)", autoCheckpointPages) + "&_journal_mode=WAL&_synchronous=" + sync + "&_txlock=immediate"
	if b.w, err = sql.Open("sqlite", wdsn); err != nil {
		return nil, code(err)
	}
	drv := b.w.Driver()
	b.dial = func() (driver.Conn, error) { return drv.Open(wdsn) }
	b.w.SetMaxOpenConns(1) // the one writer
	b.w.SetMaxIdleConns(1)
	b.w.SetConnMaxLifetime(0)
	if err := openWriter(ctx, b.w, o.BusyTimeout); err != nil {
		b.w.Close()
		return nil, err
	}
	if b.r, err = sql.Open("sqlite", base+"&_query_only=1"); err != nil {
		b.w.Close()
		return nil, code(err)
	}
	b.r.SetMaxOpenConns(o.ReadConns)
	b.r.SetMaxIdleConns(o.ReadConns)
	if b.cp, err = sql.Open("sqlite", base); err != nil {
		b.r.Close()
		b.w.Close()
		return nil, code(err)
	}
	b.cp.SetMaxOpenConns(1)
	b.ckpt = startCheckpointer(b.cp)
	b.gw = startGroupWriter(b)
	return b, nil
}
