package gateway

import (
	"net/http"
	"strconv"
	"strings"
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

// The limit headers' numbers are plain decimals: Go's and YAML's other
// spellings are refused as malformed, whichever header carries them
// (adversary finding: X-Belay-Max-Cost-Usd took 0x10, 0b1 and 1_000 but
// not 1e3; X-Belay-Deadline took 1_000).
func TestLimitHeadersArePlainDecimals(t *testing.T) {
	tenant := config.Limits{}
	ask := func(h, v string) (config.Limits, string) {
		t.Helper()
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set(h, v)
		_, asked, fe := requestLimits(r, tenant)
		if fe != nil {
			return asked, fe.Message
		}
		return asked, ""
	}
	for _, v := range []string{"0x10", "0b1", "0o7", "1_000", "1e3", "1E-2", "Inf", "NaN", "1/2", "0x1p4"} {
		if _, msg := ask(HeaderMaxCostUSD, v); msg != HeaderMaxCostUSD+": "+strconv.Quote(v)+" is not a positive dollar amount (a plain decimal, e.g. 0.25 or $0.25)" {
			t.Errorf("%s: %s: %q", HeaderMaxCostUSD, v, msg)
		}
		if _, msg := ask(HeaderDeadline, v); msg != HeaderDeadline+": "+strconv.Quote(v)+" is not a positive duration (e.g. 90s, 5m or 90)" {
			t.Errorf("%s: %s: %q", HeaderDeadline, v, msg)
		}
	}
	for v, want := range map[string]budget.USD{"16": budget.Dollars(16), "$1000": budget.Dollars(1000), "0.25": budget.Micros(250_000), ".5": budget.Micros(500_000), " 2 ": budget.Dollars(2)} {
		if asked, msg := ask(HeaderMaxCostUSD, v); msg != "" || asked.MaxCostUSD.V() != want {
			t.Errorf("%s: %q: %v, %q; want %v", HeaderMaxCostUSD, v, asked.MaxCostUSD.V(), msg, want)
		}
	}
	for v, want := range map[string]time.Duration{"1000": 1000 * time.Second, "1.5": 1500 * time.Millisecond, "90s": 90 * time.Second, "5m": 5 * time.Minute} {
		if asked, msg := ask(HeaderDeadline, v); msg != "" || asked.Deadline.D() != want {
			t.Errorf("%s: %q: %v, %q; want %v", HeaderDeadline, v, asked.Deadline.D(), msg, want)
		}
	}
}

// A limit header sent twice or sent empty is refused: before, the second
// value was dropped and an empty one left the run's limit as it was, both
// without a word (a newcomer's finding). A number too large to hold says
// so instead of "not a positive integer". X-Belay-Run-Id and
// X-Belay-Agent sent twice are refused too.
func TestLimitHeaderTwiceEmptyOrHuge(t *testing.T) {
	ask := func(h string, vs ...string) string {
		t.Helper()
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		for _, v := range vs {
			r.Header.Add(h, v)
		}
		_, _, fe := requestLimits(r, config.Limits{MaxTurns: 20})
		if fe == nil {
			return ""
		}
		return fe.Message
	}
	for _, h := range []string{HeaderMaxTurns, HeaderMaxTokens, HeaderDeadline, HeaderMaxCostUSD} {
		if got, want := ask(h, "3", "1"), h+": sent 2 times; send it once"; got != want {
			t.Errorf("%s twice: %q, want %q", h, got, want)
		}
		for _, v := range []string{"", "  "} {
			if got, want := ask(h, v), h+": empty; send a value, or leave the header out for the run's own limit"; got != want {
				t.Errorf("%s %q: %q, want %q", h, v, got, want)
			}
		}
	}
	tooLarge := " (too large to hold: a request can only lower the run's limit; leave the header out to keep it)"
	for h, v := range map[string]string{HeaderMaxTurns: "99999999999999999999", HeaderMaxTokens: "99999999999999999999", HeaderDeadline: "99999999999999999"} {
		if got := ask(h, v); !strings.HasSuffix(got, tooLarge) {
			t.Errorf("%s %s: %q, want it to end %q", h, v, got, tooLarge)
		}
	}
	// An amount finer than a picodollar says so, not that it is not positive.
	if got, want := ask(HeaderMaxCostUSD, "0.0000000000001"), HeaderMaxCostUSD+`: "0.0000000000001" is not a positive dollar amount (a plain decimal, e.g. 0.25 or $0.25) (finer than belay counts money: at most 12 decimals, a picodollar)`; got != want {
		t.Errorf("tiny amount: %q, want %q", got, want)
	}
	if got := ask(HeaderMaxTurns, "abc"); strings.Contains(got, "too large") {
		t.Errorf("not a number: %q", got)
	}
	// So are a run id and an agent name sent twice: which run a call
	// counts in cannot be a guess.
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	r.Header.Add(HeaderRunID, "run-a")
	r.Header.Add(HeaderRunID, "run-b")
	r.Header.Add(HeaderAgent, "a")
	r.Header.Add(HeaderAgent, "b")
	if _, _, fe := runID(r, false); fe == nil || fe.Message != HeaderRunID+": sent 2 times; send it once" {
		t.Errorf("run id twice: %v", fe)
	}
	if _, fe := agentName(r); fe == nil || fe.Message != HeaderAgent+": sent 2 times; send it once" {
		t.Errorf("agent twice: %v", fe)
	}
}
