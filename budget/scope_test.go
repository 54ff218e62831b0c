package budget

import (
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
