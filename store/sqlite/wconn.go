package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"time"

	"github.com/belay-run/belay/store/internal/sqlstore"
)

// wconn is the group writer's own connection to the file, a driver
// connection used without database/sql: the writer is its only user, one
// statement at a time, so database/sql's per-statement work (a new slice
// of converted arguments, the pool's and the connection's locks, a
// prepared statement bound anew to each transaction) bought nothing. It
// was a sixth of the writer's statement time at saturation (a profile of
// bench/gateway -tput-only); without it BenchmarkModelCall measured 56.1
// against 63.0 µs of CPU per call (medians of six, in turn), 8.0 against
// 10.9 KB and 142 against 161 allocations. Not safe for concurrent use:
// only the writer goroutine uses it.
type wconn struct {
	c driver.Conn
	// stmts are the prepared statements, by the store's query text (its
	// $N form); at most maxStmts, beyond which a statement is prepared
	// for one use (the store's texts are a fixed set of a few dozen).
	stmts map[string]driver.Stmt
	args  []driver.NamedValue // one statement's arguments, reused
	bad   bool                // broken: the driver said so, or a transaction could not be ended
	// open are the rows handed out by query and not closed yet. A write
	// that leaves rows open (a mistake, a panic) would leave their cached
	// statement mid-step, holding the connection's read snapshot (every
	// later BEGIN IMMEDIATE then fails once another connection commits)
	// or, for a RETURNING write, failing the COMMIT; database/sql's Tx
	// closed them at its end. call closes them when each write returns.
	open []*wrows
}

// closeRows closes the rows a write left open and returns the first error
// closing them gave.
func (w *wconn) closeRows() error {
	var first error
	for i, r := range w.open {
		r.Close()
		if err := r.Err(); err != nil && first == nil {
			first = err
		}
		w.open[i] = nil
	}
	w.open = w.open[:0]
	return first
}

const maxStmts = 256

// dialWriter opens the writer's connection.
func (b *backend) dialWriter() (*wconn, error) {
	c, err := b.dial()
	if err != nil {
		return nil, err
	}
	return &wconn{c: c, stmts: map[string]driver.Stmt{}}, nil
}

// close finalizes the statements and closes the connection.
func (w *wconn) close() error {
	var errs []error
	for _, s := range w.stmts {
		errs = append(errs, s.Close())
	}
	w.stmts = nil
	errs = append(errs, w.c.Close())
	return errors.Join(errs...)
}

// usable reports whether the driver still finds w usable
// (driver.Validator).
func (w *wconn) usable() bool {
	v, ok := w.c.(driver.Validator)
	return !ok || v.IsValid()
}

// note marks the connection broken when err says so (driver.ErrBadConn):
// the writer then opens a new one for its next transaction.
func (w *wconn) note(err error) error {
	if errors.Is(err, driver.ErrBadConn) {
		w.bad = true
	}
	return err
}

// begin begins a transaction: BEGIN IMMEDIATE, from the connection's
// _txlock.
func (w *wconn) begin(ctx context.Context) (driver.Tx, error) {
	if c, ok := w.c.(driver.ConnBeginTx); ok {
		tx, err := c.BeginTx(ctx, driver.TxOptions{})
		return tx, w.note(err)
	}
	tx, err := w.c.Begin() //nolint:staticcheck // the fallback for a connection without BeginTx, as database/sql's
	return tx, w.note(err)
}

// stmt returns q prepared; keep is false for a statement not cached, which
// the caller closes after its use.
func (w *wconn) stmt(ctx context.Context, q string) (s driver.Stmt, keep bool, err error) {
	if s, ok := w.stmts[q]; ok {
		return s, true, nil
	}
	text := sqliteParams(q)
	if c, ok := w.c.(driver.ConnPrepareContext); ok {
		s, err = c.PrepareContext(ctx, text)
	} else {
		s, err = w.c.Prepare(text)
	}
	if err != nil {
		return nil, false, w.note(err)
	}
	if len(w.stmts) >= maxStmts {
		return s, false, nil
	}
	w.stmts[q] = s
	return s, true, nil
}

