package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/sqlstore"
)

// Adversarial tests of the replay mode (deferrable writes under one
// savepoint for the transaction; a failure rolls back to it and runs the
// held writes again). The first version rolled the whole transaction
// back; these tests found its two faults, fixed since.

var errAdv = errors.New("adv: fails")

// failing is a deferrable write that changes a row, then fails.
func failing(tx sqlstore.Tx) error {
	if _, err := tx.Exec(context.Background(),
		`INSERT INTO budget_scopes (scope, settled, reserved) VALUES ('junk', 0, 0)
		 ON CONFLICT (scope) DO UPDATE SET settled = settled + 1`); err != nil {
		return err
	}
	return errAdv
}

// counted returns insertScope(scope) that counts its runs in n (only the
// writer goroutine runs write functions).
func counted(scope string, n *int) func(sqlstore.Tx) error {
	return func(tx sqlstore.Tx) error {
		*n++
		return insertScope(scope)(tx)
	}
}

// warm commits one request-path write so that the writer does not rest
// (deferrable writes then run as they come).
func warm(t *testing.T, b *backend) {
	t.Helper()
	if err := b.Write(context.Background(), insertScope("warm")); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
}

// ---------------------------------------------------------------------
// Problem 1 (fixed): reruns grew with the square of the failures. Each
// failure in replay mode ran every write held so far again, and the writes
// after it still ran without a savepoint, so the next failure ran them all
// again: with n successes interleaved with n failures in one lingering
// transaction, the successes ran n + n(n+1)/2 times. Now the writes after
// a rerun run in savepoints: each runs at most twice.
func TestAdvReplayRerunsAtMostTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b := openTest(t)
		warm(t, b)
		bg := store.Deferrable(context.Background())
		const n = 16 // n held writes stay below lingerBatch
		runs := make([]int, n)
		ok := make(chan error, n)
		for i := range n {
			go func() { ok <- b.Write(bg, counted(fmt.Sprint("s", i), &runs[i])) }()
			synctest.Wait() // it ran; the transaction lingers
			if err := b.Write(bg, failing); !errors.Is(err, errAdv) {
				t.Fatalf("failing write %d: %v", i, err)
			}
		}
		for range n {
			if err := <-ok; err != nil {
				t.Fatal(err)
			}
		}
		total := 0
		for _, r := range runs {
			total += r
		}
		if got := scopes(t, b, "s"); len(got) != n {
			t.Errorf("stored %d of %d", len(got), n)
		}
		t.Logf("runs of each held write: %v", runs)
		if total > 2*n {
			t.Errorf("%d successful writes, each followed by a failure, ran %d times in all; want at most %d (each at most twice)", n, total, 2*n)
		}
	})
}

// ---------------------------------------------------------------------
// Problem 2 (fixed): the replay gave the file's write lock away. again
// rolled the whole transaction back (freeing the lock) and began a new
// one, and another process (a second gateway, `belay kill`) waiting for the
// lock could take it in between: the writes held, which had run fine, and
// the writes queued then failed with ErrLocked. Now the writer rolls back
// to a savepoint and keeps the transaction: while A runs again after F's
// failure, another connection cannot take the lock, and A commits.
type hookConnector struct {
	d         driver.Driver
	dsn       string
	rollbacks atomic.Int32 // transactions rolled back
}

func (c *hookConnector) Connect(context.Context) (driver.Conn, error) {
	cn, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &hookConn{Conn: cn, c: c}, nil
}
func (c *hookConnector) Driver() driver.Driver { return c.d }

type hookConn struct {
	driver.Conn
	c *hookConnector
}

func (c *hookConn) Begin() (driver.Tx, error) { //nolint:staticcheck // the wrapper's only begin
	tx, err := c.Conn.Begin() //nolint:staticcheck
	if err != nil {
		return nil, err
	}
	return &hookTx{Tx: tx, c: c.c}, nil
}

type hookTx struct {
	driver.Tx
	c *hookConnector
}

func (t *hookTx) Rollback() error {
	t.c.rollbacks.Add(1)
	return t.Tx.Rollback()
}

