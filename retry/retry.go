// Package retry decides whether, and after how long, a failed attempt is
// tried again on the same deployment.
//
// A Policy is a plain value: the number of attempts allowed on one
// deployment, an exponential backoff with jitter (base, cap, full or equal
// jitter), and a cap on how long a server's requested delay (Retry-After) is
// honoured. Its methods are pure functions of their arguments: the random
// draw u in [0, 1) and the time left before the deadline are passed in, so
// tests call them with fixed values and no clock.
//
// A Budget bounds retries in flight to a ratio of requests in flight, in the
// style of Envoy's retry budgets, so that retries cannot multiply the load on
// a dependency that is already failing.
package retry

import (
	"fmt"
	"math"
	"time"

	"github.com/belay-run/belay/failure"
)

// Defaults applied to the zero value of each Policy field.
const (
	DefaultMaxAttempts   = 4
	DefaultBase          = 500 * time.Millisecond
	DefaultCap           = 8 * time.Second
	DefaultMaxRetryAfter = 20 * time.Second
)

// Jitter is how a backoff delay is randomised.
type Jitter uint8

const (
	// FullJitter draws the delay uniformly from [0, d), where d is the
	// capped exponential delay: sleep = u*d. It spreads clients the most
	// (the "full jitter" of the AWS Architecture Blog, "Exponential Backoff
	// and Jitter", 2015). It is the default.
	FullJitter Jitter = iota
	// EqualJitter keeps half of d and randomises the other half:
	// sleep = d/2 + u*d/2, so a retry never comes sooner than d/2.
	EqualJitter
	// NoJitter waits exactly d. Useful for tests and examples; in
	// production it makes clients retry in lockstep.
	NoJitter
)

var jitterNames = [...]string{"full", "equal", "none"}

// String returns "full", "equal" or "none".
func (j Jitter) String() string {
	if int(j) < len(jitterNames) {
		return jitterNames[j]
	}
	return fmt.Sprintf("jitter(%d)", uint8(j))
}

// Policy is how one deployment is retried. The zero value of each field means
// its default, so Policy{} is a usable policy. A Policy is a value: it is safe
// for concurrent use and cheap to copy.
type Policy struct {
	// MaxAttempts is the number of attempts on one deployment, the first
	// one included: 1 means never retry. Zero means DefaultMaxAttempts (4).
	// Negative is invalid.
	MaxAttempts int

	// Base is the backoff before the first retry, before jitter; each later
	// retry doubles it (Base, 2*Base, 4*Base, ...) up to Cap. Zero means
	// DefaultBase (500ms). Negative is invalid.
	Base time.Duration

	// Cap is the largest backoff, before jitter. Zero means DefaultCap (8s),
	// or Base when Base is larger than 8s. It must not be below Base.
	Cap time.Duration

	// MaxRetryAfter is the longest server-requested delay (Retry-After of
	// RFC 9110 §10.2.3, OpenAI's and Anthropic's retry-after-ms, Gemini's
	// RetryInfo.retryDelay; parsed by package failure) the policy will wait.
	// A longer request turns the failure into Degraded with reason
	// failure.RetryAfterTooLong, so the chain moves to the next deployment
	// instead of waiting. Zero means DefaultMaxRetryAfter (20s). Negative is
	// invalid.
	MaxRetryAfter time.Duration

	// Jitter is how the backoff is randomised; the zero value is FullJitter.
	Jitter Jitter
}

