package breaker

import (
	"fmt"
	"math"
	"time"
)

// Defaults applied to the zero value of each Settings field.
const (
	DefaultConsecutiveFailures = 10
	DefaultFailureRate         = 0.5
	DefaultMinRequests         = 20
	DefaultWindow              = 60 * time.Second
	DefaultBuckets             = 10
	DefaultOpenFor             = 30 * time.Second
	DefaultOpenForMultiplier   = 1.0
	DefaultMaxOpenFor          = 5 * time.Minute
	DefaultHalfOpenProbes      = 1
)

// Settings configure a Breaker. The zero value of each field means its
// default, so Settings{} is a usable configuration.
type Settings struct {
	// ConsecutiveFailures trips the breaker when this many failures arrive
	// in a row, whatever the window holds. Zero means
	// DefaultConsecutiveFailures (10). Negative is invalid.
	//
	// The default is 10, not the 5 common in breaker libraries: a provider
	// that fails a third of attempts (a bad hour at a large provider, or
	// the simulator's storm profile) shows five failures in a row about
	// once per 250 attempts, and a breaker that trips on that cuts a
	// working deployment off for OpenFor; ten in a row happens about once
	// per 60,000. A deployment that is really down still trips within ten
	// attempts, and the failure-rate rule catches a sustained majority.
	ConsecutiveFailures int

	// FailureRate trips the breaker when failures / (successes + failures)
	// over the sliding Window reaches it, once the window holds at least
	// MinRequests results. It is a share in (0, 1]. Zero means
	// DefaultFailureRate (0.5).
	FailureRate float64

	// MinRequests is the number of results the window must hold before
	// FailureRate is checked, so that one failure out of one request does
	// not trip. Zero means DefaultMinRequests (20). Negative is invalid.
	MinRequests int

	// Window is the length of the sliding window over which FailureRate is
	// computed. Zero means DefaultWindow (60s). Negative is invalid.
	Window time.Duration

	// Buckets is the number of time buckets the window is divided into: the
	// window slides by Window/Buckets at a time and its memory is fixed.
	// Zero means DefaultBuckets (10). Negative, or more than 1000, is
	// invalid; Window/Buckets must be at least 1ms.
	Buckets int

	// OpenFor is how long the breaker stays open after its first trip
	// before it lets probes through (half-open). Zero means DefaultOpenFor
	// (30s). Negative is invalid.
	OpenFor time.Duration

	// OpenForMultiplier grows the open duration on each trip that follows
	// a failed probe without the breaker having closed in between: the n-th
	// consecutive trip stays open OpenFor × OpenForMultiplier^(n-1), up to
	// MaxOpenFor. Zero means DefaultOpenForMultiplier (1: no growth). Values
	// below 1 are invalid.
	OpenForMultiplier float64

	// MaxOpenFor caps the grown open duration. Zero means DefaultMaxOpenFor
	// (5m), or OpenFor when that is longer. It must not be below OpenFor.
	MaxOpenFor time.Duration

	// HalfOpenProbes is K: in half-open, at most K calls are let through;
	// K successes close the breaker and one failure opens it again. Zero
	// means DefaultHalfOpenProbes (1). Negative is invalid.
	HalfOpenProbes int

	// OnStateChange, if set, is called after every state change with the
	// breaker's name and the old and new states. It is called without any
	// lock held, by the goroutine that caused the change, so it may call
	// back into the breaker; changes caused concurrently may be reported
	// concurrently. It must not block for long: the caller whose call
	// caused the change waits for it.
	OnStateChange func(name string, from, to State)
}

// Validate reports the first invalid field, naming it and the allowed values.
func (s Settings) Validate() error {
	switch {
	case s.ConsecutiveFailures < 0:
		return fmt.Errorf("breaker: consecutive_failures (%d) is negative; want 0 (default %d) or more", s.ConsecutiveFailures, DefaultConsecutiveFailures)
	case !(s.FailureRate >= 0 && s.FailureRate <= 1):
		return fmt.Errorf("breaker: failure_rate (%v) is outside (0, 1]; want a share such as 0.5 (0 means default %v)", s.FailureRate, DefaultFailureRate)
	case s.MinRequests < 0:
		return fmt.Errorf("breaker: min_requests (%d) is negative; want 0 (default %d) or more", s.MinRequests, DefaultMinRequests)
	case s.Window < 0:
		return fmt.Errorf("breaker: window (%v) is negative; want 0 (default %v) or more", s.Window, DefaultWindow)
	case s.Buckets < 0 || s.Buckets > 1000:
		return fmt.Errorf("breaker: buckets (%d) is outside [0, 1000]; want 0 (default %d) or a count up to 1000", s.Buckets, DefaultBuckets)
	case s.OpenFor < 0:
		return fmt.Errorf("breaker: open_for (%v) is negative; want 0 (default %v) or more", s.OpenFor, DefaultOpenFor)
	case s.OpenForMultiplier != 0 && !(s.OpenForMultiplier >= 1 && !math.IsInf(s.OpenForMultiplier, 1)):
		return fmt.Errorf("breaker: open_for_multiplier (%v) is below 1; want 0 (default %v) or a finite factor of 1 or more", s.OpenForMultiplier, DefaultOpenForMultiplier)
	case s.MaxOpenFor < 0:
		return fmt.Errorf("breaker: max_open_for (%v) is negative; want 0 (default %v) or more", s.MaxOpenFor, DefaultMaxOpenFor)
	case s.HalfOpenProbes < 0:
		return fmt.Errorf("breaker: half_open_probes (%d) is negative; want 0 (default %d) or more", s.HalfOpenProbes, DefaultHalfOpenProbes)
	}
	r := s.withDefaults()
	if s.MaxOpenFor != 0 && r.MaxOpenFor < r.OpenFor {
		return fmt.Errorf("breaker: max_open_for (%v) is below open_for (%v)", r.MaxOpenFor, r.OpenFor)
	}
	if r.Window/time.Duration(r.Buckets) < time.Millisecond {
		return fmt.Errorf("breaker: window (%v) / buckets (%d) is below 1ms", r.Window, r.Buckets)
	}
	return nil
}

// withDefaults returns s with every zero field set to its default.
func (s Settings) withDefaults() Settings {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.ConsecutiveFailures, DefaultConsecutiveFailures)
	def(&s.MinRequests, DefaultMinRequests)
	def(&s.Buckets, DefaultBuckets)
	def(&s.HalfOpenProbes, DefaultHalfOpenProbes)
	defD(&s.Window, DefaultWindow)
	defD(&s.OpenFor, DefaultOpenFor)
	defD(&s.MaxOpenFor, max(DefaultMaxOpenFor, s.OpenFor))
	if s.FailureRate == 0 {
		s.FailureRate = DefaultFailureRate
	}
	if s.OpenForMultiplier == 0 {
		s.OpenForMultiplier = DefaultOpenForMultiplier
	}
	return s
}

// openFor returns the open duration of the n-th consecutive trip (n ≥ 1).
func (s *Settings) openFor(n int) time.Duration {
	d := float64(s.OpenFor) * math.Pow(s.OpenForMultiplier, float64(n-1))
	if d >= float64(s.MaxOpenFor) || math.IsInf(d, 0) || math.IsNaN(d) {
		return s.MaxOpenFor
	}
	return time.Duration(d)
}