// hookWriter replaces the group writer's connection (before any write) by
// one that counts the transactions rolled back; the busy timeout is busy.
func hookWriter(t *testing.T, b *backend, busy time.Duration) *hookConnector {
	t.Helper()
	c := &hookConnector{d: b.w.Driver(),
		dsn: fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_journal_mode=WAL&_txlock=immediate", b.path, busy.Milliseconds())}
	b.dial = func() (driver.Conn, error) { return c.Connect(context.Background()) }
	return c
}

func TestAdvReplayKeepsTheWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.b
	hc := hookWriter(t, b, 200*time.Millisecond)

	other := otherConn(t, path)

	bg := store.Deferrable(ctx)
	// Order the writes with the writer held inside a request-path write:
	// A and F queue (deferrable); A, then F, run in one transaction once
	// the gate opens.
	entered, gate := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- b.Write(ctx, func(tx sqlstore.Tx) error { close(entered); <-gate; return insertScope("first")(tx) })
	}()
	<-entered
	var aRuns atomic.Int32
	tried := make(chan error, 1)
	aDone := make(chan error, 1)
	go func() {
		aDone <- b.Write(bg, func(tx sqlstore.Tx) error {
			if aRuns.Add(1) == 2 { // run again after F's failure
				_, err := other.ExecContext(ctx, "BEGIN IMMEDIATE")
				if err == nil {
					other.ExecContext(ctx, "ROLLBACK") //nolint:errcheck
				}
				tried <- err
			}
			return insertScope("a")(tx)
		})
	}()
	for len(b.gw.lazy) < 1 {
		runtime.Gosched() // until A is queued
	}
	fDone := make(chan error, 1)
	go func() { fDone <- b.Write(bg, failing) }()
	for len(b.gw.lazy) < 2 {
		runtime.Gosched()
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-fDone; !errors.Is(err, errAdv) {
		t.Fatalf("F: %v", err)
	}
	if err := <-tried; err == nil {
		t.Error("another connection took the write lock while A ran again: the replay let the lock go")
	}
	if n := hc.rollbacks.Load(); n != 0 {
		t.Errorf("%d transactions rolled back: the replay let the write lock go between two transactions", n)
	}
	if err := <-aDone; err != nil || aRuns.Load() != 2 {
		t.Errorf("A: %v after %d runs; want it committed after 2 (once, then again after F's failure)", err, aRuns.Load())
	}
	var n int
	if err := b.w.QueryRow(`SELECT count(*) FROM budget_scopes WHERE scope IN ('first', 'a', 'junk')`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d of first, a, junk stored (%v); want first and a (F's junk rolled back)", n, err)
	}
}

// ---------------------------------------------------------------------
// Sound: a request-path write arriving while deferrable writes are held,
// then failures of both kinds. Each write is answered once, with the
// right outcome, and the store holds exactly the writes that succeeded.
func TestAdvRequestPathAmidHeldWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b := openTest(t)
		warm(t, b)
		bg := store.Deferrable(context.Background())
		ctx := context.Background()
		var r0, r1, r2, r3 int
		d := make(chan error, 4)
		go func() { d <- b.Write(bg, counted("d0", &r0)) }()
		synctest.Wait()
		// A request-path write commits the held one with it.
		if err := b.Write(ctx, insertScope("q0")); err != nil {
			t.Fatal(err)
		}
		if err := <-d; err != nil {
			t.Fatal(err)
		}
		go func() { d <- b.Write(bg, counted("d1", &r1)) }()
		synctest.Wait()
		// A request-path write that fails (in its savepoint) is answered
		// with its error; the held one commits.
		if err := b.Write(ctx, failing); !errors.Is(err, errAdv) {
			t.Fatalf("failing request-path write: %v", err)
		}
		if err := <-d; err != nil {
			t.Fatal(err)
		}
		go func() { d <- b.Write(bg, counted("d2", &r2)) }()
		synctest.Wait()
		// The writer is busy inside a deferrable write that will fail; a
		// request-path write and a deferrable one queue behind it.
		entered, gate := make(chan struct{}), make(chan struct{})
		fDone := make(chan error, 1)
		go func() {
			fDone <- b.Write(bg, func(tx sqlstore.Tx) error {
				close(entered)
				<-gate
				return failing(tx)
			})
		}()
		<-entered
		qDone := make(chan error, 1)
		go func() { qDone <- b.Write(ctx, insertScope("q1")) }()
		go func() { d <- b.Write(bg, counted("d3", &r3)) }()
		synctest.Wait()
		close(gate)
		if err := <-fDone; !errors.Is(err, errAdv) {
			t.Fatalf("F: %v", err)
		}
		if err := <-qDone; err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := <-d; err != nil {
				t.Fatal(err)
			}
		}
		got := scopes(t, b, "")
		want := map[string]int64{"warm": 0, "q0": 0, "d0": 0, "d1": 0, "d2": 0, "q1": 0, "d3": 0}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("stored %v, want %v", got, want)
		}
		if r0 != 1 || r1 != 1 || r2 != 2 || r3 != 1 {
			t.Errorf("runs d0 %d d1 %d d2 %d d3 %d, want 1 1 2 1", r0, r1, r2, r3)
		}
		// Every request goes back to the pool answered once: more writes
		// through the recycled requests get their own outcomes.
		for i := range 50 {
			err := b.Write(ctx, insertScope(fmt.Sprint("after", i)))
			if err != nil {
				t.Fatalf("write %d after: %v (a stale answer in a recycled request?)", i, err)
			}
		}
	})
}