// Validate reports the first invalid field, naming it and the allowed
// values, e.g. "retry: cap (1s) is below base (2s)".
func (p Policy) Validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("retry: max_attempts (%d) is negative; want 0 (default %d) or more", p.MaxAttempts, DefaultMaxAttempts)
	case p.Base < 0:
		return fmt.Errorf("retry: base (%v) is negative; want 0 (default %v) or more", p.Base, DefaultBase)
	case p.Cap < 0:
		return fmt.Errorf("retry: cap (%v) is negative; want 0 (default %v) or more", p.Cap, DefaultCap)
	case p.MaxRetryAfter < 0:
		return fmt.Errorf("retry: max_retry_after (%v) is negative; want 0 (default %v) or more", p.MaxRetryAfter, DefaultMaxRetryAfter)
	case p.Jitter > NoJitter:
		return fmt.Errorf("retry: jitter (%d) is unknown; want full, equal or none", p.Jitter)
	}
	if p.Cap != 0 && p.Cap < p.base() {
		return fmt.Errorf("retry: cap (%v) is below base (%v)", p.Cap, p.base())
	}
	return nil
}

// Attempts returns MaxAttempts with its default applied.
func (p Policy) Attempts() int {
	if p.MaxAttempts == 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

func (p Policy) base() time.Duration {
	if p.Base == 0 {
		return DefaultBase
	}
	return p.Base
}

func (p Policy) cap() time.Duration {
	if p.Cap == 0 {
		return max(DefaultCap, p.base())
	}
	return p.Cap
}

func (p Policy) maxRetryAfter() time.Duration {
	if p.MaxRetryAfter == 0 {
		return DefaultMaxRetryAfter
	}
	return p.MaxRetryAfter
}

// Backoff returns the delay before retry number retry (1 is the first retry,
// made after the first attempt failed), given a uniform draw u in [0, 1).
//
// Before jitter the delay is min(Cap, Base*2^(retry-1)): the first retry
// waits Base, not 2*Base. The computation never overflows: any retry number,
// up to math.MaxInt, gives a delay in [0, Cap]. A retry below 1 is taken as
// 1; u outside [0, 1) is clamped into it.
func (p Policy) Backoff(retry int, u float64) time.Duration {
	d := p.ceiling(retry)
	if !(u >= 0) { // also catches NaN
		u = 0
	} else if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	switch p.Jitter {
	case EqualJitter:
		half := d / 2
		return half + time.Duration(u*float64(d-half))
	case NoJitter:
		return d
	default:
		return time.Duration(u * float64(d))
	}
}

// ceiling is min(cap, base*2^(retry-1)) without overflow.
func (p Policy) ceiling(retry int) time.Duration {
	base, limit := p.base(), p.cap()
	shift := max(retry, 1) - 1
	// base<<shift > limit  ⇔  base > limit>>shift, and the right side
	// cannot overflow; shifts of 62 or more exceed any positive Duration.
	if shift >= 62 || base > limit>>uint(shift) {
		return limit
	}
	return base << uint(shift)
}

// Action is what to do after a failed attempt.
type Action uint8

const (
	// Stop ends the whole chain: the failure is permanent or fatal, or
	// waiting would pass the deadline.
	Stop Action = iota
	// Retry the same deployment after Decision.Wait.
	Retry
	// Next moves to the next deployment at once: the failure is degraded,
	// the server said not to retry here (x-should-retry: false), or this
	// deployment's attempts are used up.
	Next
)

var actionNames = [...]string{"stop", "retry", "next"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Decision is the verdict on one failed attempt.
type Decision struct {
	Action Action
	// Wait is the delay before the retry; set only when Action is Retry.
	Wait time.Duration
	// Failure is the failure to record and report: the attempt's own, or a
	// new one that explains the decision (Degraded RetryAfterTooLong, whose
	// Cause is the attempt's failure; Fatal DeadlineExceeded, likewise).
	Failure *failure.Error
}

// NoDeadline, passed as Decide's left argument, means the call has no
// deadline.
const NoDeadline = time.Duration(math.MaxInt64)

// Decide returns what to do after attempt number attempt (1-based, counted on
// this deployment) failed with f, given a uniform draw u in [0, 1) and the
// time left before the deadline (NoDeadline when there is none).
//
// Only Transient failures are retried, and only while attempt <
// MaxAttempts; a transient failure with NoRetry (x-should-retry: false) or
// with its attempts used up gives Next. A failure after output reached the
// client (f.OutputStarted) gives Stop: no retry or fallback is invisible then. A server-requested delay (f.HasRetryAfter) is used instead of
// the backoff when it is at most MaxRetryAfter; a longer one gives Next with
// a Degraded RetryAfterTooLong failure. A wait that would end at or after the
// deadline gives Stop with a Fatal DeadlineExceeded failure at once, rather
// than a wait that cannot be followed by an attempt. Degraded failures give
// Next; Permanent and Fatal ones give Stop. f must not be nil.
func (p Policy) Decide(attempt int, f *failure.Error, u float64, left time.Duration) Decision {
	if f.OutputStarted {
		// Output already reached the client: neither a retry nor a
		// fallback can be invisible, whatever the kind.
		return Decision{Action: Stop, Failure: f}
	}
	switch f.Kind {
	case failure.Degraded:
		return Decision{Action: Next, Failure: f}
	case failure.Transient:
	default:
		return Decision{Action: Stop, Failure: f}
	}
	if f.NoRetry || attempt >= p.Attempts() {
		return Decision{Action: Next, Failure: f}
	}
	wait := p.Backoff(attempt, u)
	if f.HasRetryAfter {
		if f.RetryAfter > p.maxRetryAfter() {
			return Decision{Action: Next, Failure: tooLong(f, p.maxRetryAfter())}
		}
		wait = max(f.RetryAfter, 0)
	}
	if wait >= left {
		return Decision{Action: Stop, Failure: DeadlineFailure(f, wait, left)}
	}
	return Decision{Action: Retry, Wait: wait, Failure: f}
}

// Revisit returns what to do about going back to a deployment that a call
// left, for other deployments, after its transient failure f used up its
// attempts there (or the retry budget refused a retry): Retry after the
// first retry's backoff, or f's server-requested delay, whatever
// MaxAttempts; Next when f may not be retried (not transient, x-should-
// retry: false, a delay over MaxRetryAfter); Stop when the wait would end
// at or after the deadline, with Decide's Fatal DeadlineExceeded failure.
// u and left are as for Decide.
func (p Policy) Revisit(f *failure.Error, u float64, left time.Duration) Decision {
	// Attempt 0 is below any MaxAttempts, and Backoff takes it as the
	// first retry.
	return p.Decide(0, f, u, left)
}

func tooLong(f *failure.Error, limit time.Duration) *failure.Error {
	return &failure.Error{
		Kind:          failure.Degraded,
		Reason:        failure.RetryAfterTooLong,
		Status:        f.Status,
		ProviderType:  f.ProviderType,
		ProviderCode:  f.ProviderCode,
		Message:       fmt.Sprintf("server asked to wait %v, longer than max_retry_after %v", f.RetryAfter, limit),
		RetryAfter:    f.RetryAfter,
		HasRetryAfter: true,
		RequestID:     f.RequestID,
		Deployment:    f.Deployment,
		// Not f itself: errors.Is(err, failure.Transient) must be false.
		Cause: f.Cause,
	}
}

// roundShort rounds d for a message: to the millisecond below 10s, else
// to a tenth of a second ("47ms", "1.149s", "12.4s").
func roundShort(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// DeadlineFailure returns the Fatal DeadlineExceeded failure reported when a
// wait of wait cannot end before the deadline, left from now (0 or less:
// the deadline has passed). Its Cause is last, the failure that asked for
// the wait (which may be nil).
func DeadlineFailure(last *failure.Error, wait, left time.Duration) *failure.Error {
	msg := fmt.Sprintf("retry would wait %v but only %v is left before the deadline", roundShort(wait), roundShort(max(left, 0)))
	if left <= 0 {
		msg = "the deadline passed during the call's attempts: no time is left for a retry"
	}
	e := &failure.Error{Kind: failure.Fatal, Reason: failure.DeadlineExceeded, Message: msg}
	if last != nil {
		e.Cause = last
		e.Deployment = last.Deployment
	}
	return e
}
