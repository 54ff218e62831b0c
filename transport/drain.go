package transport

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// ErrClosed is returned by a request through a Transport after Close.
var ErrClosed = errors.New("transport: closed")

// errClosing is the cause the calls still in flight when Close gives up
// waiting for them see.
var errClosing = errors.New("transport: closed with the call in flight")

// drain counts the calls in flight through a Transport Open built, so that
// Close lets them finish (and be charged and recorded) before it closes
// the store, and refuses calls after Close.
type drain struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	stop   context.Context // canceled when Close stops waiting
	cancel context.CancelCauseFunc
}

func newDrain() *drain {
	d := &drain{}
	d.stop, d.cancel = context.WithCancelCause(context.Background())
	return d
}

// enter counts a call about to be served; false once closed.
func (d *drain) enter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.wg.Add(1)
	return true
}

// handler wraps h: each call leaves the count when h returns, and is
// canceled when Close stops waiting (its writes cut at once, as by a
// passed write deadline, so a caller that does not read cannot hold it).
func (d *drain) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer d.wg.Done()
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		stop := context.AfterFunc(d.stop, func() {
			cancel(context.Cause(d.stop))
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now())
		})
		defer stop()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// close refuses new calls and waits for those in flight, for up to grace
// or until ctx ends; then it cancels those left and waits for them to
// return (they are charged for what they used), at most cutWait more.
func (d *drain) close(ctx context.Context, grace time.Duration) {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-ctx.Done():
	case <-t.C:
	}
	d.cancel(errClosing)
	cut := time.NewTimer(cutWait)
	defer cut.Stop()
	select {
	case <-done:
	case <-cut.C:
	}
}

// cutWait bounds the wait for canceled calls to return in Close.
const cutWait = 5 * time.Second
