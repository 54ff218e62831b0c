package sqlite

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/store"
)

// deferred starts n deferrable writes and returns the channel their
// results come on.
func deferred(b *backend, prefix string, n int) chan error {
	out := make(chan error, n)
	for i := range n {
		go func() { out <- b.Write(store.Deferrable(context.Background()), insertScope(fmt.Sprint(prefix, i))) }()
	}
	return out
}

// A deferrable write waits linger for others to share its transaction;
// the writes that come meanwhile go in the same commit.
func TestDeferrableWritesLingerTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b := openTest(t)
		start := time.Now()
		commits := b.ckpt.commits.Load()
		done := deferred(b, "d", 10)
		for range 10 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if waited := time.Since(start); waited != linger {
			t.Errorf("deferrable writes answered after %v, want the linger, %v", waited, linger)
		}
		if n := b.ckpt.commits.Load() - commits; n != 1 {
			t.Errorf("10 deferrable writes took %d commits, want 1", n)
		}
	})
}

// Hurry ends the linger: a reader about to wait for the writes (Run.Flush)
// does not wait for it.
func TestHurryEndsTheLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, b := openTest(t)
		start := time.Now()
		done := deferred(b, "d", 3)
		synctest.Wait() // all three queued; the writer lingers
		select {
		case err := <-done:
			t.Fatalf("a deferrable write was answered (%v) before its linger or a Hurry", err)
		default:
		}
		s.Hurry()
		for range 3 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("writes answered %v after Hurry's call, want at once", waited)
		}
	})
}

// A full transaction does not wait: under a load that runs lingerBatch
// writes within the linger, deferrable writes are committed as fast as
// they come. (openTest, called inside the bubble, runs the writer on the
// bubble's clock.)
func TestFullBatchEndsTheLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b := openTest(t)
		start := time.Now()
		const n = 3 * lingerBatch // whole transactions: none waits its linger
		done := deferred(b, "d", n)
		for range n {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if waited := time.Since(start); waited >= linger {
			t.Errorf("%d deferrable writes took %v, want less than one linger (%v)", n, waited, linger)
		}
	})
}
