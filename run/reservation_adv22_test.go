package run

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
)

// A run stopped softly (its turns used, or its money refused to another
// call) lets its calls in flight finish uncanceled, and charges them when
// they settle; meanwhile their reservations are renewed (Manager.renewOpen
// skips only drained runs), so a long call of such a run keeps its money
// past ReservationTTL. Before, a call of another run was admitted against
// the freed money 16 minutes in, and the tenant spent $1.60 of $1.00.
func TestAdv22_SoftStoppedRunsLiveCallKeepsItsReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := acmeFixture(t)
		ctx := context.Background()
		long := f.start(t, Spec{ID: "long", Tenant: "acme", Limits: store.Limits{MaxTurns: 1, Deadline: time.Hour}})
		a, err := long.Admit(ctx, modelStep(cents(80)))
		if err != nil {
			t.Fatal(err)
		}
		// The run's second call is refused for its turns: the run stops,
		// softly: the first call goes on.
		_, err = long.Admit(ctx, modelStep(cents(1)))
		wantReason(t, err, failure.MaxTurnsExceeded, failure.Fatal)
		if a.Context().Err() != nil {
			t.Fatal("a soft stop canceled the call in flight")
		}
		time.Sleep(16 * time.Minute) // the first call still streams (fake time)
		synctest.Wait()
		if a.Context().Err() != nil {
			t.Fatalf("the call was canceled meanwhile: %v", context.Cause(a.Context()))
		}
		other := f.start(t, Spec{ID: "other", Tenant: "acme", Limits: store.Limits{Deadline: time.Hour}})
		if b, err := other.Admit(ctx, modelStep(cents(80))); err == nil {
			_ = b.Settle(ctx, usage(80, 0), Outcome{})
			_ = a.Settle(ctx, usage(80, 0), Outcome{})
			bal := f.balance(t, budget.TenantScope("acme", budget.Month, time.Now()))
			t.Fatalf("a second run's 80¢ call was admitted while the stopped run's live call, 16 minutes in, still held 80¢ of the tenant's $1.00; "+
				"both settled, the tenant's balance is %+v (limit $1.00)", bal)
		}
		if err := a.Settle(ctx, usage(80, 0), Outcome{}); err != nil {
			t.Fatal(err)
		}
	})
}
