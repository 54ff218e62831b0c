package retry

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/failure"
)

func TestBackoffExponentialCapped(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Cap: time.Second, Jitter: NoJitter}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.Backoff(i+1, 0.5); got != w*time.Millisecond {
			t.Errorf("Backoff(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
}

func TestBackoffJitter(t *testing.T) {
	full := Policy{Base: time.Second, Cap: 10 * time.Second}
	equal := Policy{Base: time.Second, Cap: 10 * time.Second, Jitter: EqualJitter}
	tests := []struct {
		p    Policy
		n    int
		u    float64
		want time.Duration
	}{
		{full, 1, 0, 0},
		{full, 1, 0.25, 250 * time.Millisecond},
		{full, 3, 0.5, 2 * time.Second},
		{full, 9, 0.5, 5 * time.Second},
		{equal, 1, 0, 500 * time.Millisecond},
		{equal, 1, 0.5, 750 * time.Millisecond},
		{equal, 2, 0.5, 1500 * time.Millisecond},
		{full, 1, -3, 0},                        // clamped to 0
		{full, 1, math.NaN(), 0},                // clamped to 0
		{equal, 0, 0.5, 750 * time.Millisecond}, // retry 0 taken as 1
	}
	for _, tt := range tests {
		if got := tt.p.Backoff(tt.n, tt.u); got != tt.want {
			t.Errorf("%v.Backoff(%d, %v) = %v, want %v", tt.p.Jitter, tt.n, tt.u, got, tt.want)
		}
	}
	if got := full.Backoff(1, 1); got >= time.Second {
		t.Errorf("Backoff(1, 1) = %v, want below base 1s (u clamped below 1)", got)
	}
}

func TestBackoffDefaults(t *testing.T) {
	var p Policy
	if got := p.Backoff(1, 0.5); got != DefaultBase/2 {
		t.Errorf("zero Policy Backoff(1, .5) = %v, want %v", got, DefaultBase/2)
	}
	if got := (Policy{Jitter: NoJitter}).Backoff(100, 0); got != DefaultCap {
		t.Errorf("zero Policy Backoff(100) = %v, want cap %v", got, DefaultCap)
	}
	if got := p.Attempts(); got != DefaultMaxAttempts {
		t.Errorf("Attempts() = %d, want %d", got, DefaultMaxAttempts)
	}
	// A base above the default cap raises the default cap to the base.
	big := Policy{Base: 30 * time.Second, Jitter: NoJitter}
	if err := big.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got := big.Backoff(5, 0); got != 30*time.Second {
		t.Errorf("Backoff = %v, want 30s", got)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		p    Policy
		want string // "" for valid
	}{
		{Policy{}, ""},
		{Policy{MaxAttempts: 1, Base: time.Millisecond, Cap: time.Millisecond}, ""},
		{Policy{MaxAttempts: -1}, "retry: max_attempts (-1) is negative"},
		{Policy{Base: -time.Second}, "retry: base (-1s) is negative"},
		{Policy{Cap: -time.Second}, "retry: cap (-1s) is negative"},
		{Policy{MaxRetryAfter: -time.Second}, "retry: max_retry_after (-1s) is negative"},
		{Policy{Base: 2 * time.Second, Cap: time.Second}, "retry: cap (1s) is below base (2s)"},
		{Policy{Cap: 100 * time.Millisecond}, "retry: cap (100ms) is below base (500ms)"},
		{Policy{Jitter: 7}, "retry: jitter (7) is unknown"},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", tt.p, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("Validate(%+v) = %v, want prefix %q", tt.p, err, tt.want)
		}
	}
}

func transient(r failure.Reason) *failure.Error { return failure.New(r, "boom") }

