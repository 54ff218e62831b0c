package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
)

func wantBalance(t *testing.T, s store.Store, sc budget.Scope, settled, reserved budget.USD) {
	t.Helper()
	b, err := s.Balance(context.Background(), sc)
	must(t, err)
	if b != (budget.Balance{Scope: sc, Settled: settled, Reserved: reserved}) {
		t.Errorf("Balance(%s) = settled %v reserved %v, want settled %v reserved %v",
			sc, b.Settled, b.Reserved, settled, reserved)
	}
}

func res(id string, amount budget.USD, scopes ...budget.ScopeLimit) budget.Reservation {
	return budget.Reservation{ID: id, Owner: "proc-1", Scopes: scopes, Amount: amount, ExpiresAt: at(time.Minute)}
}

func lim(s budget.Scope, l budget.USD) budget.ScopeLimit {
	return budget.ScopeLimit{Scope: s, Limit: l}
}

func testLedger(t *testing.T, s store.Store) {
	ctx := context.Background()
	const run = budget.Scope("run:r1")
	limit := budget.Dollars(1)
	wantBalance(t, s, run, 0, 0)

	must(t, s.Reserve(ctx, res("a", budget.Micros(600_000), lim(run, limit))))
	wantBalance(t, s, run, 0, budget.Micros(600_000))
	// 0.60 + 0.50 > 1.00: refused, nothing changes.
	if err := s.Reserve(ctx, res("b", budget.Micros(500_000), lim(run, limit))); !errors.Is(err, budget.ErrExceeded) {
		t.Fatalf("Reserve over the limit: got %v, want ErrExceeded", err)
	}
	wantBalance(t, s, run, 0, budget.Micros(600_000))
	// Exactly up to the limit fits.
	must(t, s.Reserve(ctx, res("b", budget.Micros(400_000), lim(run, limit))))
	wantBalance(t, s, run, 0, limit)

	// Settle below the reservation frees the difference.
	must(t, s.Settle(ctx, "a", budget.Micros(250_000)))
	wantBalance(t, s, run, budget.Micros(250_000), budget.Micros(400_000))
	// Settle above the reservation is recorded as is (the spend happened).
	must(t, s.Settle(ctx, "b", budget.Micros(900_000)))
	wantBalance(t, s, run, budget.Micros(1_150_000), 0)
	// Now over the limit: even a reservation of zero is refused
	// (Settled+Reserved+0 passes the limit).
	for _, amount := range []budget.USD{1, 0} {
		if err := s.Reserve(ctx, res("c", amount, lim(run, limit))); !errors.Is(err, budget.ErrExceeded) {
			t.Errorf("Reserve of %v in an overspent scope: got %v, want ErrExceeded", amount, err)
		}
	}
	// In a scope with room, zero fits.
	must(t, s.Reserve(ctx, res("zero", 0, lim("run:other", limit))))
	must(t, s.Release(ctx, "zero"))

	// Release gives the money back without spending.
	const tenant = budget.Scope("tenant:acme:2026-11")
	must(t, s.Reserve(ctx, res("d", budget.Dollars(3), lim(tenant, budget.Dollars(5)))))
	must(t, s.Release(ctx, "d"))
	wantBalance(t, s, tenant, 0, 0)

	// A limit of 0 or less is unlimited, and the spend is still recorded.
	const free = budget.Scope("run:free")
	must(t, s.Reserve(ctx, res("e", budget.Dollars(1_000_000), lim(free, 0))))
	must(t, s.Reserve(ctx, res("f", budget.Dollars(1_000_000), lim(free, -1))))
	must(t, s.Settle(ctx, "e", budget.Dollars(7)))
	wantBalance(t, s, free, budget.Dollars(7), budget.Dollars(1_000_000))

	// An amount above the limit of a scope never used is refused and does
	// not create the scope.
	const fresh = budget.Scope("run:fresh")
	if err := s.Reserve(ctx, res("g", budget.Dollars(2), lim(fresh, budget.Dollars(1)))); !errors.Is(err, budget.ErrExceeded) {
		t.Errorf("Reserve above the limit of a new scope: got %v, want ErrExceeded", err)
	}
	wantBalance(t, s, fresh, 0, 0)
}

