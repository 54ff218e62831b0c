package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestMemLedgerReserveSettleRelease(t *testing.T) {
	ctx := context.Background()
	l := NewMemLedger()
	run, ten := RunScope("r1"), Scope("tenant:acme:2026-11")
	scopes := []ScopeLimit{{run, Dollars(1)}, {ten, Dollars(10)}}
	if err := l.Reserve(ctx, Reservation{ID: "a", Scopes: scopes, Amount: Micros(600_000)}); err != nil {
		t.Fatal(err)
	}
	// 0.6 + 0.5 > 1 in the run scope: nothing changes in either scope.
	err := l.Reserve(ctx, Reservation{ID: "b", Scopes: scopes, Amount: Micros(500_000)})
	if !errors.Is(err, ErrExceeded) {
		t.Fatalf("err = %v, want ErrExceeded", err)
	}
	if b, _ := l.Balance(ctx, ten); b.Reserved != Micros(600_000) || b.Settled != 0 {
		t.Fatalf("tenant balance after refusal %+v", b)
	}
	if err := l.Reserve(ctx, Reservation{ID: "a", Scopes: scopes}); !errors.Is(err, ErrDuplicateReservation) {
		t.Fatalf("duplicate id: %v", err)
	}
	// The spend may be above the reservation; it is recorded as is.
	if err := l.Settle(ctx, "a", Micros(700_000)); err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, "a", 1); !errors.Is(err, ErrUnknownReservation) {
		t.Fatalf("second settle: %v", err)
	}
	if b, _ := l.Balance(ctx, run); b.Reserved != 0 || b.Settled != Micros(700_000) {
		t.Fatalf("run balance %+v", b)
	}
	if err := l.Reserve(ctx, Reservation{ID: "c", Scopes: scopes, Amount: Micros(300_000)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, "c"); !errors.Is(err, ErrUnknownReservation) {
		t.Fatalf("second release: %v", err)
	}
	if b, _ := l.Balance(ctx, ten); b.Reserved != 0 || b.Settled != Micros(700_000) {
		t.Fatalf("tenant balance %+v", b)
	}
	// Unlimited scope still records.
	if err := l.Reserve(ctx, Reservation{ID: "d", Scopes: []ScopeLimit{{Scope: "x"}}, Amount: Dollars(100)}); err != nil {
		t.Fatal(err)
	}
}

func TestMemLedgerExpire(t *testing.T) {
	ctx := context.Background()
	l := NewMemLedger()
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	s := []ScopeLimit{{Scope: "s", Limit: Dollars(1)}}
	_ = l.Reserve(ctx, Reservation{ID: "old", Scopes: s, Amount: Micros(500_000), ExpiresAt: t0})
	_ = l.Reserve(ctx, Reservation{ID: "new", Scopes: s, Amount: Micros(500_000), ExpiresAt: t0.Add(time.Minute)})
	n, err := l.ExpireReservations(ctx, t0.Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("expired %d, %v; want 1", n, err)
	}
	if b, _ := l.Balance(ctx, "s"); b.Reserved != Micros(500_000) {
		t.Fatalf("balance %+v", b)
	}
	if err := l.Settle(ctx, "old", 1); !errors.Is(err, ErrUnknownReservation) {
		t.Fatalf("settle of expired: %v", err)
	}
}

func TestMemLedgerConcurrentReserveNeverExceeds(t *testing.T) {
	ctx := context.Background()
	l := NewMemLedger()
	s := []ScopeLimit{{Scope: "s", Limit: Dollars(1)}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := range 200 {
		wg.Go(func() {
			id := fmt.Sprint(i)
			if l.Reserve(ctx, Reservation{ID: id, Scopes: s, Amount: Micros(30_000)}) == nil {
				mu.Lock()
				ok++
				mu.Unlock()
				_ = l.Settle(ctx, id, Micros(30_000))
			}
		})
	}
	wg.Wait()
	b, _ := l.Balance(ctx, "s")
	if ok != 33 || b.Settled != Micros(990_000) || b.Reserved != 0 {
		t.Fatalf("ok=%d balance %+v; want 33 reservations, $0.99 settled", ok, b)
	}
}

func TestCheckAlertsOncePerScope(t *testing.T) {
	ctx := context.Background()
	l := NewMemLedger()
	// 23:00 at UTC-5 is 04:00 UTC the next day, still November.
	nov := TenantScope("acme", Month, time.Date(2026, 11, 29, 23, 0, 0, 0, time.FixedZone("x", -3600*5)))
	if nov != "tenant:acme:2026-11" {
		t.Fatalf("scope %q", nov)
	}
	spend := func(s Scope, id string, amt USD) {
		if err := l.Reserve(ctx, Reservation{ID: id, Scopes: []ScopeLimit{{Scope: s}}, Amount: amt}); err != nil {
			t.Fatal(err)
		}
		_ = l.Settle(ctx, id, amt)
	}
	ths := []float64{0.8, 0.5, 0.95}
	spend(nov, "1", Micros(400_000))
	if a, _ := CheckAlerts(ctx, l, nov, Dollars(1), ths); len(a) != 0 {
		t.Fatalf("alerts at 40%%: %v", a)
	}
	spend(nov, "2", Micros(450_000))
	a, err := CheckAlerts(ctx, l, nov, Dollars(1), ths)
	if err != nil || len(a) != 2 || a[0].Threshold != 0.5 || a[1].Threshold != 0.8 || a[1].Settled != Micros(850_000) {
		t.Fatalf("alerts at 85%%: %v, %v", a, err)
	}
	if a, _ := CheckAlerts(ctx, l, nov, Dollars(1), ths); len(a) != 0 {
		t.Fatalf("repeated alerts: %v", a)
	}
	dec := TenantScope("acme", Month, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	spend(dec, "3", Micros(960_000))
	if a, _ := CheckAlerts(ctx, l, dec, Dollars(1), ths); len(a) != 3 {
		t.Fatalf("new period alerts: %v", a)
	}
}

func TestScopes(t *testing.T) {
	at := time.Date(2026, 1, 31, 23, 30, 0, 0, time.FixedZone("UTC-1", -3600))
	if s := TenantScope("acme", Day, at); s != "tenant:acme:2026-02-01" {
		t.Errorf("day scope %q", s)
	}
	if s := TenantScope("acme", Month, at); s != "tenant:acme:2026-02" {
		t.Errorf("month scope %q", s)
	}
	if s := RunScope("r-1"); s != "run:r-1" {
		t.Errorf("run scope %q", s)
	}
	if p, err := ParsePeriod(""); p != Month || err != nil {
		t.Errorf("ParsePeriod(\"\") = %q, %v", p, err)
	}
	if _, err := ParsePeriod("week"); err == nil {
		t.Error("week accepted")
	}
}
