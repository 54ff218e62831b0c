package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"

	"github.com/belay-run/belay/store/internal/sqlstore"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// backend is sqlstore.Backend over connections to one file: the group
// writer's own (dial; every write runs on it), r, a database/sql pool that
// serves reads, and w, a pool of one connection that opened the file and
// migrated its schema.
type backend struct {
	path string
	w, r *sql.DB
	// dial opens the group writer's connection (see wconn), with w's
	// settings; the writer calls it before its first transaction, and
	// again after the driver reported the connection broken.
	dial func() (driver.Conn, error)
	cp   *sql.DB // the checkpointer's connection
	ckpt *checkpointer
	gw   *groupWriter

	mu      sync.Mutex
	queries map[string]string    // $N form → SQLite's form (sqliteParams)
	rstmts  map[string]*sql.Stmt // SQLite's form → prepared on r (each pooled connection prepares it once)
}

var placeholder = regexp.MustCompile(`\$(\d+)`)

// query rewrites PostgreSQL-style $N placeholders to SQLite's (see
// sqliteParams), once per query text.
func (b *backend) query(q string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.queries[q]; ok {
		return s
	}
	if b.queries == nil {
		b.queries = map[string]string{}
	}
	s := sqliteParams(q)
	b.queries[q] = s
	return s
}

// sqliteParams rewrites q's $N placeholders: to SQLite's anonymous ? when
// they read $1, $2, … $n in order, each once (a ? takes the next
// argument), and to ?N otherwise. The driver binds an anonymous parameter
// by its position; a numbered one it binds by reading the parameter's name
// back from SQLite and parsing it, which was a sixth of the writer's
// statement time in a profile of bench/gateway's sequential run.
func sqliteParams(q string) string {
	ms := placeholder.FindAllStringSubmatch(q, -1)
	for i, m := range ms {
		if m[1] != strconv.Itoa(i+1) {
			return placeholder.ReplaceAllString(q, "?$1")
		}
	}
	return placeholder.ReplaceAllLiteralString(q, "?")
}

// Write runs fn in the next group commit (see groupWriter).
func (b *backend) Write(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return b.gw.write(ctx, fn)
}

func (b *backend) Read() sqlstore.Tx { return readTx{b: b} }

func (b *backend) Close() error {
	b.gw.close()
	b.ckpt.stop()
	b.mu.Lock()
	for _, s := range b.rstmts {
		s.Close()
	}
	b.rstmts = nil
	b.mu.Unlock()
	return errors.Join(b.cp.Close(), b.r.Close(), b.w.Close())
}

// codeError adds a sentinel to a driver error without changing its text.
type codeError struct {
	sentinel error
	err      error
}

func (e *codeError) Error() string   { return e.err.Error() }
func (e *codeError) Unwrap() []error { return []error{e.sentinel, e.err} }

// Classify names the file in driver errors and adds ErrLocked or
// ErrNotDatabase where they apply.
func (b *backend) Classify(err error) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("%s: %w", b.path, code(err))
}

// code adds ErrLocked or ErrNotDatabase to a driver error.
func code(err error) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		err = &codeError{ErrLocked, err}
	case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		err = &codeError{ErrNotDatabase, err}
	}
	return err
}

// writeTx runs a write's statements inside the group commit's
// transaction, on the writer's connection (wconn), under the writer's
// context, not the caller's: a caller whose context ends mid-statement
// would interrupt SQLite, which rolls back the whole transaction, and with
// it the other writes of the batch. A write whose context has ended before
// it starts is not run (see groupWriter.run); one that started finishes.
type writeTx struct {
	w   *wconn
	ctx context.Context
}

func (t writeTx) Exec(_ context.Context, q string, args ...any) (int64, error) {
	return t.w.exec(t.ctx, q, args)
}

func (t writeTx) Query(_ context.Context, q string, args ...any) (sqlstore.Rows, error) {
	r, err := t.w.query(t.ctx, q, args)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (t writeTx) QueryRow(_ context.Context, q string, args ...any) sqlstore.Row {
	r, err := t.w.query(t.ctx, q, args)
	return wrow{rows: r, err: err}
}

type readTx struct{ b *backend }

func (t readTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	return 0, errors.New("write on the read pool") // never called by sqlstore
}

// rstmt returns the statement for q prepared on the read pool, preparing
// it on first use; nil when preparing fails (the query then runs
// unprepared and reports the error itself). The queries are the store's
// own texts, a small fixed set.
func (b *backend) rstmt(ctx context.Context, q string) *sql.Stmt {
	b.mu.Lock()
	s, ok := b.rstmts[q]
	b.mu.Unlock()
	if ok {
		return s
	}
	s, err := b.r.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rstmts == nil {
		b.rstmts = map[string]*sql.Stmt{}
	}
	if old, dup := b.rstmts[q]; dup {
		s.Close()
		return old
	}
	b.rstmts[q] = s
	return s
}

func (t readTx) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	q = t.b.query(q)
	var (
		r   *sql.Rows
		err error
	)
	if s := t.b.rstmt(ctx, q); s != nil {
		r, err = s.QueryContext(ctx, args...)
	} else {
		r, err = t.b.r.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

func (t readTx) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	q = t.b.query(q)
	if s := t.b.rstmt(ctx, q); s != nil {
		return row{s.QueryRowContext(ctx, args...)}
	}
	return row{t.b.r.QueryRowContext(ctx, q, args...)}
}

type rows struct{ *sql.Rows }

func (r rows) Close() { r.Rows.Close() }

type row struct{ *sql.Row }

func (r row) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return sqlstore.ErrNoRows
	}
	return err
}
