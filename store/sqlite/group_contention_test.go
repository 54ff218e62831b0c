package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/sqlstore"
)

// store.Hurrier says Hurry runs the deferrable writes the writer holds
// "and those that come before it next runs a batch, without waiting
// further". A deferrable write queued before Hurry, while the writer is
// busy inside another write, must not then wait a whole linger.
func TestHurryCoversWritesQueuedBeforeIt(t *testing.T) {
	lingered := 0
	const rounds = 20
	for round := range rounds {
		synctest.Test(t, func(t *testing.T) {
			s, b := openTest(t)
			ctx := store.Deferrable(context.Background())
			entered, gate := make(chan struct{}), make(chan struct{})
			aDone := make(chan error, 1)
			go func() {
				aDone <- b.Write(ctx, func(tx sqlstore.Tx) error {
					close(entered)
					<-gate
					return insertScope(fmt.Sprint("a", round))(tx)
				})
			}()
			<-entered // the writer runs A, in a transaction it opened
			start := time.Now()
			bDone := make(chan error, 1)
			go func() { bDone <- b.Write(ctx, insertScope(fmt.Sprint("b", round))) }()
			synctest.Wait() // B is queued (the lazy queue is buffered)
			s.Hurry()       // a reader about to wait for A and B
			close(gate)
			if err := <-bDone; err != nil {
				t.Fatal(err)
			}
			if w := time.Since(start); w != 0 {
				lingered++
				t.Logf("round %d: B, queued before Hurry, answered after %v", round, w)
			}
			<-aDone
		})
	}
	if lingered > 0 {
		t.Errorf("in %d of %d rounds a deferrable write queued before Hurry still waited its linger; want 0", lingered, rounds)
	}
}

// A second process (here a second Store on the file) whose write comes
// while this one has a steady trickle of deferrable writes (one every 5 ms,
// far below what the writer can do) gets the write lock within its busy
// timeout: the lingering transaction leaves it free for a rest after each
// commit (a regression: without the rest it was held nearly always, and the
// other process failed with ErrLocked). Real time: two SQLite connections
// contend for the file's lock through SQLite's busy handler, which polls
// (sleeps of 1 ms growing to 100 ms): each poll finds the lock free when it
// falls in a rest (5 ms of each 30 ms cycle of linger and rest), so a write
// fails only when every poll of its busy timeout misses. The other store
// has the default busy timeout (5 s, about 60 polls: some 1e-5 to miss
// them all); with 1 s (about 20 polls, a few percent) the test failed once
// in a CI run under -race.
func TestOtherProcessGetsTheLockUnderDeferrableLoad(t *testing.T) {
	for _, deferrable := range []bool{false, true} {
		t.Run(fmt.Sprint("deferrable=", deferrable), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "belay.db")
			ctx := context.Background()
			a, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			other, err := OpenOptions(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			wctx := ctx
			if deferrable {
				wctx = store.Deferrable(ctx)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var n atomic.Int64
			underway := make(chan struct{})
			for w := range 1 {
				wg.Go(func() {
					tk := time.NewTicker(5 * time.Millisecond)
					defer tk.Stop()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						case <-tk.C:
						}
						if err := a.b.Write(wctx, insertScope(fmt.Sprintf("a%d-%d", w, i))); err != nil {
							t.Error(err)
							return
						}
						if n.Add(1) == 20 {
							close(underway)
						}
					}
				})
			}
			<-underway
			fails := 0
			for i := range 3 {
				start := time.Now()
				err := other.Reserve(ctx, budget.Reservation{ID: fmt.Sprint("other", i), Owner: "p", Amount: 1,
					Scopes: []budget.ScopeLimit{{Scope: "run:other"}}})
				if err != nil {
					fails++
					t.Logf("other store's write %d after %v: %v (locked: %v)", i, time.Since(start).Round(time.Millisecond), err, errors.Is(err, ErrLocked))
				}
			}
			close(stop)
			wg.Wait()
			if fails > 0 {
				t.Errorf("%d of 3 writes of another process failed while this one made %d deferrable writes a second; want 0", fails, 200)
			}
		})
	}
}