func testLedgerMultiScope(t *testing.T, s store.Store) {
	ctx := context.Background()
	run, tenant := budget.Scope("run:r1"), budget.Scope("tenant:acme:2026-11")
	both := func(id string, amount budget.USD) budget.Reservation {
		return res(id, amount, lim(tenant, budget.Dollars(10)), lim(run, budget.Dollars(2)))
	}
	must(t, s.Reserve(ctx, both("a", budget.Dollars(1))))
	wantBalance(t, s, run, 0, budget.Dollars(1))
	wantBalance(t, s, tenant, 0, budget.Dollars(1))
	// Fits the tenant, not the run: held in neither.
	if err := s.Reserve(ctx, both("b", budget.Dollars(3)/2)); !errors.Is(err, budget.ErrExceeded) {
		t.Fatalf("Reserve that one scope refuses: got %v, want ErrExceeded", err)
	}
	wantBalance(t, s, run, 0, budget.Dollars(1))
	wantBalance(t, s, tenant, 0, budget.Dollars(1))
	// Another run of the tenant fills the tenant scope; then the first run
	// is refused by the tenant although its own scope has room.
	must(t, s.Reserve(ctx, res("c", budget.Dollars(9), lim(tenant, budget.Dollars(10)), lim("run:r2", 0))))
	if err := s.Reserve(ctx, both("d", budget.Micros(500_000))); !errors.Is(err, budget.ErrExceeded) {
		t.Fatalf("Reserve refused by the second scope: got %v, want ErrExceeded", err)
	}
	wantBalance(t, s, run, 0, budget.Dollars(1))
	must(t, s.Settle(ctx, "a", budget.Micros(500_000)))
	wantBalance(t, s, run, budget.Micros(500_000), 0)
	wantBalance(t, s, tenant, budget.Micros(500_000), budget.Dollars(9))
	wantBalance(t, s, "run:r2", 0, budget.Dollars(9))
}

func testLedgerExpiry(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sc = budget.Scope("run:r1")
	for i, exp := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute} {
		r := res(string(rune('a'+i)), budget.Dollars(1), lim(sc, budget.Dollars(10)))
		r.ExpiresAt = at(exp)
		must(t, s.Reserve(ctx, r))
	}
	never := res("never", budget.Dollars(1), lim(sc, budget.Dollars(10)))
	never.ExpiresAt = time.Time{}
	must(t, s.Reserve(ctx, never))

	n, err := s.ExpireReservations(ctx, at(time.Minute)) // "before now": a expires at exactly now, stays
	must(t, err)
	if n != 0 {
		t.Errorf("ExpireReservations at the expiry instant released %d, want 0", n)
	}
	n, err = s.ExpireReservations(ctx, at(2*time.Minute+time.Nanosecond))
	must(t, err)
	if n != 2 {
		t.Errorf("ExpireReservations released %d, want 2", n)
	}
	wantBalance(t, s, sc, 0, budget.Dollars(2))
	if err := s.Settle(ctx, "a", budget.Dollars(1)); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Errorf("Settle of an expired reservation: got %v, want ErrUnknownReservation", err)
	}
	n, err = s.ExpireReservations(ctx, at(24*time.Hour))
	must(t, err)
	if n != 1 {
		t.Errorf("ExpireReservations released %d, want 1 (the one without ExpiresAt stays)", n)
	}
	must(t, s.Settle(ctx, "never", budget.Dollars(1)))
	wantBalance(t, s, sc, budget.Dollars(1), 0)
}

// testLedgerRenew: a renewed reservation outlives its first expiry; ids
// not open (unknown, settled) are skipped without an error.
func testLedgerRenew(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sc = budget.Scope("run:r1")
	for _, id := range []string{"live", "done"} {
		r := res(id, budget.Dollars(1), lim(sc, budget.Dollars(10)))
		r.ExpiresAt = at(time.Minute)
		must(t, s.Reserve(ctx, r))
	}
	must(t, s.Settle(ctx, "done", budget.Dollars(1)))
	must(t, s.Renew(ctx, []string{"live", "done", "ghost"}, at(time.Hour)))
	must(t, s.Renew(ctx, nil, at(time.Hour)))
	n, err := s.ExpireReservations(ctx, at(30*time.Minute))
	must(t, err)
	if n != 0 {
		t.Errorf("ExpireReservations released %d renewed reservations, want 0", n)
	}
	wantBalance(t, s, sc, budget.Dollars(1), budget.Dollars(1))
	n, err = s.ExpireReservations(ctx, at(2*time.Hour))
	must(t, err)
	if n != 1 {
		t.Errorf("ExpireReservations past the renewed expiry released %d, want 1", n)
	}
	wantBalance(t, s, sc, budget.Dollars(1), 0)
}

