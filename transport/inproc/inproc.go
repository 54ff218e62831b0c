// Package inproc serves HTTP requests through an http.Handler inside the
// process, with streaming: the handler's writes reach the caller's
// Response.Body as they happen (through a pipe that buffers 64 KiB, as a
// socket's send buffer does), and Flush is
// supported, so server-sent events work as they do over a socket.
//
// belay uses it twice: package transport puts the gateway's handler under a
// Go HTTP client (one request path for gateway and library), and the
// gateway reaches the built-in simulator without a socket.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RoundTripper returns an http.RoundTripper that serves every request with
// h in a new goroutine. It is safe for concurrent use.
//
// The response is returned as soon as the handler writes its header (by
// WriteHeader, Write, Flush, or by returning). Closing the response body
// before its end, or canceling the request's context, cancels the context
// the handler sees and makes its further writes fail. Trailers the handler
// declares (the "Trailer" header, or http.TrailerPrefix) are in
// Response.Trailer once the body has been read to its end. A handler panic
// after the header ends the body with an error wrapping
// io.ErrUnexpectedEOF; before it, RoundTrip returns the error and no
// response, as for a connection closed before an answer (one that wraps
// syscall.ECONNRESET for http.ErrAbortHandler, which a simulated reset
// raises). The panic is not re-raised. The handler's writes take a write
// deadline (http.ResponseController.SetWriteDeadline) as a connection's
// do: a write the caller does not read in time fails with ErrWriteTimeout,
// and so does the caller's read of the body after it.
func RoundTripper(h http.Handler) http.RoundTripper { return roundTripper{h} }

type roundTripper struct{ h http.Handler }

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	sreq := req.Clone(ctx)
	var rb *reqBody
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	} else {
		rb = &reqBody{ReadCloser: sreq.Body}
		sreq.Body = rb
	}
	sreq.RemoteAddr = "inproc"
	sreq.RequestURI = req.URL.RequestURI()
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	sreq.Proto, sreq.ProtoMajor, sreq.ProtoMinor = "HTTP/1.1", 1, 1

	pp := newPipe()
	w := &writer{header: http.Header{}, pp: pp, ready: make(chan struct{}), req: req}
	go func() {
		defer cancel(context.Canceled)
		defer func() {
			if req.Body != nil {
				req.Body.Close()
			}
		}()
		defer func() {
			if p := recover(); p != nil {
				// Before the header: no response and an error, as for a
				// connection closed before its answer (a reset, for
				// http.ErrAbortHandler, which a simulated reset raises).
				// After it: the body ends with an error.
				early := fmt.Errorf("inproc: handler panic before answering: %v: %w", p, io.ErrUnexpectedEOF)
				late := fmt.Errorf("inproc: handler panic: %v: %w", p, io.ErrUnexpectedEOF)
				if p == http.ErrAbortHandler {
					early = fmt.Errorf("inproc: handler aborted before answering: %w", syscall.ECONNRESET)
					late = fmt.Errorf("inproc: handler aborted: %w", io.ErrUnexpectedEOF)
				}
				w.abort(early)
				pp.closeWrite(late)
			}
		}()
		rt.h.ServeHTTP(w, sreq)
		w.stopDeadline()
		if err := context.Cause(ctx); err != nil {
			// The caller gave up before the handler answered: the
			// handler's return is no answer (over a socket nothing
			// would have come), not an empty 200 that a caller racing
			// the cancel would take for a cut answer.
			w.abort(err)
		}
		w.finish()
		if err := context.Cause(ctx); err != nil {
			pp.closeWrite(err) // the caller gave up: not a clean end
		} else {
			pp.closeWrite(nil)
		}
	}()
	// When the caller's context ends, the body ends with its error.
	stop := context.AfterFunc(ctx, func() { pp.closeWrite(context.Cause(ctx)) })

	select {
	case <-w.ready:
	case <-ctx.Done():
		// The handler may have answered and returned (its deferred cancel
		// ends ctx) at the same moment: an answer that is ready wins, or
		// a finished response would be reported as canceled.
		select {
		case <-w.ready:
		default:
			stop()
			err := context.Cause(ctx)
			pp.closeRead(err)
			return nil, err
		}
	}
	resp := w.resp
	if resp == nil { // the handler failed before answering
		stop()
		pp.closeRead(w.err)
		return nil, w.err
	}
	if err := rb.failed(); err != nil {
		// The caller's body failed to read: as over a connection, the
		// request fails with that error, whatever the handler made of
		// the body it did not get (adversarial review: a vague 400, and
		// no Go error).
		stop()
		cancel(err)
		pp.closeRead(err)
		return nil, fmt.Errorf("inproc: reading the request body: %w", err)
	}
	resp.Body = &body{pp: pp, cancel: cancel, stop: stop}
	resp.Request = req
	return resp, nil
}

// reqBody is the caller's request body as the handler reads it: it keeps
// the first read error that is not the body's end.
type reqBody struct {
	io.ReadCloser
	mu  sync.Mutex
	err error
}

