package gateway

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Timeout causes: the attempt's context is canceled with one of these when
// the corresponding timer fires. Each is reported as a Transient Timeout.
var (
	errFirstByte  = errors.New("no response headers within timeouts.first_byte")
	errFirstToken = errors.New("no model output within timeouts.first_token")
	errIdle       = errors.New("no stream event within timeouts.idle")
)

// watchdog cancels an attempt's context when the current phase's timer
// fires, with the phase's cause. It is safe for concurrent use.
//
// Its timer is lazy: arming for a deadline later than the one the timer
// is set for (the idle timer re-armed on every read of a body or stream,
// first_byte followed by a longer idle) only records the deadline, and
// the timer, when it fires early, sets itself for what is left. Only a
// deadline earlier than the timer's is a timer operation: each one may
// wake a second thread to watch the new earliest timer, which a stream's
// every event did before.
type watchdog struct {
	cancel context.CancelCauseFunc
	t      *time.Timer
	mu     sync.Mutex
	p      *phase    // nil: disarmed
	due    time.Time // when p's timeout passes
	fire   time.Time // when t is set to fire; zero when it is not set
}

// phase is what the watchdog is armed for: the cause and the timeout.
type phase struct {
	cause error
	d     time.Duration
}

// timeoutError is the cause a watchdog cancels an attempt with: its
// phase's cause (errFirstByte, errFirstToken, errIdle; errors.Is finds it)
// and the timeout that passed, which the text names ("no response headers
// within timeouts.first_byte (2s)": a deployment's own timeout and the
// gateway's read alike otherwise; a newcomer finding).
type timeoutError struct {
	cause error
	d     time.Duration
}

func (e *timeoutError) Error() string { return e.cause.Error() + " (" + e.d.String() + ")" }
func (e *timeoutError) Unwrap() error { return e.cause }

// newWatchdog returns a context derived from parent and its watchdog,
// disarmed. Call stop when the attempt ends.
func newWatchdog(parent context.Context) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{cancel: cancel}
	w.t = time.AfterFunc(time.Hour, w.fired)
	w.t.Stop()
	return ctx, w
}

// fired runs when the timer fires: it cancels the context with the
// phase's cause once its deadline has passed, and otherwise sets the
// timer for the time left.
func (w *watchdog) fired() {
	w.mu.Lock()
	w.fire = time.Time{}
	p := w.p
	if p == nil {
		w.mu.Unlock()
		return
	}
	if left := time.Until(w.due); left > 0 {
		w.t.Reset(left)
		w.fire = w.due
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.cancel(&timeoutError{cause: p.cause, d: p.d})
}

// arm restarts the timer: the context is canceled with cause unless arm
// or stop is called again within d. d <= 0 disarms.
func (w *watchdog) arm(d time.Duration, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d <= 0 {
		w.p = nil
		w.t.Stop()
		w.fire = time.Time{}
		return
	}
	w.p = &phase{cause: cause, d: d}
	w.due = time.Now().Add(d)
	if w.fire.IsZero() || w.due.Before(w.fire) {
		w.t.Reset(d)
		w.fire = w.due
	}
}

// stop disarms the timer and releases the context.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.p = nil
	w.t.Stop()
	w.fire = time.Time{}
	w.mu.Unlock()
	w.cancel(context.Canceled)
}

// timeoutCause returns the watchdog cause that ended ctx (a
// *timeoutError), or nil.
func timeoutCause(ctx context.Context) error {
	if te, ok := errors.AsType[*timeoutError](context.Cause(ctx)); ok {
		return te
	}
	return nil
}