// ---------------------------------------------------------------------
// Sound: the store's write functions give the same results when run again.
// Each kind is held in one transaction, then a deferrable write fails,
// then Hurry commits the rerun writes.
func TestAdvStoreWritesRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, b := openTest(t)
		ctx := context.Background()
		bg := store.Deferrable(ctx)
		now := time.Unix(1_000_000, 0)
		// Set-up, committed on the request path.
		if err := s.Reserve(ctx, budget.Reservation{ID: "settle-me", Owner: "p", Amount: budget.Dollars(1),
			Scopes: []budget.ScopeLimit{{Scope: "run:s", Limit: budget.Dollars(5)}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Reserve(ctx, budget.Reservation{ID: "expire-me", Owner: "p", Amount: budget.Dollars(1),
			ExpiresAt: now.Add(-time.Second), Scopes: []budget.ScopeLimit{{Scope: "run:e", Limit: budget.Dollars(5)}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateApproval(ctx, store.Approval{ID: "ap", RunID: "r", Tool: "t", Requested: now}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		type res struct {
			name string
			err  error
			v    any
		}
		out := make(chan res, 16)
		held := func(name string, f func() (any, error)) {
			go func() { v, err := f(); out <- res{name, err, v} }()
			synctest.Wait() // it ran and is held
		}
		held("settle", func() (any, error) { return nil, s.Settle(bg, "settle-me", budget.Micros(700_000)) })
		held("alert", func() (any, error) { return s.MarkAlert(bg, "run:s", 0.5) })
		held("alert again", func() (any, error) { return s.MarkAlert(bg, "run:s", 0.5) })
		held("expire", func() (any, error) { return s.ExpireReservations(bg, now) })
		held("decide", func() (any, error) {
			a, err := s.DecideApproval(bg, "ap", store.ApprovalApproved, "me", "ok", now)
			return a.State, err
		})
		held("claim", func() (any, error) {
			c, err := s.Claim(bg, "k", "o", time.Minute, now)
			return c.State, err
		})
		rec := store.Run{ID: "run1", Tenant: "t", Status: store.RunRunning, Started: now}
		held("create run", func() (any, error) {
			return nil, s.CreateRunSpent(bg, rec, []budget.Reservation{{ID: "sp", Owner: "p", Amount: budget.Micros(5), Spend: true,
				Scopes: []budget.ScopeLimit{{Scope: "run:run1"}}}})
		})
		rec2 := rec
		rec2.Status, rec2.Ended, rec2.Turns = store.RunSucceeded, now.Add(time.Second), 3
		held("save run", func() (any, error) { return nil, s.SaveRun(bg, rec2, "turns:run1", "run:run1") })
		if err := b.Write(bg, failing); !errors.Is(err, errAdv) {
			t.Fatalf("failing write: %v", err)
		}
		s.Hurry()
		got := map[string]string{}
		for range 8 {
			r := <-out
			got[r.name] = fmt.Sprintf("%v/%v", r.v, r.err)
		}
		want := map[string]string{
			"settle": "<nil>/<nil>", "alert": "true/<nil>", "alert again": "false/<nil>", "expire": "1/<nil>",
			"decide": "approved/<nil>", "claim": "new/<nil>", "create run": "<nil>/<nil>", "save run": "<nil>/<nil>",
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("results after a replay\n got %v\nwant %v", got, want)
		}
		bal, _ := s.Balance(ctx, "run:s")
		if bal.Settled != budget.Micros(700_000) || bal.Reserved != 0 {
			t.Errorf("run:s %+v: want 0.70 settled, none reserved", bal)
		}
		if bal, _ := s.Balance(ctx, "run:e"); bal.Reserved != 0 {
			t.Errorf("run:e %+v: want none reserved", bal)
		}
		if bal, _ := s.Balance(ctx, "run:run1"); bal.Settled != budget.Micros(5) {
			t.Errorf("run:run1 %+v: want the spend once", bal)
		}
		if r, err := s.GetRun(ctx, "run1"); err != nil || r.Status != store.RunSucceeded || r.Turns != 3 {
			t.Errorf("run1 %+v, %v", r, err)
		}
		if got := scopes(t, b, "junk"); len(got) != 0 {
			t.Errorf("the failed write left %v", got)
		}
	})
}

// ---------------------------------------------------------------------
// Sound: a held write that panics with rows open when it is run again
// fails alone; a held write whose caller left still commits; a write
// queued with a context that ended is not run; Close right after a
// failure commits the writes run again.
func TestAdvPanicOnRerunThenClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, b := openTest(t)
		warm(t, b)
		bg := store.Deferrable(context.Background())
		var nA, nP, nC int
		aDone, pDone, cDone := make(chan error, 1), make(chan error, 1), make(chan error, 1)
		go func() { aDone <- b.Write(bg, counted("a", &nA)) }()
		synctest.Wait()
		go func() {
			pDone <- b.Write(bg, func(tx sqlstore.Tx) error {
				nP++
				if err := insertScope("p")(tx); err != nil {
					return err
				}
				if nP > 1 {
					rows, err := tx.Query(context.Background(), `SELECT scope FROM budget_scopes`)
					if err != nil {
						return err
					}
					rows.Next()
					panic("second run")
				}
				return nil
			})
		}()
		synctest.Wait()
		// The writer is inside F while C, whose context then ends, queues.
		entered, gate := make(chan struct{}), make(chan struct{})
		fDone := make(chan error, 1)
		go func() {
			fDone <- b.Write(bg, func(tx sqlstore.Tx) error { close(entered); <-gate; return failing(tx) })
		}()
		<-entered
		cctx, cancel := context.WithCancel(bg)
		go func() { cDone <- b.Write(cctx, counted("c", &nC)) }()
		synctest.Wait()
		cancel()
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		synctest.Wait()
		close(gate)
		if err := <-fDone; !errors.Is(err, errAdv) {
			t.Errorf("F: %v", err)
		}
		if err := <-pDone; err == nil {
			t.Error("P, which panicked when run again, succeeded")
		}
		if err := <-aDone; err != nil {
			t.Errorf("A: %v", err)
		}
		if err := <-cDone; !errors.Is(err, context.Canceled) {
			t.Errorf("C: %v", err)
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if nA != 2 || nP != 2 || nC != 0 {
			t.Errorf("runs A %d P %d C %d, want 2 2 0", nA, nP, nC)
		}
		s2, err := Open(context.Background(), s.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		got := scopes(t, s2.b, "")
		want := map[string]int64{"warm": 0, "a": 0}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("stored %v, want %v", got, want)
		}
	})
}