func TestDecide(t *testing.T) {
	p := Policy{MaxAttempts: 3, Base: time.Second, Cap: 4 * time.Second, MaxRetryAfter: 10 * time.Second, Jitter: NoJitter}
	ra := func(d time.Duration) *failure.Error {
		f := transient(failure.RateLimited)
		f.RetryAfter, f.HasRetryAfter = d, true
		return f
	}
	noRetry := transient(failure.ServerError)
	noRetry.NoRetry = true
	started := transient(failure.StreamInterrupted)
	started.OutputStarted = true
	tests := []struct {
		name     string
		attempt  int
		f        *failure.Error
		left     time.Duration
		action   Action
		wait     time.Duration
		reason   failure.Reason
		wantKind failure.Kind
	}{
		{"transient retried", 1, transient(failure.Overloaded), NoDeadline, Retry, time.Second, failure.Overloaded, failure.Transient},
		{"second retry doubles", 2, transient(failure.Overloaded), NoDeadline, Retry, 2 * time.Second, failure.Overloaded, failure.Transient},
		{"attempts used up", 3, transient(failure.Overloaded), NoDeadline, Next, 0, failure.Overloaded, failure.Transient},
		{"no retry header", 1, noRetry, NoDeadline, Next, 0, failure.ServerError, failure.Transient},
		{"output started", 1, started, NoDeadline, Stop, 0, failure.StreamInterrupted, failure.Transient},
		{"degraded", 1, failure.New(failure.QuotaExhausted, "q"), NoDeadline, Next, 0, failure.QuotaExhausted, failure.Degraded},
		{"permanent", 1, failure.New(failure.InvalidRequest, "bad"), NoDeadline, Stop, 0, failure.InvalidRequest, failure.Permanent},
		{"fatal", 1, failure.New(failure.Canceled, "c"), NoDeadline, Stop, 0, failure.Canceled, failure.Fatal},
		{"retry-after honoured", 1, ra(7 * time.Second), NoDeadline, Retry, 7 * time.Second, failure.RateLimited, failure.Transient},
		{"retry-after at the cap", 1, ra(10 * time.Second), NoDeadline, Retry, 10 * time.Second, failure.RateLimited, failure.Transient},
		{"retry-after too long", 1, ra(11 * time.Second), NoDeadline, Next, 0, failure.RetryAfterTooLong, failure.Degraded},
		{"wait fits deadline", 1, transient(failure.Timeout), 1001 * time.Millisecond, Retry, time.Second, failure.Timeout, failure.Transient},
		{"wait reaches deadline", 1, transient(failure.Timeout), time.Second, Stop, 0, failure.DeadlineExceeded, failure.Fatal},
		{"retry-after past deadline", 1, ra(5 * time.Second), 2 * time.Second, Stop, 0, failure.DeadlineExceeded, failure.Fatal},
		{"deadline already passed", 1, transient(failure.Timeout), -time.Second, Stop, 0, failure.DeadlineExceeded, failure.Fatal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(tt.attempt, tt.f, 0.5, tt.left)
			if d.Action != tt.action || d.Wait != tt.wait {
				t.Errorf("Decide = %v after %v, want %v after %v", d.Action, d.Wait, tt.action, tt.wait)
			}
			if d.Failure.Reason != tt.reason || d.Failure.Kind != tt.wantKind {
				t.Errorf("failure = %v/%v, want %v/%v", d.Failure.Kind, d.Failure.Reason, tt.wantKind, tt.reason)
			}
		})
	}
}

func TestDecideDeadlineKeepsCause(t *testing.T) {
	f := transient(failure.ServerError)
	d := Policy{Jitter: NoJitter}.Decide(1, f, 0, 100*time.Millisecond)
	if !errors.Is(d.Failure, failure.DeadlineExceeded) || !errors.Is(d.Failure, failure.Fatal) {
		t.Fatalf("failure = %v, want fatal deadline_exceeded", d.Failure)
	}
	var cause *failure.Error
	if !errors.As(errors.Unwrap(d.Failure), &cause) || cause != f {
		t.Errorf("cause = %v, want the attempt's failure", errors.Unwrap(d.Failure))
	}
}

func TestTooLongIsNotTransient(t *testing.T) {
	f := transient(failure.RateLimited)
	f.RetryAfter, f.HasRetryAfter, f.Status = time.Hour, true, 429
	d := Policy{}.Decide(1, f, 0, NoDeadline)
	if errors.Is(d.Failure, failure.Transient) {
		t.Errorf("RetryAfterTooLong failure matches Transient; a caller would retry it")
	}
	if d.Failure.Status != 429 || d.Failure.RetryAfter != time.Hour {
		t.Errorf("failure lost status or delay: %+v", d.Failure)
	}
}

// go-retryablehttp #247: a server-sent Retry-After was used as the wait with
// no upper bound, so one header could park a client for hours.
func TestRegression_GoRetryablehttp247_ServerDelayCapped(t *testing.T) {
	p := Policy{MaxRetryAfter: 30 * time.Second}
	for _, ra := range []time.Duration{31 * time.Second, time.Hour, math.MaxInt64} {
		f := transient(failure.RateLimited)
		f.RetryAfter, f.HasRetryAfter = ra, true
		d := p.Decide(1, f, 0.5, NoDeadline)
		if d.Action == Retry || d.Wait != 0 || !errors.Is(d.Failure, failure.RetryAfterTooLong) {
			t.Errorf("Retry-After %v: got %v after %v (%v), want next without waiting", ra, d.Action, d.Wait, d.Failure)
		}
	}
}

