package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store/internal/sqlstore"
)

// adv20TwoStores opens two stores on one new file (two processes sharing
// it), each with the busy timeout busy; it returns the file's path.
func adv20TwoStores(t *testing.T, busy time.Duration) (string, *Store, *Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "belay.db")
	var st [2]*Store
	for i := range st {
		s, err := OpenOptions(context.Background(), path, Options{BusyTimeout: busy})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		st[i] = s
	}
	return path, st[0], st[1]
}

// adv20Seed stores scopes s0..s(n-1).
func adv20Seed(t *testing.T, b *backend, n int) {
	t.Helper()
	for i := range n {
		if err := b.Write(context.Background(), insertScope(fmt.Sprint("s", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// A write that leaves a Query's rows open (a panic mid-iteration, or a
// plain mistake) must not affect later transactions: database/sql's Tx
// closes open rows at Commit/Rollback. The writer's own connection keeps
// the cached statement mid-step, so the next query of the same text in a
// later transaction continues where the abandoned one stopped.
func TestAdv20OpenRowsLeakIntoNextTransaction(t *testing.T) {
	ctx := context.Background()
	_, b := openTest(t)
	adv20Seed(t, b, 3)
	const q = `SELECT scope FROM budget_scopes WHERE scope LIKE 's%' ORDER BY scope`
	err := b.Write(ctx, func(tx sqlstore.Tx) error {
		rows, err := tx.Query(ctx, q)
		if err != nil {
			return err
		}
		rows.Next() // read one row, never close
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = b.Write(ctx, func(tx sqlstore.Tx) error {
		got = got[:0]
		rows, err := tx.Query(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			got = append(got, s)
		}
		return rows.Err()
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("second transaction's query: %v, %v; want [s0 s1 s2]", got, err)
	}
}

// Same leak, other consequence: the statement left mid-step keeps the
// writer connection's WAL read snapshot after the commit. Once another
// connection (a second process on the file) commits, every later
// BEGIN IMMEDIATE of this writer fails with SQLITE_BUSY(_SNAPSHOT): the
// store can no longer write at all.
func TestAdv20OpenRowsWedgeWriterAfterOtherProcessWrites(t *testing.T) {
	ctx := context.Background()
	_, a, other := adv20TwoStores(t, 50*time.Millisecond)
	var err error
	adv20Seed(t, a.b, 3)
	err = a.b.Write(ctx, func(tx sqlstore.Tx) error {
		rows, err := tx.Query(ctx, `SELECT scope FROM budget_scopes ORDER BY scope`)
		if err != nil {
			return err
		}
		rows.Next()
		return nil // rows left open
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.b.Write(ctx, insertScope("from-other")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := a.b.Write(ctx, insertScope(fmt.Sprint("after", i))); err != nil {
			t.Fatalf("write %d after another process wrote: %v (ErrLocked: %v)", i, err, errors.Is(err, ErrLocked))
		}
	}
}

// A store method on another process's store while this writer holds the
// lock fails with ErrLocked, and the writer is fine afterwards.
func TestAdv20SecondStoreLockedThenRecovers(t *testing.T) {
	ctx := context.Background()
	path, a, other := adv20TwoStores(t, 20*time.Millisecond)
	var err error
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.b.Write(ctx, func(tx sqlstore.Tx) error {
			if err := insertScope("held")(tx); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	err = other.Reserve(ctx, budget.Reservation{ID: "r", Amount: 1, Scopes: []budget.ScopeLimit{{Scope: "run:x"}}})
	if !errors.Is(err, ErrLocked) {
		t.Errorf("Reserve while the other store holds the lock: %v; want ErrLocked", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The lock is free once a's write returned, but a's connection may
	// still be finishing its commit (a WAL checkpoint, say) when the
	// machine is loaded: each try waits the 20 ms busy timeout, and a few
	// tries in a row must not all fail (CI, session 26, saw one SQLITE_BUSY).
	for try := 1; ; try++ {
		err := other.Reserve(ctx, budget.Reservation{ID: "r", Amount: 1, Scopes: []budget.ScopeLimit{{Scope: "run:x"}}})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrLocked) || try == 50 {
			t.Fatalf("Reserve after the lock ended, try %d: %v", try, err)
		}
	}
	if err := other.Settle(ctx, "r", 1); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if err := a.b.Write(ctx, insertScope("after")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	other.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bal, err := s.Balance(ctx, "run:x")
	if err != nil || bal.Settled != 1 {
		t.Fatalf("after reopen: %+v, %v", bal, err)
	}
}

// The same wedge from a write that panics with its rows open (the case
// TestPanicWithOpenRowsInSharedTransaction covers for the batch's own
// outcome): the panic is recovered and the transaction rolled back, but
// the statement stays mid-step on the writer's connection.
func TestAdv20PanicWithOpenRowsWedgesWriter(t *testing.T) {
	ctx := context.Background()
	_, a, other := adv20TwoStores(t, 50*time.Millisecond)
	var err error
	adv20Seed(t, a.b, 3)
	err = a.b.Write(ctx, func(tx sqlstore.Tx) error {
		rows, err := tx.Query(ctx, `SELECT scope FROM budget_scopes`)
		if err != nil {
			return err
		}
		rows.Next()
		panic("boom")
	})
	if err == nil {
		t.Fatal("panicking write succeeded")
	}
	if err := other.b.Write(ctx, insertScope("from-other")); err != nil {
		t.Fatal(err)
	}
	// Through the store's API: a Reserve on the first store.
	for i := range 3 {
		id := fmt.Sprint("r", i)
		if err := a.Reserve(ctx, budget.Reservation{ID: id, Amount: 1, Scopes: []budget.ScopeLimit{{Scope: "run:x"}}}); err != nil {
			t.Fatalf("Reserve %d after the panic and another process's write: %v", i, err)
		}
	}
}

// A write's unclosed rows of a RETURNING statement (a pending write
// statement) make the COMMIT fail with SQLITE_BUSY, which leaves the
// transaction open on the writer's connection; the writer drops it
// (t.tx = nil) and every later BEGIN fails ("cannot start a transaction
// within a transaction") while the file's write lock stays held.
func TestAdv20OpenReturningRowsWedgeWriter(t *testing.T) {
	ctx := context.Background()
	_, b := openTest(t)
	adv20Seed(t, b, 3)
	err := b.Write(ctx, func(tx sqlstore.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM budget_scopes WHERE scope LIKE 's%' RETURNING scope`)
		if err != nil {
			return err
		}
		rows.Next() // one of three rows; never closed
		return nil
	})
	t.Logf("write with open RETURNING rows: %v", err)
	for i := range 3 {
		if err := b.Write(ctx, insertScope(fmt.Sprint("after", i))); err != nil {
			t.Fatalf("write %d after: %v", i, err)
		}
	}
}
