package budget

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// A scope's kind is what RunScope and TenantScope put before the colon.
func TestScopeKind(t *testing.T) {
	for s, want := range map[Scope]string{
		RunScope("r1"): "run",
		TenantScope("acme", Day, time.Unix(0, 0)): "tenant",
		"turns:r1": "turns",
		"bare":     "",
	} {
		if got := s.Kind(); got != want {
			t.Errorf("%q.Kind() = %q, want %q", s, got, want)
		}
	}
}

// TenantScope formats the period's date as time's own layouts do, for any
// date: the digits written by hand match AppendFormat, zero padding and
// the years outside four digits included.
func TestTenantScopeMatchesTimeFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	dates := []time.Time{
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(999, 3, 4, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 5, 6, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 30, 2, 0, 0, 0, time.FixedZone("x", 5*3600)), // Nov 29 in UTC
	}
	for range 500 {
		dates = append(dates, time.Unix(rng.Int64N(400*365*86400)-100*365*86400, 0))
	}
	for _, d := range dates {
		for p, layout := range map[Period]string{Month: "2006-01", Day: "2006-01-02"} {
			want := Scope("tenant:acme:" + d.UTC().Format(layout))
			if got := TenantScope("acme", p, d); got != want {
				t.Fatalf("TenantScope(%s, %v) = %q, want %q", p, d, got, want)
			}
		}
	}
}

// An ExceededError names the reservation only when it has an id: a spend
// kept under no id (a run's turn) printed `reservation ""` (newcomer
// finding).
func TestExceededErrorText(t *testing.T) {
	usd := func(s string) USD {
		a, err := ParseUSD(s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, c := range []struct {
		e    ExceededError
		want string
	}{
		{ExceededError{ID: "r-7", Scope: "run:r1", Amount: usd("0.25"), Limit: usd("0.10")},
			`budget: reservation exceeds the limit: reservation "r-7" of $0.25 in scope "run:r1" (limit $0.10)`},
		{ExceededError{Scope: "tenant:acme:2026-11", Amount: usd("0.0006012"), Limit: usd("0.00000001")},
			`budget: reservation exceeds the limit: $0.0006012 does not fit in scope "tenant:acme:2026-11" (limit $0.00000001)`},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
		if !errors.Is(&c.e, ErrExceeded) {
			t.Errorf("%s: does not wrap ErrExceeded", c.want)
		}
	}
}

func TestPeriodEnd(t *testing.T) {
	at := time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("UTC-5", -5*3600)) // 2027-01-01 04:59:59 UTC
	for _, c := range []struct {
		p    Period
		want time.Time
	}{
		{Day, time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)},
		{Month, time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)},
		{"", time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if got := c.p.End(at); !got.Equal(c.want) {
			t.Errorf("%q.End(%v) = %v, want %v", c.p, at, got, c.want)
		}
	}
	if got := Month.End(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Month.End(Nov 30) = %v", got)
	}
}
