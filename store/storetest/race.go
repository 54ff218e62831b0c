package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
)

// Race parameters: 64 goroutines, reservations of 1..100 units, settled at
// a random amount up to the reservation, against a limit of 5 full rounds.
const (
	raceWorkers = 64
	raceMax     = 100
	raceLimit   = budget.USD(raceWorkers * raceMax * 5)
)

// ReserveRace is the ledger's concurrency guarantee: 64 goroutines, the
// i-th using handle(i) (one store, or several stores open on one
// database), each reserving a random amount and settling a random amount
// up to it until it is refused, never settle more than the limit in total,
// and leave it nearly reached (within what the 64 goroutines can hold at
// once). Randomness is seeded per goroutine.
func ReserveRace(t *testing.T, handle func(i int) store.Store) {
	ctx := context.Background()
	const sc = budget.Scope("tenant:race:2026-11")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		settled budget.USD
		ops     int
		errs    []error
	)
	for w := range raceWorkers {
		wg.Go(func() {
			s := handle(w)
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			var mine budget.USD
			n := 0
			defer func() {
				mu.Lock()
				settled += mine
				ops += n
				mu.Unlock()
			}()
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%02d-%05d", w, i)
				amount := budget.USD(1 + rng.IntN(raceMax))
				err := s.Reserve(ctx, budget.Reservation{ID: id, Owner: "race", Amount: amount,
					Scopes: []budget.ScopeLimit{{Scope: sc, Limit: raceLimit}}, ExpiresAt: t0.Add(time.Hour)})
				if errors.Is(err, budget.ErrExceeded) {
					return
				}
				if err == nil {
					actual := amount/2 + budget.USD(rng.IntN(int(amount/2)+1))
					if err = s.Settle(ctx, id, actual); err == nil {
						mine += actual
						n++
						continue
					}
				}
				mu.Lock()
				errs = append(errs, fmt.Errorf("worker %d op %s: %w", w, id, err))
				mu.Unlock()
				return
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	b, err := handle(0).Balance(ctx, sc)
	must(t, err)
	t.Logf("%d workers settled %d of %d units in %d reserve+settle pairs", raceWorkers, int64(b.Settled), int64(raceLimit), ops)
	if b.Settled != settled || b.Reserved != 0 {
		t.Errorf("Balance = settled %d reserved %d; the workers settled %d and reserve nothing now",
			b.Settled, b.Reserved, settled)
	}
	if settled > raceLimit {
		t.Errorf("settled %d > limit %d", settled, raceLimit)
	}
	// A worker stops when refused; at that moment at most the other 63
	// hold reservations of at most raceMax each, so the spend is near.
	if floor := raceLimit - raceWorkers*raceMax; settled < floor {
		t.Errorf("settled %d < %d: refusals came too early", settled, floor)
	}
}

func testIdempotencyRace(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 32
	claims := make([]store.Claim, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			claims[i], errs[i] = s.Claim(ctx, "refund-42", fmt.Sprintf("owner-%02d", i), time.Minute, t0)
		})
	}
	wg.Wait()
	winners := 0
	var winner string
	for i, c := range claims {
		must(t, errs[i])
		if c.State == store.ClaimNew {
			winners++
			winner = c.Owner
		}
	}
	if winners != 1 {
		t.Fatalf("%d concurrent claims won, want exactly 1", winners)
	}
	for i, c := range claims {
		if c.State != store.ClaimNew && (c.State != store.ClaimInFlight || c.Owner != winner) {
			t.Errorf("claim %d = %+v, want in_flight held by %s", i, c, winner)
		}
	}
}
