package run

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/internal/pgtest"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/postgres"
	"github.com/belay-run/belay/store/sqlite"
)

type sqlStore interface {
	Store
	store.Spans
	Close() error
}

func advStores(t *testing.T) map[string]sqlStore {
	out := map[string]sqlStore{}
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	out["sqlite"] = s
	if base, ok := pgtest.BaseURL(); ok {
		p, err := postgres.Open(context.Background(), pgtest.SchemaURL(t, base, "belay_review3"))
		if err != nil {
			t.Fatal(err)
		}
		out["postgres"] = p
	}
	return out
}

// Review finding (session 3): many concurrent Single runs (a few settled, a few failed, a few
// with a concurrent second call) over the SQL stores: every record ends,
// and the tenant's ledger equals the sum of the records' costs.
func TestReview3SingleRunsSQL(t *testing.T) {
	for name, st := range advStores(t) {
		t.Run(name, func(t *testing.T) {
			defer st.Close()
			m, err := NewManager(Config{Store: st, Pricing: testPricing(t), FirstStepInMemory: true, KillPoll: -1})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			const n = 60
			var wg sync.WaitGroup
			idsCh := make(chan string, n)
			for i := range n {
				wg.Go(func() {
					r, err := m.Start(ctx, Spec{Fresh: true, Single: true})
					if err != nil {
						t.Error(err)
						return
					}
					idsCh <- r.ID()
					a, err := r.Admit(ctx, modelStep(cents(10)))
					if err != nil {
						t.Error(err)
						return
					}
					if i%3 == 2 {
						if _, err := r.Admit(ctx, modelStep(cents(1))); err == nil {
							t.Error("second step admitted")
						}
					}
					switch i % 3 {
					case 0:
						err = a.Settle(ctx, usage(2, 1), Outcome{})
					case 1:
						err = a.Fail(ctx, errors.New("boom"))
					default:
						err = a.Settle(ctx, usage(1, 0), Outcome{Err: errors.New("cut")})
					}
					if err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			close(idsCh)
			if err := m.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			var sum budget.USD
			var started store.Run
			for id := range idsCh {
				rec, err := st.GetRun(ctx, id)
				if err != nil {
					t.Fatalf("run %s: %v", id, err)
				}
				if rec.Status == store.RunRunning || rec.Ended.IsZero() || rec.Turns != 1 {
					t.Errorf("run %s = %+v", id, rec)
				}
				b, _ := st.Balance(ctx, budget.RunScope(id))
				if b.Settled != rec.Cost || b.Reserved != 0 {
					t.Errorf("run %s: record cost %s, ledger %+v", id, rec.Cost, b)
				}
				sum = sum.Add(rec.Cost)
				started = rec
			}
			tb, _ := st.Balance(ctx, budget.TenantScope(DefaultTenant, "", started.Started))
			if tb.Settled != sum || tb.Reserved != 0 {
				t.Errorf("tenant ledger %+v; records sum %s", tb, sum)
			}
			if m.Live() != 0 {
				t.Errorf("%d live", m.Live())
			}
		})
	}
}
