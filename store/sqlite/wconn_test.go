package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/belay-run/belay/budget"
)

// The writer's connection scans as database/sql does: each column value
// SQLite can return, into each destination type, gives the same value, or
// an error in both.
func TestWriterScanMatchesDatabaseSQL(t *testing.T) {
	ctx := context.Background()
	s, w := openWriterConn(t)

	cols := []string{"NULL", "42", "-7", "0", "1", "3.5", "'text'", "'42'", "'true'", "X'0102'", "''"}
	dests := map[string]func() any{
		"*any": func() any { return new(any) }, "*string": func() any { return new(string) },
		"*[]byte": func() any { return new([]byte) }, "*int64": func() any { return new(int64) },
		"*int": func() any { return new(int) }, "*float64": func() any { return new(float64) },
		"*bool": func() any { return new(bool) }, "**int64": func() any { return new(*int64) },
		"**string": func() any { return new(*string) }, "*sql.NullString": func() any { return new(sql.NullString) },
		"*sql.NullInt64": func() any { return new(sql.NullInt64) },
		"*budget.Scope":  func() any { return new(budget.Scope) }, "*budget.USD": func() any { return new(budget.USD) },
		"*int32": func() any { return new(int32) }, "*uint64": func() any { return new(uint64) },
		"*float32": func() any { return new(float32) }, "*namedBool": func() any { return new(namedBool) },
		"**budget.USD": func() any { return new(*budget.USD) },
	}
	for _, col := range cols {
		q := "SELECT " + col
		for name, mk := range dests {
			want, got := mk(), mk()
			werr := s.b.r.QueryRowContext(ctx, q).Scan(want)
			rows, err := w.query(ctx, q, nil)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			gerr := wrow{rows: rows}.Scan(got)
			switch {
			case (werr == nil) != (gerr == nil):
				t.Errorf("%s into %s: database/sql %v, writer %v", col, name, werr, gerr)
			case werr == nil && !reflect.DeepEqual(want, got):
				t.Errorf("%s into %s: database/sql %s, writer %s", col, name, show(want), show(got))
			}
		}
	}
}

type namedBool bool

// openWriterConn opens a store in a temporary directory (openTest) and a
// writer connection to its file, both closed when the test ends.
func openWriterConn(t *testing.T) (*Store, *wconn) {
	t.Helper()
	s, b := openTest(t)
	w, err := b.dialWriter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.close() })
	return s, w
}

func show(v any) string {
	e := reflect.ValueOf(v).Elem()
	if e.Kind() == reflect.Pointer && !e.IsNil() {
		return fmt.Sprintf("&%#v", e.Elem().Interface())
	}
	return fmt.Sprintf("%#v", e.Interface())
}

