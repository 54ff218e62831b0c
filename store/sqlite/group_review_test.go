package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/sqlstore"
)

func insertScope(scope string) func(sqlstore.Tx) error {
	return func(tx sqlstore.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO budget_scopes (scope, settled, reserved) VALUES ($1, 0, 0)`, scope)
		return err
	}
}

// Closing the store while request-path and deferrable writes are queued
// behind a busy writer: every queued write runs and is answered; failing
// and panicking writes fail alone; batches above maxBatch are split.
func TestReview3bCloseWithQueuedWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	b := s.Backend().(*backend)
	// warm up: get the insert statement prepared
	for i := range 3 {
		if err := b.Write(store.Deferrable(ctx), insertScope(fmt.Sprint("warm", i))); err != nil {
			t.Fatal(err)
		}
	}
	holding, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() { held <- b.Write(ctx, func(sqlstore.Tx) error { close(holding); <-release; return nil }) }()
	<-holding
	const nl, nq = 400, 50
	errs := make([]error, nl+nq)
	var wg sync.WaitGroup
	for i := range nl {
		wg.Go(func() {
			var fn func(sqlstore.Tx) error
			switch {
			case i%50 == 7:
				fn = func(sqlstore.Tx) error { panic("boom") }
			case i%10 == 3:
				fn = insertScope("warm0") // duplicate key
			default:
				fn = insertScope(fmt.Sprint("l", i))
			}
			errs[i] = b.Write(store.Deferrable(ctx), fn)
		})
	}
	for len(b.gw.lazy) < nl {
		runtime.Gosched()
	}
	for i := range nq {
		wg.Go(func() { errs[nl+i] = b.Write(ctx, insertScope(fmt.Sprint("q", i))) })
	}
	for len(b.gw.queue) < nq {
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	for {
		b.gw.mu.RLock()
		c := b.gw.closed
		b.gw.mu.RUnlock()
		if c {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	want := 3
	for i, err := range errs {
		bad := i < nl && (i%50 == 7 || i%10 == 3)
		if bad != (err != nil) {
			t.Errorf("write %d: %v", i, err)
		}
		if !bad {
			want++
		}
	}
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var n int
	s2.Backend().(*backend).w.QueryRow(`SELECT count(*) FROM budget_scopes`).Scan(&n)
	if n != want {
		t.Errorf("%d rows committed, want %d", n, want)
	}
}

// A steady stream of request-path writes from more callers than maxBatch
// keeps the request queue non-empty whenever the writer looks at it: a
// deferrable write must still be answered while that load lasts.
func TestReview3bDeferrableNotStarved(t *testing.T) {
	ctx := context.Background()
	_, b := openTest(t)
	// The writers write until the deferrable write is answered (a fixed
	// count per writer could all be answered before the queue ever held
	// more than maxBatch, and the wait for it below would never end).
	const writers, bound = 200, 10000
	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := b.Write(ctx, func(tx sqlstore.Tx) error {
					_, err := tx.Exec(ctx, `INSERT INTO budget_scopes (scope, settled, reserved) VALUES ($1, 0, 0)
						ON CONFLICT (scope) DO UPDATE SET settled = settled + 1`, fmt.Sprint("s", w%10))
					return err
				}); err != nil {
					t.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	for len(b.gw.queue) <= maxBatch {
		runtime.Gosched()
	}
	start := done.Load()
	if err := b.Write(store.Deferrable(ctx), insertScope("deferred")); err != nil {
		t.Fatal(err)
	}
	waited := done.Load() - start
	close(stop)
	wg.Wait()
	if waited > bound {
		t.Errorf("deferrable write answered after %d request-path writes (more than %d): starved", waited, bound)
	}
}
