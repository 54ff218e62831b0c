package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
)

// X-Belay-Limits-Overridden names each limit asked for that does not
// apply as asked, with the value that applies, in the units the request
// headers take; "none" for no limit.
func TestLimitsOverridden(t *testing.T) {
	tenant := config.Limits{MaxTurns: 50, Deadline: config.Duration(time.Minute), MaxCostUSD: config.USD(budget.Dollars(5))}
	for _, tc := range []struct {
		name  string
		hdr   map[string]string
		apply *config.Limits // nil: the request's own limits (a new run)
		want  string
	}{
		{"nothing asked", nil, nil, ""},
		{"all below the tenant's", map[string]string{HeaderMaxTurns: "3", HeaderDeadline: "30s", HeaderMaxCostUSD: "0.25"}, nil, ""},
		{"equal to the tenant's", map[string]string{HeaderMaxTurns: "50", HeaderDeadline: "60"}, nil, ""},
		{"all above", map[string]string{HeaderMaxTurns: "100", HeaderDeadline: "5m", HeaderMaxCostUSD: "$10"}, nil,
			"max-turns=50, deadline=60, max-cost-usd=5.00"},
		{"one above", map[string]string{HeaderMaxTurns: "3", HeaderDeadline: "90.5"}, nil, "deadline=60"},
		{"a run's other limits", map[string]string{HeaderMaxTurns: "3", HeaderMaxCostUSD: "0.25"},
			&config.Limits{MaxTurns: 10, Deadline: config.Duration(1500 * time.Millisecond), MaxCostUSD: config.USD(budget.Micros(2500))},
			"max-turns=10, max-cost-usd=0.0025"},
		{"a run without limits", map[string]string{HeaderMaxTurns: "3", HeaderDeadline: "2"}, &config.Limits{}, "max-turns=none, deadline=none"},
	} {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		l, asked, fe := requestLimits(r, tenant)
		if fe != nil {
			t.Fatalf("%s: %v", tc.name, fe)
		}
		if tc.apply != nil {
			l = *tc.apply
		}
		if got := limitsOverridden(asked, l); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