// Options.BusyTimeout is how long a write waits for another connection's
// lock before failing with ErrLocked: the writes queued behind one whose
// BEGIN failed fail with it, rather than each wait the timeout again (a
// regression: the last of n queued writes failed after n timeouts). Real
// time: the lock is another connection's, through SQLite's busy handler.
func TestLockedFileFailsQueuedWritesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	ctx := context.Background()
	s, err := OpenOptions(ctx, path, Options{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Another process holds the write lock.
	conn := otherConn(t, path)
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK")
	const n = 8
	start := time.Now()
	var wg sync.WaitGroup
	var worst atomic.Int64
	for i := range n {
		wg.Go(func() {
			t0 := time.Now()
			err := s.Reserve(ctx, budget.Reservation{ID: fmt.Sprint("q", i), Owner: "p", Amount: 1,
				Scopes: []budget.ScopeLimit{{Scope: "run:q"}}})
			if !errors.Is(err, ErrLocked) {
				t.Errorf("write %d: %v, want ErrLocked", i, err)
			}
			if d := int64(time.Since(t0)); d > worst.Load() {
				worst.Store(d)
			}
		})
	}
	wg.Wait()
	if w := time.Duration(worst.Load()); w > time.Second {
		t.Errorf("%d writes queued while another process held the lock: the last failed after %v (all after %v); want about the busy timeout, 200ms",
			n, w.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
}

// A write that panics with a query's rows left open, in a shared
// transaction: it alone fails; the others commit.
func TestPanicWithOpenRowsInSharedTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b := openTest(t)
		ctx := store.Deferrable(context.Background())
		for i := range 3 {
			if err := b.Write(ctx, insertScope(fmt.Sprint("seed", i))); err != nil {
				t.Fatal(err)
			}
		}
		errs := make(chan error, 3)
		go func() { errs <- b.Write(ctx, insertScope("x1")) }()
		synctest.Wait()
		go func() {
			errs <- b.Write(ctx, func(tx sqlstore.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO budget_scopes (scope, settled, reserved) VALUES ('p', 0, 0)`); err != nil {
					return err
				}
				rows, err := tx.Query(ctx, `SELECT scope FROM budget_scopes`)
				if err != nil {
					return err
				}
				_ = rows
				panic("boom")
			})
		}()
		synctest.Wait()
		go func() { errs <- b.Write(ctx, insertScope("x2")) }()
		got := map[bool]int{}
		for range 3 {
			got[(<-errs) != nil]++
		}
		var n int
		b.w.QueryRow(`SELECT count(*) FROM budget_scopes WHERE scope IN ('x1','x2','p')`).Scan(&n)
		if got[true] != 1 || n != 2 {
			t.Errorf("%d writes failed, %d of x1, x2, p stored; want 1 failed (the panic) and x1, x2 stored", got[true], n)
		}
	})
}

// Close with a lingering transaction and writes queued commits
// them at once and answers each exactly once; a canceled queued write is
// not run.
func TestCloseDuringLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, b := openTest(t)
		ctx := store.Deferrable(context.Background())
		start := time.Now()
		done := deferred(b, "d", 5)
		synctest.Wait() // lingering
		cctx, cancel := context.WithCancel(context.Background())
		entered, gate := make(chan struct{}), make(chan struct{})
		held := make(chan error, 1)
		go func() {
			held <- b.Write(ctx, func(tx sqlstore.Tx) error { close(entered); <-gate; return insertScope("h")(tx) })
		}()
		<-entered
		canceled := make(chan error, 1)
		go func() { canceled <- b.Write(store.Deferrable(cctx), insertScope("c")) }()
		synctest.Wait()
		cancel()
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		synctest.Wait()
		close(gate)
		for range 5 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		if err := <-held; err != nil {
			t.Error(err)
		}
		if err := <-canceled; !errors.Is(err, context.Canceled) {
			t.Errorf("canceled queued write: %v", err)
		}
		<-closed
		if w := time.Since(start); w != 0 {
			t.Errorf("Close waited %v", w)
		}
	})
}

// otherConn opens a connection to the file at path as another process
// would, with no busy timeout (it tries the write lock without waiting);
// it is closed at the test's end.
func otherConn(t *testing.T, path string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
