package failure

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// ClassifyError classifies a Go error from an attempt that got no usable
// HTTP response: context deadline → Timeout (transient), cancellation →
// Canceled (fatal), net timeouts → Timeout, refused/reset/closed connections
// → ConnectionError, an unexpected EOF mid-body → ConnectionError. An error
// that already is (or wraps) an *Error is returned as that *Error. Anything
// else is Unknown (permanent), so it is never retried blindly.
//
// The returned *Error has err as its Cause. ClassifyError(nil) returns nil.
func ClassifyError(err error) *Error {
	if err == nil {
		return nil
	}
	if fe := As(err); fe != nil {
		return fe
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Wrap(Canceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return Wrap(Timeout, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF):
		return Wrap(ConnectionError, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Wrap(Timeout, err)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return Wrap(ConnectionError, err)
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return Wrap(ConnectionError, err)
	}
	return Wrap(Unknown, err)
}
