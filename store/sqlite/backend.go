package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"

	"github.com/belay-run/belay/store/internal/sqlstore"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// backend is sqlstore.Backend over two database/sql pools on one file: w
// has a single connection and runs every write, r serves reads.
type backend struct {
	path string
	w, r *sql.DB
	cp   *sql.DB // the checkpointer's connection
	ckpt *checkpointer
	gw   *groupWriter

	mu      sync.Mutex
	queries map[string]string    // $N form → ?N form
	stmts   map[string]*sql.Stmt // ?N form → prepared on w
	rstmts  map[string]*sql.Stmt // ?N form → prepared on r (each pooled connection prepares it once)
	want    map[string]bool      // write queries to prepare after the current transaction
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
// back from SQLite and parsing it, which cost a sixth of a write's
// statement time in BenchmarkModelCall's profile.
func sqliteParams(q string) string {
	ms := placeholder.FindAllStringSubmatch(q, -1)
	for i, m := range ms {
		if m[1] != strconv.Itoa(i+1) {
			return placeholder.ReplaceAllString(q, "?$1")
		}
	}
	return placeholder.ReplaceAllLiteralString(q, "?")
}

// stmt returns the statement prepared for q on the write connection, or
// nil, noting q so that it is prepared once the connection is free.
func (b *backend) stmt(q string) *sql.Stmt {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.stmts[q]; ok {
		return s
	}
	if b.want == nil {
		b.want = map[string]bool{}
	}
	b.want[q] = true
	return nil
}

// prepareWanted prepares the noted write statements. It runs after a
// transaction ends, when the single write connection is free (preparing
// inside the transaction would wait for that connection forever).
func (b *backend) prepareWanted(ctx context.Context) {
	b.mu.Lock()
	var qs []string
	for q := range b.want {
		qs = append(qs, q)
	}
	b.want = nil
	b.mu.Unlock()
	for _, q := range qs {
		s, err := b.w.PrepareContext(ctx, q)
		if err != nil {
			continue // the unprepared path keeps working
		}
		b.mu.Lock()
		if b.stmts == nil {
			b.stmts = map[string]*sql.Stmt{}
		}
		if _, dup := b.stmts[q]; dup {
			s.Close()
		} else {
			b.stmts[q] = s
		}
		b.mu.Unlock()
	}
}

// Write runs fn in the next group commit (see groupWriter).
func (b *backend) Write(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return b.gw.write(ctx, fn)
}

// prepareIfWanted prepares the write statements noted since the last
// transaction; the writer calls it between transactions.
func (b *backend) prepareIfWanted(ctx context.Context) {
	b.mu.Lock()
	pending := len(b.want) > 0
	b.mu.Unlock()
	if pending {
		b.prepareWanted(ctx)
	}
}

func (b *backend) Read() sqlstore.Tx { return readTx{b: b} }

func (b *backend) Close() error {
	b.gw.close()
	b.ckpt.stop()
	b.mu.Lock()
	for _, s := range b.stmts {
		s.Close()
	}
	for _, s := range b.rstmts {
		s.Close()
	}
	b.stmts, b.rstmts = nil, nil
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
// transaction, under the writer's context, not the caller's: a caller
// whose context ends mid-statement would interrupt SQLite, which rolls
// back the whole transaction, and with it the other writes of the batch.
// A write whose context has ended before it starts is not run (see
// groupWriter.run); one that started finishes.
type writeTx struct {
	b   *backend
	tx  *sql.Tx
	ctx context.Context
	// stmts are the prepared statements bound to tx, each bound once per
	// transaction (a batch runs one statement many times).
	stmts map[*sql.Stmt]*sql.Stmt
}

// bound returns s bound to the transaction.
func (t writeTx) bound(s *sql.Stmt) *sql.Stmt {
	ts, ok := t.stmts[s]
	if !ok {
		ts = t.tx.StmtContext(t.ctx, s)
		t.stmts[s] = ts
	}
	return ts
}

func (t writeTx) Exec(_ context.Context, q string, args ...any) (int64, error) {
	ctx := t.ctx
	q = t.b.query(q)
	var res sql.Result
	var err error
	if s := t.b.stmt(q); s != nil {
		res, err = t.bound(s).ExecContext(ctx, args...)
	} else {
		res, err = t.tx.ExecContext(ctx, q, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t writeTx) Query(_ context.Context, q string, args ...any) (sqlstore.Rows, error) {
	r, err := t.tx.QueryContext(t.ctx, t.b.query(q), args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

func (t writeTx) QueryRow(_ context.Context, q string, args ...any) sqlstore.Row {
	ctx := t.ctx
	q = t.b.query(q)
	if s := t.b.stmt(q); s != nil {
		return row{t.bound(s).QueryRowContext(ctx, args...)}
	}
	return row{t.tx.QueryRowContext(ctx, q, args...)}
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