// bind converts args as database/sql does (driver.DefaultParameterConverter,
// which calls a driver.Valuer) into w.args, checking their number against
// the statement's.
func (w *wconn) bind(s driver.Stmt, args []any) ([]driver.NamedValue, error) {
	if n := s.NumInput(); n >= 0 && n != len(args) {
		return nil, fmt.Errorf("sql: expected %d arguments, got %d", n, len(args))
	}
	nv := w.args[:0]
	for i, a := range args {
		v, err := value(a)
		if err != nil {
			return nil, fmt.Errorf("sql: converting argument $%d type: %w", i+1, err)
		}
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	w.args = nv
	return nv, nil
}

// unbind drops the arguments' references, so that the scratch slice does
// not keep a write's strings alive.
func (w *wconn) unbind() { clear(w.args) }

// value is a as a driver.Value: the store's common types directly, the
// rest through driver.DefaultParameterConverter.
func value(a any) (driver.Value, error) {
	switch x := a.(type) {
	case nil, int64, string, []byte, float64, bool, time.Time:
		return x, nil
	case int:
		return int64(x), nil
	case *int64:
		if x == nil {
			return nil, nil
		}
		return *x, nil
	case *string:
		if x == nil {
			return nil, nil
		}
		return *x, nil
	}
	return driver.DefaultParameterConverter.ConvertValue(a)
}

func (w *wconn) exec(ctx context.Context, q string, args []any) (int64, error) {
	s, keep, err := w.stmt(ctx, q)
	if err != nil {
		return 0, err
	}
	if !keep {
		defer s.Close()
	}
	nv, err := w.bind(s, args)
	if err != nil {
		return 0, err
	}
	defer w.unbind()
	var res driver.Result
	if se, ok := s.(driver.StmtExecContext); ok {
		res, err = se.ExecContext(ctx, nv)
	} else {
		res, err = s.Exec(values(nv)) //nolint:staticcheck // the fallback, as database/sql's
	}
	if err != nil {
		return 0, w.note(err)
	}
	return res.RowsAffected()
}

func (w *wconn) query(ctx context.Context, q string, args []any) (*wrows, error) {
	s, keep, err := w.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	nv, err := w.bind(s, args)
	if err != nil {
		if !keep {
			s.Close()
		}
		return nil, err
	}
	defer w.unbind()
	var r driver.Rows
	if sq, ok := s.(driver.StmtQueryContext); ok {
		r, err = sq.QueryContext(ctx, nv)
	} else {
		r, err = s.Query(values(nv)) //nolint:staticcheck // the fallback, as database/sql's
	}
	if err != nil {
		if !keep {
			s.Close()
		}
		return nil, w.note(err)
	}
	wr := &wrows{r: r, vals: make([]driver.Value, len(r.Columns()))}
	if !keep {
		wr.stmt = s
	}
	w.open = append(w.open, wr)
	return wr, nil
}

func values(nv []driver.NamedValue) []driver.Value {
	v := make([]driver.Value, len(nv))
	for i := range nv {
		v[i] = nv[i].Value
	}
	return v
}

// wrows is sqlstore.Rows over the writer's connection. Scan converts as
// database/sql's Rows.Scan does for the destinations the store uses (see
// assign).
type wrows struct {
	r      driver.Rows
	stmt   driver.Stmt // closed with the rows: a statement not cached
	vals   []driver.Value
	err    error
	closed bool
}

func (r *wrows) Next() bool {
	if r.closed {
		return false
	}
	if err := r.r.Next(r.vals); err != nil {
		if err != io.EOF {
			r.err = err
		}
		r.Close()
		return false
	}
	return true
}

func (r *wrows) Scan(dest ...any) error {
	if r.closed {
		return errors.New("sql: Rows are closed")
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(r.vals), len(dest))
	}
	for i, d := range dest {
		if err := assign(d, r.vals[i]); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	return nil
}

func (r *wrows) Err() error { return r.err }

func (r *wrows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	if err := r.r.Close(); err != nil && r.err == nil {
		r.err = err
	}
	if r.stmt != nil {
		r.stmt.Close()
	}
}

// wrow is sqlstore.Row over the writer's connection: the first row, or
// sqlstore.ErrNoRows.
type wrow struct {
	rows *wrows
	err  error
}

func (r wrow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sqlstore.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// assign stores src, a column's value from the driver (nil, int64,
// float64, bool, []byte, string or time.Time), in dest as database/sql's
// Rows.Scan does (TestWriterScanMatchesDatabaseSQL compares them) for:
// *any, *string, *[]byte (a copy), *int64, *int, *float64, *bool, a
// sql.Scanner, a pointer to a named type of a string, integer, float or
// bool kind, and a pointer to a pointer to one of those (nil for NULL).
// Other destinations are an error naming the type.
func assign(dest, src any) error {
	if s, ok := dest.(sql.Scanner); ok {
		return s.Scan(src)
	}
	switch d := dest.(type) {
	case *any:
		if b, ok := src.([]byte); ok {
			src = bytes.Clone(b)
		}
		*d = src
		return nil
	case *string:
		if s, ok := text(src); ok {
			*d = s
			return nil
		}
	case *[]byte:
		switch s := src.(type) {
		case nil:
			*d = nil
			return nil
		case []byte:
			*d = bytes.Clone(s)
			return nil
		}
		if s, ok := text(src); ok {
			*d = []byte(s)
			return nil
		}
	case *int64:
		if s, ok := src.(int64); ok {
			*d = s
			return nil
		}
		return parse(src, dest, func(s string) (err error) { *d, err = strconv.ParseInt(s, 10, 64); return err })
	case *int:
		if s, ok := src.(int64); ok && int64(int(s)) == s {
			*d = int(s)
			return nil
		}
		return parse(src, dest, func(s string) error {
			n, err := strconv.ParseInt(s, 10, strconv.IntSize)
			*d = int(n)
			return err
		})
	case *float64:
		switch s := src.(type) {
		case float64:
			*d = s
			return nil
		case int64:
			*d = float64(s)
			return nil
		}
		return parse(src, dest, func(s string) (err error) { *d, err = strconv.ParseFloat(s, 64); return err })
	case *bool:
		if src == nil {
			break
		}
		v, err := driver.Bool.ConvertValue(src)
		if err != nil {
			return fmt.Errorf("sql/driver: %w", err)
		}
		*d = v.(bool)
		return nil
	default:
		pv := reflect.ValueOf(dest)
		if pv.Kind() != reflect.Pointer || pv.IsNil() {
			break
		}
		if e := pv.Elem(); e.Kind() == reflect.Pointer {
			// **T: nil for NULL, else a new T holding the value.
			if src == nil {
				e.SetZero()
				return nil
			}
			nv := reflect.New(e.Type().Elem())
			if err := assign(nv.Interface(), src); err != nil {
				return err
			}
			e.Set(nv)
			return nil
		} else if ok, err := assignKind(e, src, dest); ok {
			return err
		}
	}
	if src == nil {
		return fmt.Errorf("converting NULL to %T is unsupported", dest)
	}
	return fmt.Errorf("unsupported Scan, storing driver.Value type %T into type %T", src, dest)
}

// assignKind stores src in e, a value of a named type of a basic kind (a
// budget.Scope string, a budget.USD int64) as database/sql's Scan does: a
// number through src's text, a string from text only, a bool from a bool;
// ok is false for what it does not convert.
func assignKind(e reflect.Value, src, dest any) (ok bool, err error) {
	switch e.Kind() {
	case reflect.String: // from text only, as database/sql
		switch s := src.(type) {
		case string:
			e.SetString(s)
			return true, nil
		case []byte:
			e.SetString(string(s))
			return true, nil
		}
		return false, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true, parse(src, dest, func(s string) error {
			n, err := strconv.ParseInt(s, 10, e.Type().Bits())
			if err == nil {
				e.SetInt(n)
			}
			return err
		})
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true, parse(src, dest, func(s string) error {
			n, err := strconv.ParseUint(s, 10, e.Type().Bits())
			if err == nil {
				e.SetUint(n)
			}
			return err
		})
	case reflect.Float32, reflect.Float64:
		return true, parse(src, dest, func(s string) error {
			f, err := strconv.ParseFloat(s, e.Type().Bits())
			if err == nil {
				e.SetFloat(f)
			}
			return err
		})
	case reflect.Bool: // from a bool only, as database/sql (SQLite returns none)
		if b, ok := src.(bool); ok {
			e.SetBool(b)
			return true, nil
		}
		return false, nil
	}
	return false, nil
}

// text is src as database/sql's Scan turns a column into a string.
func text(src any) (string, bool) {
	switch s := src.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	case int64:
		return strconv.FormatInt(s, 10), true
	case float64:
		return strconv.FormatFloat(s, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(s), true
	case time.Time:
		return s.Format(time.RFC3339Nano), true
	}
	return "", false
}

// parse sets dest from src's text with set, as database/sql's Scan does
// for a number from a string.
func parse(src, dest any, set func(string) error) error {
	s, ok := text(src)
	if !ok {
		if src == nil {
			return fmt.Errorf("converting NULL to %T is unsupported", dest)
		}
		return fmt.Errorf("unsupported Scan, storing driver.Value type %T into type %T", src, dest)
	}
	if err := set(s); err != nil {
		return fmt.Errorf("converting driver.Value type %T (%q) to a %T: %w", src, s, dest, err)
	}
	return nil
}
