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
	cause  atomic.Pointer[error]
	t      *time.Timer
}

// newWatchdog returns a context derived from parent and its watchdog,
// disarmed. Call stop when the attempt ends.
func newWatchdog(parent context.Context) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{cancel: cancel}
	w.t = time.AfterFunc(time.Hour, func() {
		if c := w.cause.Load(); c != nil {
			cancel(*c)
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
	w.cause.Store(&cause)
	w.t.Reset(d)
}

// stop disarms the timer and releases the context.
func (w *watchdog) stop() {
	w.t.Stop()
	w.cancel(context.Canceled)
}

// timeoutCause returns the watchdog cause that ended ctx, or nil.
func timeoutCause(ctx context.Context) error {
	switch c := context.Cause(ctx); c {
	case errFirstByte, errFirstToken, errIdle:
		return c
	}
	return nil
}