// Arguments are converted as database/sql converts them: pointers
// dereferenced (nil is NULL), ints widened, a driver.Valuer called, a wrong
// count refused.
func TestWriterArguments(t *testing.T) {
	ctx := context.Background()
	_, w := openWriterConn(t)
	n, str := int64(5), "x"
	var nilN *int64
	for _, c := range []struct {
		arg  any
		want any
	}{
		{int64(3), int64(3)}, {7, int64(7)}, {int32(-2), int64(-2)}, {uint8(9), int64(9)}, {&n, int64(5)},
		{nilN, nil}, {&str, "x"}, {"s", "s"}, {[]byte{1, 2}, []byte{1, 2}}, {2.5, 2.5}, {true, int64(1)},
		{sql.NullString{String: "v", Valid: true}, "v"}, {sql.NullInt64{}, nil}, {nil, nil},
	} {
		rows, err := w.query(ctx, "SELECT $1", []any{c.arg})
		if err != nil {
			t.Fatalf("%T: %v", c.arg, err)
		}
		var got any
		if err := (wrow{rows: rows}).Scan(&got); err != nil {
			t.Fatalf("%T: %v", c.arg, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("argument %T %v: stored %#v, want %#v", c.arg, c.arg, got, c.want)
		}
	}
	if _, err := w.exec(ctx, "SELECT $1, $2", []any{1}); err == nil {
		t.Error("two parameters, one argument: no error")
	}
	if _, err := w.exec(ctx, "SELECT $1", []any{struct{}{}}); err == nil {
		t.Error("an argument of an unsupported type: no error")
	}
	if _, err := w.exec(ctx, "SELECT $1", []any{"kept?"}); err != nil {
		t.Fatal(err)
	}
	if len(w.args) != 1 || w.args[0].Value != nil {
		t.Errorf("the argument scratch after a statement: %+v; want its one value cleared", w.args)
	}
}

// A writer's connection the driver reports broken is replaced: the write
// that met it fails, the next one runs on a new connection.
func TestWriterReplacesABrokenConnection(t *testing.T) {
	ctx := context.Background()
	_, b := openTest(t)
	dial := b.dial
	var dials, breaks int
	b.dial = func() (driver.Conn, error) {
		dials++
		c, err := dial()
		if err != nil {
			return nil, err
		}
		return &breakingConn{Conn: c, breaks: &breaks}, nil
	}
	breaks = 1 // the first BEGIN fails with driver.ErrBadConn
	if err := b.Write(ctx, insertScope("a")); !errors.Is(err, driver.ErrBadConn) {
		t.Fatalf("first write: %v; want driver.ErrBadConn", err)
	}
	if err := b.Write(ctx, insertScope("b")); err != nil {
		t.Fatalf("second write: %v", err)
	}
	if dials != 2 {
		t.Errorf("%d connections opened; want 2 (the broken one replaced)", dials)
	}
	var n int
	if err := b.r.QueryRow(`SELECT count(*) FROM budget_scopes WHERE scope IN ('a', 'b')`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d of a, b stored (%v); want b only", n, err)
	}
}

// breakingConn fails its next *breaks BEGINs with driver.ErrBadConn. It
// has only the old-style methods (Prepare, Begin): the writer falls back
// to them, as database/sql does.
type breakingConn struct {
	driver.Conn
	breaks *int
}

func (c *breakingConn) Begin() (driver.Tx, error) { //nolint:staticcheck // the wrapper's only begin
	if *c.breaks > 0 {
		*c.breaks--
		return nil, driver.ErrBadConn
	}
	return c.Conn.Begin() //nolint:staticcheck
}

// A COMMIT that fails is rolled back, so the writer does not keep the
// transaction (and the file's write lock) open; when the rollback fails
// too, the connection is replaced.
func TestWriterFailedCommit(t *testing.T) {
	for _, rollbackFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("rollback fails %v", rollbackFails), func(t *testing.T) {
			ctx := context.Background()
			_, b := openTest(t)
			dial := b.dial
			dials := 0
			failCommit := true
			b.dial = func() (driver.Conn, error) {
				dials++
				c, err := dial()
				if err != nil {
					return nil, err
				}
				return &commitFailConn{Conn: c, fail: &failCommit, rollbackFails: rollbackFails}, nil
			}
			if err := b.Write(ctx, insertScope("a")); !errors.Is(err, errCommit) {
				t.Fatalf("first write: %v; want the commit's error", err)
			}
			if err := b.Write(ctx, insertScope("b")); err != nil {
				t.Fatalf("second write: %v", err)
			}
			if want := map[bool]int{false: 1, true: 2}[rollbackFails]; dials != want {
				t.Errorf("%d connections opened; want %d", dials, want)
			}
			var n int
			if err := b.r.QueryRow(`SELECT count(*) FROM budget_scopes WHERE scope IN ('a', 'b')`).Scan(&n); err != nil || n != 1 {
				t.Errorf("%d of a, b stored (%v); want b only", n, err)
			}
		})
	}
}

var errCommit = errors.New("commit refused")

// commitFailConn's transactions refuse their COMMIT while *fail holds
// (clearing it), leaving the transaction open as SQLite's SQLITE_BUSY
// does; with rollbackFails, the ROLLBACK after it fails as well.
type commitFailConn struct {
	driver.Conn
	fail          *bool
	rollbackFails bool
}

func (c *commitFailConn) Begin() (driver.Tx, error) { //nolint:staticcheck // the wrapper's only begin
	tx, err := c.Conn.Begin() //nolint:staticcheck
	if err != nil {
		return nil, err
	}
	return &commitFailTx{Tx: tx, c: c}, nil
}

type commitFailTx struct {
	driver.Tx
	c      *commitFailConn
	failed bool
}

func (t *commitFailTx) Commit() error {
	if *t.c.fail {
		*t.c.fail = false
		t.failed = true
		return errCommit
	}
	return t.Tx.Commit()
}

func (t *commitFailTx) Rollback() error {
	if t.failed && t.c.rollbackFails {
		return errors.New("rollback refused")
	}
	return t.Tx.Rollback()
}
