package run

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// slowSettle is a store whose ledger settles take 40 ms, as a loaded
// store's writes do: a settle written in the background lands after the
// answer, and after the next call's admission if that comes at once.
type slowSettle struct{ *memstore.Store }

func (s slowSettle) Settle(ctx context.Context, id string, actual budget.USD) error {
	time.Sleep(40 * time.Millisecond)
	return s.Store.Settle(ctx, id, actual)
}

// A run's next call, made as soon as the last one is answered, fits its
// cost limit by what was spent, not by the estimate a settle not yet
// written still holds: in this process (its settles are waited for) and
// in another (the refusal is asked again while holds clear) (adversarial
// review, session 26: runs were stopped budget_exceeded with 1% of their
// limit spent).
func TestNextCallFitsOnceHoldsClear(t *testing.T) {
	for _, other := range []bool{false, true} {
		name := "same process"
		if other {
			name = "another process"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := slowSettle{memstore.New()}
				f := newFixture(t, func(c *Config) { c.Store = st })
				ctx := context.Background()
				r := f.start(t, Spec{ID: "holds", Limits: store.Limits{MaxCost: cents(5)}})
				a, err := r.Admit(ctx, modelStep(cents(3)))
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Settle(ctx, usage(1, 0), Outcome{}); err != nil { // 1¢ of the 3 held
					t.Fatal(err)
				}
				next := r
				if other {
					m, err := NewManager(Config{Store: st.Store, Pricing: testPricing(t), Sink: f.sink, Owner: "second"})
					if err != nil {
						t.Fatal(err)
					}
					defer m.Close()
					if next, err = m.Get(ctx, "holds"); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				b, err := next.Admit(ctx, modelStep(cents(3)))
				if err != nil {
					t.Fatalf("the next call: %v", err)
				}
				if d := time.Since(start); d > 100*time.Millisecond {
					t.Errorf("admitted after %v; want it as soon as the settle landed (40ms)", d)
				}
				if err := b.Settle(ctx, usage(1, 0), Outcome{}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			})
		})
	}
}

// A refusal that holds cannot clear (what is settled already leaves no
// room) comes at once, without waiting.
func TestRefusalBySpendIsImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, nil)
		ctx := context.Background()
		r := f.start(t, Spec{ID: "spent", Limits: store.Limits{MaxCost: cents(5)}})
		a, err := r.Admit(ctx, modelStep(cents(4)))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Settle(ctx, usage(4, 0), Outcome{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		if _, err := r.Admit(ctx, modelStep(cents(2))); err == nil {
			t.Fatal("admitted 2¢ with 4¢ of 5¢ spent")
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the refusal came after %v; want it at once", d)
		}
	})
}
