// Package breaker is a circuit breaker for one deployment: it stops sending
// calls to a dependency that keeps failing, and lets a few probes through
// after a while to find out whether it has recovered.
//
// A Breaker is closed (calls pass), open (calls are refused at once with a
// *failure.Error of Kind Degraded and Reason CircuitOpen, matching ErrOpen)
// or half-open (up to K probe calls pass). It trips from closed to open on N
// consecutive failures, or when the failure rate over a sliding window of
// time buckets reaches a threshold once the window holds a minimum number of
// results. It moves from open to half-open by time alone: any read after the
// open duration has passed sees half-open, even with no traffic in between.
// K probe successes close it; one probe failure opens it again, for a
// duration that may grow on each repeated trip up to a cap.
//
// Only failures that say something about the dependency count: Transient and
// Degraded ones are failures. Permanent failures (the request itself was
// wrong) and Fatal ones (the caller stopped: canceled, deadline, budget)
// count as neither success nor failure; a half-open probe that ends so frees
// its slot for another probe.
//
// Results reported for a call admitted before the latest state change are
// discarded (a generation counter, as in sony/gobreaker v2), so a slow call
// from before a trip cannot close or re-trip the breaker.
package breaker

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/belay-run/belay/failure"
)

// ErrOpen is matched (errors.Is) by every error Allow returns.
var ErrOpen = errors.New("breaker: open")

// State is a breaker's state. The zero value is Closed.
type State uint8

const (
	Closed State = iota
	HalfOpen
	Open
)

var stateNames = [...]string{"closed", "half_open", "open"}

// String returns "closed", "half_open" or "open", the names used in traces
// and metrics.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Breaker is a circuit breaker. It is safe for concurrent use. Allow and
// Ticket.Done take one short mutex hold and do not allocate on the success
// path; the listener (Settings.OnStateChange) is never called under the lock.
type Breaker struct {
	name     string
	s        Settings // defaults applied
	epoch    time.Time
	onChange func(name string, from, to State)
	errOpen  *failure.Error
	errBusy  *failure.Error

	mu          sync.Mutex
	state       State
	gen         uint64
	consecutive int
	trips       int       // consecutive trips without closing in between
	openUntil   time.Time // while open
	probes      int       // half-open: probes admitted and not yet ignored
	successes   int       // half-open: probe successes
	window      window
}

// New returns a closed breaker named name (a deployment name, used in errors
// and passed to the listener), or an error naming the invalid setting.
func New(name string, s Settings) (*Breaker, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	r := s.withDefaults()
	b := &Breaker{
		name:     name,
		s:        r,
		epoch:    time.Now(),
		onChange: r.OnStateChange,
		window:   newWindow(r.Window, r.Buckets),
	}
	b.errOpen = b.refusal("breaker %q is open")
	b.errBusy = b.refusal("breaker %q is half-open and its probes are in flight")
	return b, nil
}

func (b *Breaker) refusal(format string) *failure.Error {
	return &failure.Error{
		Kind: failure.Degraded, Reason: failure.CircuitOpen,
		Message: fmt.Sprintf(format, b.name), Deployment: b.name, Cause: ErrOpen,
	}
}

// Name returns the name given to New.
func (b *Breaker) Name() string { return b.name }

// Ticket is the permission for one call, returned by Allow. Report the call's
// outcome with Done or DoneKind exactly once; a later report is harmless but
// ignored. The zero Ticket ignores reports.
type Ticket struct {
	b     *Breaker
	gen   uint64
	state State
}

// State returns the breaker's state when the call was admitted (Closed or
// HalfOpen).
func (t Ticket) State() State { return t.state }

// Done reports the call's outcome: nil is a success; an error counts by its
// failure.KindOf (Transient and Degraded are failures; Permanent and Fatal
// count as neither).
func (t Ticket) Done(err error) { t.DoneKind(failure.KindOf(err)) }

// DoneKind reports the call's outcome by kind (failure.OK for a success).
func (t Ticket) DoneKind(k failure.Kind) {
	if t.b != nil {
		t.b.record(t, k, time.Now())
	}
}

// DoneKindAt is DoneKind for a call that ended at now, for a caller that has
// read the clock already (a clock read costs more than the rest of a
// success). now should be a recent time.Now() reading.
func (t Ticket) DoneKindAt(k failure.Kind, now time.Time) {
	if t.b != nil {
		t.b.record(t, k, now)
	}
}

// Allow asks to make one call. It returns a Ticket to report the outcome
// with, or, when the breaker is open or its half-open probes are all in
// flight, an error: a *failure.Error with Kind Degraded and Reason
// CircuitOpen that matches ErrOpen. The error is shared by all refusals of
// this breaker: read it, do not modify it.
func (b *Breaker) Allow() (Ticket, error) {
	b.mu.Lock()
	if b.state == Closed { // the hot path: no clock read
		t := Ticket{b, b.gen, Closed}
		b.mu.Unlock()
		return t, nil
	}
	ch := b.tick(time.Now())
	t, err := Ticket{b, b.gen, b.state}, error(nil)
	switch b.state {
	case Open:
		t, err = Ticket{}, b.errOpen
	case HalfOpen:
		if b.probes >= b.s.HalfOpenProbes {
			t, err = Ticket{}, b.errBusy
		} else {
			b.probes++
		}
	}
	b.mu.Unlock()
	b.notify(ch)
	return t, err
}

// Refusing reports whether Allow would refuse a call now: the breaker is
// open, or half-open with all its probes in flight. A closed breaker
// answers without reading the clock.
func (b *Breaker) Refusing() bool {
	b.mu.Lock()
	if b.state == Closed {
		b.mu.Unlock()
		return false
	}
	ch := b.tick(time.Now())
	refusing := b.state == Open || b.state == HalfOpen && b.probes >= b.s.HalfOpenProbes
	b.mu.Unlock()
	b.notify(ch)
	return refusing
}

// State returns the current state. An open breaker whose open duration has
// passed reports HalfOpen (and moves there, calling the listener) even if no
// call has been made since it opened.
func (b *Breaker) State() State {
	b.mu.Lock()
	ch := b.tick(time.Now())
	s := b.state
	b.mu.Unlock()
	b.notify(ch)
	return s
}

// Stats is a snapshot of a breaker for admin pages and metrics.
type Stats struct {
	State State
	// ConsecutiveFailures counts failures since the last success.
	ConsecutiveFailures int
	// Requests and Failures are the counts in the sliding window.
	Requests, Failures int
	// Trips counts trips since the breaker last closed from half-open.
	Trips int
	// OpenUntil is when an open breaker becomes half-open (zero otherwise).
	OpenUntil time.Time
}

// Stats returns a snapshot of the breaker.
func (b *Breaker) Stats() Stats {
	now := time.Now()
	b.mu.Lock()
	ch := b.tick(now)
	req, fail := b.window.totals(b.since(now))
	st := Stats{State: b.state, ConsecutiveFailures: b.consecutive, Requests: req, Failures: fail, Trips: b.trips}
	if b.state == Open {
		st.OpenUntil = b.openUntil
	}
	b.mu.Unlock()
	b.notify(ch)
	return st
}

// change is a state change to report once the lock is released.
type change struct {
	ok       bool
	from, to State
}

func (b *Breaker) notify(c change) {
	if c.ok && b.onChange != nil {
		b.onChange(b.name, c.from, c.to)
	}
}
