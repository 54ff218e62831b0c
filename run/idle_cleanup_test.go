package run

import (
	"context"
	"runtime"
	"testing"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// An ended run leaves the live table for the idle one, held weakly; once
// nothing else holds it and it is collected, its idle entry goes too (the
// cleanup keepIdle registers), also for a run revived by Get and evicted
// again (one cleanup per run).
func TestIdleEntryGoesWhenRunIsCollected(t *testing.T) {
	ctx := context.Background()
	m, err := NewManager(Config{Store: memstore.New(), KillPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := make([]string, 0, 2)
	for range 2 {
		r, err := m.Start(ctx, Spec{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID())
	}
	// The second run is revived (Get) and let go again.
	if _, err := m.Get(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	idle := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		for _, id := range ids {
			if _, ok := m.idle[id]; ok {
				n++
			}
		}
		return n
	}
	for i := 0; i < 1000 && idle() > 0; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := idle(); n != 0 {
		t.Fatalf("%d of 2 collected runs still have an idle entry", n)
	}
}
