package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// stuckStore's ClearKill ignores its context and returns only when release
// is closed, as SQLite's busy handler waits out its own timeout on a file
// that another process holds locked.
type stuckStore struct {
	store.Store
	release chan struct{}
	calls   atomic.Int32
}

func (s *stuckStore) ClearKill(ctx context.Context, target store.KillTarget, name string) error {
	s.calls.Add(1)
	<-s.release
	return s.Store.ClearKill(ctx, target, name)
}

// /readyz answers within its 2s bound even when the store does not heed
// its context, and a probe still stuck is shared, not repeated.
func TestReadyzBoundedByTwoSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config.Default()
		st := &stuckStore{Store: memstore.New(), release: make(chan struct{})}
		stack, err := gateway.Build(t.Context(), cfg, gateway.Options{Store: st, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer stack.Close(context.Background())
		h := stack.Server.Handler()
		ready := func() (int, time.Duration) {
			start := time.Now()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
			return rec.Code, time.Since(start)
		}
		for i := range 2 {
			if code, took := ready(); code != http.StatusServiceUnavailable || took != 2*time.Second {
				t.Fatalf("readyz %d with the store stuck: %d after %v; want 503 after 2s", i, code, took)
			}
		}
		if n := st.calls.Load(); n != 1 {
			t.Errorf("the stuck store was probed %d times, want once", n)
		}
		close(st.release)
		synctest.Wait()
		if code, took := ready(); code != http.StatusOK || took != 0 {
			t.Fatalf("readyz after the store answered: %d after %v; want 200 at once", code, took)
		}
	})
}