func testLedgerErrors(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sc = budget.Scope("run:r1")
	if err := s.Settle(ctx, "ghost", 1); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Errorf("Settle of an unknown id: got %v, want ErrUnknownReservation", err)
	}
	if err := s.Release(ctx, "ghost"); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Errorf("Release of an unknown id: got %v, want ErrUnknownReservation", err)
	}
	must(t, s.Reserve(ctx, res("a", 10, lim(sc, 100))))
	if err := s.Reserve(ctx, res("a", 10, lim(sc, 100))); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Reserve of an open id: got %v, want ErrConflict", err)
	}
	must(t, s.Settle(ctx, "a", 10))
	if err := s.Settle(ctx, "a", 10); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Errorf("second Settle: got %v, want ErrUnknownReservation", err)
	}
	if err := s.Release(ctx, "a"); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Errorf("Release after Settle: got %v, want ErrUnknownReservation", err)
	}
	if err := s.Reserve(ctx, res("a", 10, lim(sc, 100))); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Reserve of a settled id: got %v, want ErrConflict", err)
	}
	wantBalance(t, s, sc, 10, 0)
	for name, r := range map[string]budget.Reservation{
		"negative amount": res("n", -1, lim(sc, 100)),
		"empty id":        res("", 1, lim(sc, 100)),
		"repeated scope":  res("rep", 1, lim(sc, 100), lim(sc, 50)),
		"empty scope":     res("es", 1, lim("", 100)),
	} {
		if err := s.Reserve(ctx, r); err == nil || errors.Is(err, budget.ErrExceeded) {
			t.Errorf("Reserve with %s: got %v, want an argument error", name, err)
		}
	}
	must(t, s.Reserve(ctx, res("neg", 10, lim(sc, 100))))
	if err := s.Settle(ctx, "neg", -5); err == nil {
		t.Error("Settle with a negative amount: nil error")
	}
	wantBalance(t, s, sc, 10, 10)
}

func testAlerts(t *testing.T, s store.Store) {
	ctx := context.Background()
	check := func(sc budget.Scope, th float64, want bool) {
		t.Helper()
		first, err := s.MarkAlert(ctx, sc, th)
		must(t, err)
		if first != want {
			t.Errorf("MarkAlert(%s, %v) = %v, want %v", sc, th, first, want)
		}
	}
	check("tenant:acme:2026-11", 0.8, true)
	check("tenant:acme:2026-11", 0.8, false)
	check("tenant:acme:2026-11", 0.95, true)
	check("tenant:acme:2026-12", 0.8, true)
	check("tenant:acme:2026-11", 0.8, false)
}