func (b *reqBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// failed returns the body's read error (nil for a nil body).
func (b *reqBody) failed() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// writer is the handler's http.ResponseWriter.
type writer struct {
	header http.Header
	pp     *pipe
	req    *http.Request

	// The write deadline (SetWriteDeadline), as a socket's: a write
	// started after it fails, and one blocked when it passes (the caller
	// not reading) is failed then, the body ending with the error.
	dmu      sync.Mutex
	deadline time.Time
	timer    *time.Timer
	writing  bool
	timedOut bool // the timer cut a write

	once  sync.Once
	ready chan struct{}
	resp  *http.Response // set once, before ready is closed; nil after abort
	err   error          // set by abort, before ready is closed

	trailerKeys []string
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) WriteHeader(status int) {
	if status < 200 && status != http.StatusSwitchingProtocols {
		return // informational responses are not relayed
	}
	w.writeHeader(status)
}

func (w *writer) writeHeader(status int) {
	w.once.Do(func() {
		h := w.header.Clone()
		resp := &http.Response{
			Status:        strconv.Itoa(status) + " " + http.StatusText(status),
			StatusCode:    status,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        h,
			ContentLength: -1,
		}
		if cl := h.Get("Content-Length"); cl != "" {
			if n, err := strconv.ParseInt(cl, 10, 64); err == nil {
				resp.ContentLength = n
			}
		}
		for _, v := range h.Values("Trailer") {
			for k := range strings.SplitSeq(v, ",") {
				if k = strings.TrimSpace(k); k != "" {
					w.trailerKeys = append(w.trailerKeys, http.CanonicalHeaderKey(k))
				}
			}
		}
		if len(w.trailerKeys) > 0 {
			resp.Trailer = http.Header{}
		}
		h.Del("Trailer")
		w.resp = resp
		close(w.ready)
	})
}

// abort ends the exchange with err instead of a response, if no header
// was sent.
func (w *writer) abort(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
}

func (w *writer) Write(p []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	if w.req.Method == http.MethodHead {
		return len(p), nil
	}
	w.dmu.Lock()
	if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
		w.dmu.Unlock()
		w.pp.closeWrite(ErrWriteTimeout)
		return 0, ErrWriteTimeout
	}
	w.writing = true
	w.dmu.Unlock()
	n, err := w.pp.Write(p)
	w.dmu.Lock()
	w.writing = false
	if err != nil && w.timedOut {
		err = ErrWriteTimeout // the pipe says only "closed"
	}
	w.dmu.Unlock()
	return n, err
}

// ErrWriteTimeout is the error of a handler's write that its write
// deadline (http.ResponseController.SetWriteDeadline) cut off: the caller
// did not read the response body in time. The caller's read of the body
// ends with it too. It wraps os.ErrDeadlineExceeded, as a socket's does.
var ErrWriteTimeout = fmt.Errorf("inproc: the response body was not read before the handler's write deadline: %w", os.ErrDeadlineExceeded)

// SetWriteDeadline sets the deadline of the handler's writes, as
// http.ResponseController.SetWriteDeadline does on a connection: a write
// blocked on a caller that does not read fails when it passes, and a
// write after it fails at once. The zero time is no deadline.
func (w *writer) SetWriteDeadline(t time.Time) error {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.deadline = t
	if t.IsZero() {
		return nil
	}
	w.timer = time.AfterFunc(time.Until(t), func() {
		w.dmu.Lock()
		defer w.dmu.Unlock()
		if w.writing && w.deadline.Equal(t) {
			w.timedOut = true
			w.pp.closeWrite(ErrWriteTimeout)
		}
	})
	return nil
}

// stopDeadline stops the write deadline's timer once the handler returned.
func (w *writer) stopDeadline() {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// Flush sends the header if it was not sent; written bytes need no
// flushing (the pipe hands them to the reader directly).
func (w *writer) Flush() { w.writeHeader(http.StatusOK) }

// FlushError is Flush for http.ResponseController.
func (w *writer) FlushError() error { w.Flush(); return nil }

// finish sends the header if the handler wrote nothing and copies
// trailers into the response before the body ends; after abort it does
// nothing.
func (w *writer) finish() {
	w.writeHeader(http.StatusOK)
	if w.resp == nil {
		return
	}
	for k, vs := range w.header {
		switch {
		case strings.HasPrefix(k, http.TrailerPrefix):
			if w.resp.Trailer == nil {
				w.resp.Trailer = http.Header{}
			}
			w.resp.Trailer[http.CanonicalHeaderKey(strings.TrimPrefix(k, http.TrailerPrefix))] = vs
		case contains(w.trailerKeys, k):
			w.resp.Trailer[k] = vs
		}
	}
}

func contains(s []string, k string) bool {
	for _, x := range s {
		if x == k {
			return true
		}
	}
	return false
}

// body is the caller's Response.Body.
type body struct {
	pp     *pipe
	cancel context.CancelCauseFunc
	stop   func() bool
}

// errBodyClosed is the cause the handler's context sees when the caller
// closes the body early.
var errBodyClosed = errors.New("inproc: response body closed by the client")

func (b *body) Read(p []byte) (int, error) { return b.pp.Read(p) }

func (b *body) Close() error {
	b.stop()
	b.cancel(errBodyClosed)
	b.pp.closeRead(errBodyClosed)
	return nil
}