// retry-go #127: the first retry waited 2*base because the exponent started
// at 1 instead of 0.
func TestRegression_RetryGo127_FirstDelayNotDoubled(t *testing.T) {
	base := 300 * time.Millisecond
	if got := (Policy{Base: base, Jitter: NoJitter}).Backoff(1, 0.99); got != base {
		t.Errorf("first delay = %v, want base %v", got, base)
	}
	if got := (Policy{Base: base}).Backoff(1, 0.99); got >= base {
		t.Errorf("first full-jitter delay = %v, want below base %v", got, base)
	}
	if got := (Policy{Base: base, Jitter: EqualJitter}).Backoff(1, 0.99); got >= base || got < base/2 {
		t.Errorf("first equal-jitter delay = %v, want in [%v, %v)", got, base/2, base)
	}
}

// retry-go #24: base<<attempt overflowed at high attempt counts into a
// negative or zero delay.
func TestRegression_RetryGo24_NoOverflowAtHighAttempts(t *testing.T) {
	for _, j := range []Jitter{FullJitter, EqualJitter, NoJitter} {
		for _, base := range []time.Duration{time.Nanosecond, time.Millisecond, 3 * time.Second} {
			p := Policy{Base: base, Cap: 10 * time.Second, Jitter: j}
			for _, n := range []int{62, 63, 64, 10_000, math.MaxInt} {
				got := p.Backoff(n, 0.5)
				if got <= 0 || got > 10*time.Second {
					t.Errorf("%v base %v: Backoff(%d) = %v, want in (0, 10s]", j, base, n, got)
				}
			}
		}
	}
}

func TestBackoffProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		base := time.Duration(1 + r.Int64N(int64(time.Minute)))
		p := Policy{Base: base, Cap: base + time.Duration(r.Int64N(int64(time.Hour))), Jitter: Jitter(r.IntN(3))}
		n, u := 1+r.IntN(200), r.Float64()
		got := p.Backoff(n, u)
		if got < 0 || got > p.Cap {
			t.Fatalf("%+v Backoff(%d, %v) = %v, want in [0, cap]", p, n, u, got)
		}
		if p.Backoff(n, u) > p.Backoff(n+1, u) && p.Jitter == NoJitter {
			t.Fatalf("%+v: Backoff not monotonic at %d", p, n)
		}
	}
}

func BenchmarkBackoff(b *testing.B) {
	b.ReportAllocs()
	p := Policy{}
	for i := 0; b.Loop(); i++ {
		_ = p.Backoff(i&31+1, 0.5)
	}
}

func BenchmarkDecide(b *testing.B) {
	b.ReportAllocs()
	p := Policy{}
	f := transient(failure.Overloaded)
	for b.Loop() {
		_ = p.Decide(1, f, 0.5, NoDeadline)
	}
}

// A degraded failure after output started stops the chain: a fallback would
// start a second answer behind one the client already has.
func TestDecideStopsOnOutputStartedForEveryKind(t *testing.T) {
	p := Policy{}
	for _, r := range []failure.Reason{failure.Overloaded, failure.QuotaExhausted, failure.InvalidRequest} {
		f := failure.New(r, "x")
		f.OutputStarted = true
		if d := p.Decide(1, f, 0.5, NoDeadline); d.Action != Stop {
			t.Errorf("%s after output: %v, want Stop", r, d.Action)
		}
	}
}

// DeadlineFailure's message rounds its durations, and says when no time
// is left at all (newcomer finding: "retry would wait 47.429889ms but only
// 0s is left").
func TestDeadlineFailureMessage(t *testing.T) {
	for _, c := range []struct {
		wait, left time.Duration
		want       string
	}{
		{47429889 * time.Nanosecond, 12345678 * time.Nanosecond, "retry would wait 47ms but only 12ms is left before the deadline"},
		{12345678901 * time.Nanosecond, 2 * time.Second, "retry would wait 12.3s but only 2s is left before the deadline"},
		{time.Second, 0, "the deadline passed during the call's attempts: no time is left for a retry"},
		{time.Second, -time.Millisecond, "the deadline passed during the call's attempts: no time is left for a retry"},
	} {
		if got := DeadlineFailure(nil, c.wait, c.left).Message; got != c.want {
			t.Errorf("DeadlineFailure(%v, %v) = %q, want %q", c.wait, c.left, got, c.want)
		}
	}
}