// testLedgerBatch checks budget.BatchLedger.ReserveAll on stores that
// implement it: all reservations are held or none, and a refusal names the
// reservation and scope that refused.
func testLedgerBatch(t *testing.T, s store.Store) {
	bl, ok := s.(budget.BatchLedger)
	if !ok {
		t.Skip("the store holds one reservation per write (no budget.BatchLedger)")
	}
	ctx := context.Background()
	turns, run := budget.Scope("turns:r1"), budget.Scope("run:r1")
	turn := func(id string) budget.Reservation {
		return budget.Reservation{ID: id, Owner: "proc-1", Scopes: []budget.ScopeLimit{lim(turns, 2)}, Amount: 1}
	}
	must(t, bl.ReserveAll(ctx, []budget.Reservation{turn("t1"), res("m1", budget.Dollars(1), lim(run, budget.Dollars(2)))}))
	wantBalance(t, s, turns, 0, 1)
	wantBalance(t, s, run, 0, budget.Dollars(1))
	// The turn fits, the money does not: neither is held.
	err := bl.ReserveAll(ctx, []budget.Reservation{turn("t2"), res("m2", budget.Dollars(3)/2, lim(run, budget.Dollars(2)))})
	ee, ok := errors.AsType[*budget.ExceededError](err)
	if !errors.Is(err, budget.ErrExceeded) || !ok || ee.ID != "m2" || ee.Scope != run {
		t.Fatalf("ReserveAll refused by the second reservation: got %v, want ExceededError for m2 in %s", err, run)
	}
	wantBalance(t, s, turns, 0, 1)
	wantBalance(t, s, run, 0, budget.Dollars(1))
	// An id used before makes the whole batch a conflict, holding nothing.
	err = bl.ReserveAll(ctx, []budget.Reservation{turn("t3"), res("m1", 1, lim(run, budget.Dollars(2)))})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReserveAll with a used id: got %v, want ErrConflict", err)
	}
	wantBalance(t, s, turns, 0, 1)
	// Both fit: both held, and each settles on its own.
	must(t, bl.ReserveAll(ctx, []budget.Reservation{turn("t4"), res("m4", budget.Micros(500_000), lim(run, budget.Dollars(2)))}))
	wantBalance(t, s, turns, 0, 2)
	must(t, s.Settle(ctx, "m4", budget.Micros(200_000)))
	wantBalance(t, s, run, budget.Micros(200_000), budget.Dollars(1))
	// The turn scope is full: the third turn is refused by its own scope.
	err = bl.ReserveAll(ctx, []budget.Reservation{turn("t5"), res("m5", 1, lim(run, budget.Dollars(2)))})
	if ee, ok := errors.AsType[*budget.ExceededError](err); !ok || ee.ID != "t5" || ee.Scope != turns {
		t.Fatalf("ReserveAll past the turn limit: got %v, want ExceededError for t5 in %s", err, turns)
	}
	must(t, bl.ReserveAll(ctx, nil))

	// A spend is settled at once under its limits, leaves nothing to
	// settle, and is refused like a reservation when it does not fit.
	const count = budget.Scope("turns:r2")
	spend := func(id string) budget.Reservation {
		return budget.Reservation{ID: id, Owner: "proc-1", Amount: 1, Spend: true,
			Scopes: []budget.ScopeLimit{lim(count, 2)}}
	}
	must(t, bl.ReserveAll(ctx, []budget.Reservation{spend("s1"), res("m6", 5, lim("run:r2", 0))}))
	must(t, bl.ReserveAll(ctx, []budget.Reservation{spend("s2")}))
	wantBalance(t, s, count, 2, 0)
	if err := s.Settle(ctx, "s1", 1); !errors.Is(err, budget.ErrUnknownReservation) {
		t.Errorf("Settle of a spend: got %v, want ErrUnknownReservation", err)
	}
	err = bl.ReserveAll(ctx, []budget.Reservation{res("m7", 5, lim("run:r2", 0)), spend("s3")})
	if ee, ok := errors.AsType[*budget.ExceededError](err); !ok || ee.ID != "s3" {
		t.Fatalf("ReserveAll with a spend past its limit: got %v, want ExceededError for s3", err)
	}
	wantBalance(t, s, count, 2, 0)
	wantBalance(t, s, "run:r2", 0, 5)

	// A spend with an id is done once: repeated, it is a conflict that
	// changes nothing. Without an id nothing is kept.
	money := budget.Reservation{ID: "sp1", Owner: "proc-1", Amount: 7, Spend: true,
		Scopes: []budget.ScopeLimit{lim("run:r3", 0), lim("tenant:t3", 0)}}
	must(t, bl.ReserveAll(ctx, []budget.Reservation{money}))
	if err := bl.ReserveAll(ctx, []budget.Reservation{money}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a spend repeated: got %v, want ErrConflict", err)
	}
	wantBalance(t, s, "run:r3", 7, 0)
	wantBalance(t, s, "tenant:t3", 7, 0)
	anon := budget.Reservation{Owner: "proc-1", Amount: 1, Spend: true, Scopes: []budget.ScopeLimit{lim("turns:r3", 0)}}
	must(t, bl.ReserveAll(ctx, []budget.Reservation{anon, anon}))
	wantBalance(t, s, "turns:r3", 2, 0)
	// Refused, a spend without an id is named by its amount and scope,
	// not by an empty id.
	anon.Scopes = []budget.ScopeLimit{lim("turns:r3", 2)}
	err = bl.ReserveAll(ctx, []budget.Reservation{anon, res("m8", 5, lim("run:r3", 0))})
	if ee, ok := errors.AsType[*budget.ExceededError](err); !ok || ee.ID != "" ||
		!strings.Contains(err.Error(), `budget: reservation exceeds the limit: $0.000000000001 does not fit in scope "turns:r3" (limit $0.000000000002)`) ||
		strings.Contains(err.Error(), "reserve :") {
		t.Fatalf("ReserveAll past the limit of a spend without an id: got %v, want ExceededError naming no id", err)
	}
}
