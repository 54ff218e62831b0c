package gateway

import (
	"context"
	"errors"
	"sync/atomic"
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
type watchdog struct {
	cancel context.CancelCauseFunc
	phase  atomic.Pointer[phase]
	t      *time.Timer
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
	w.t = time.AfterFunc(time.Hour, func() {
		if p := w.phase.Load(); p != nil {
			cancel(&timeoutError{cause: p.cause, d: p.d})
		}
	})
	w.t.Stop()
	return ctx, w
}

// arm restarts the timer: the context is canceled with cause unless arm
// or stop is called again within d. d <= 0 disarms.
func (w *watchdog) arm(d time.Duration, cause error) {
	w.t.Stop()
	if d <= 0 {
		return
	}
	w.phase.Store(&phase{cause: cause, d: d})
	w.t.Reset(d)
}

// stop disarms the timer and releases the context.
func (w *watchdog) stop() {
	w.t.Stop()
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
