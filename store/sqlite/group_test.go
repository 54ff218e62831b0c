package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store/internal/sqlstore"
)

// openTest opens a store on a new file, closed at the test's end, and
// returns it with its backend.
func openTest(t *testing.T) (*Store, *backend) {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.Backend().(*backend)
}

// TestGroupCommitIsolatesFailures sends 64 concurrent two-reservation
// writes while the writer is held busy, so that they share transactions:
// every second one is refused by its second scope after its first scope
// was updated inside the batch. The refused writes must leave nothing
// behind (their savepoints rolled back), the others must all commit, and
// fewer transactions than writes must have been committed.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	ctx := context.Background()
	s, b := openTest(t)

	if err := s.Reserve(ctx, budget.Reservation{ID: "full", Owner: "p", Amount: budget.Micros(1_500_000),
		Scopes: []budget.ScopeLimit{{Scope: "run:full", Limit: budget.Dollars(2)}}}); err != nil {
		t.Fatal(err)
	}
	// Hold the writer inside a write until every goroutine has queued.
	const n = 64
	before := b.ckpt.commits.Load()
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- b.Write(ctx, func(sqlstore.Tx) error { close(holding); <-release; return nil })
	}()
	<-holding
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			scope := budget.Scope(fmt.Sprintf("run:%d", i))
			if i%2 == 1 {
				scope = "run:full" // $1.50 of $2 is held: $1 more is refused inside the transaction
			}
			errs[i] = s.ReserveAll(ctx, []budget.Reservation{
				{ID: fmt.Sprintf("t%d", i), Owner: "p", Amount: 1,
					Scopes: []budget.ScopeLimit{{Scope: "turns:shared", Limit: 1000}}},
				{ID: fmt.Sprintf("m%d", i), Owner: "p", Amount: budget.Dollars(1),
					Scopes: []budget.ScopeLimit{{Scope: scope, Limit: budget.Dollars(2)}}},
			})
		})
	}
	for len(b.gw.queue) < n {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if i%2 == 0 && err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if i%2 == 1 && !errors.Is(err, budget.ErrExceeded) {
			t.Fatalf("write %d: got %v, want ErrExceeded", i, err)
		}
	}
	bal, err := s.Balance(ctx, "turns:shared")
	if err != nil {
		t.Fatal(err)
	}
	if bal.Reserved != n/2 {
		t.Fatalf("turn scope holds %v, want %d (the refused writes' turns rolled back)", bal.Reserved, n/2)
	}
	if commits := b.ckpt.commits.Load() - before; commits != 2 {
		t.Fatalf("%d commits for the held write and %d queued ones, want 2 (one group commit)", commits, n)
	}
}

// A write whose caller's context ends while its statements run must not
// fail the other writes of its batch: SQLite answers an interrupted
// statement by rolling back the whole transaction, so batched statements
// run under the writer's context, not the caller's.
func TestGroupCommitCallerCancelMidWrite(t *testing.T) {
	ctx := context.Background()
	s, b := openTest(t)

	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- b.Write(ctx, func(sqlstore.Tx) error { close(holding); <-release; return nil })
	}()
	<-holding
	errA := make(chan error, 1)
	go func() {
		errA <- s.Reserve(ctx, budget.Reservation{ID: "a", Owner: "p", Amount: budget.Dollars(1),
			Scopes: []budget.ScopeLimit{{Scope: "run:a", Limit: budget.Dollars(2)}}})
	}()
	for len(b.gw.queue) < 1 {
		runtime.Gosched()
	}
	// B's caller goes away once B has started: its statement then runs
	// with a context that is done.
	ctxB, cancelB := context.WithCancel(ctx)
	errB := make(chan error, 1)
	go func() {
		errB <- b.Write(ctxB, func(tx sqlstore.Tx) error {
			cancelB()
			_, err := tx.Exec(ctxB, `INSERT INTO budget_scopes (scope, settled, reserved) VALUES ('run:b', 0, 0)`)
			return err
		})
	}()
	for len(b.gw.queue) < 2 {
		runtime.Gosched()
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-errB; err != nil {
		t.Fatalf("B, started before its caller left: %v (a write that started finishes)", err)
	}
	if err := <-errA; err != nil {
		t.Fatalf("A failed because a batch-mate's caller left: %v", err)
	}
	bal, err := s.Balance(ctx, "run:a")
	if err != nil || bal.Reserved != budget.Dollars(1) {
		t.Fatalf("run:a %+v, %v: want $1 reserved", bal, err)
	}
}
