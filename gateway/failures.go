package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/run"
)

// errUpstreamTooLarge is the cause of an attempt whose upstream response
// (or one stream event) passed max_upstream_body_bytes.
var errUpstreamTooLarge = errors.New("upstream response larger than max_upstream_body_bytes")

// tooLarge is the failure of an attempt whose upstream response passed the
// cap. It is a Degraded ServerError: a chat answer is a few hundred kB at
// most, so a body past the cap (32 MiB by default) is a broken deployment
// or proxy, not a model that may answer differently on a retry. The chain
// falls back to the next deployment (and the breaker counts a failure),
// without retrying this one.
func tooLarge(d string, status int, limit int64) *failure.Error {
	return &failure.Error{Kind: failure.Degraded, Reason: failure.ServerError, Status: status, Deployment: d,
		Message: fmt.Sprintf("upstream deployment %s: response larger than max_upstream_body_bytes (%d bytes); not read further", d, limit),
		Cause:   errUpstreamTooLarge}
}

// upstreamLimit is the configured cap on one upstream response.
func (s *Server) upstreamLimit() int64 {
	if n := s.cfg.MaxUpstreamBodyBytes; n > 0 {
		return n
	}
	return defaultMaxUpstreamBodyBytes
}

const defaultMaxUpstreamBodyBytes = 32 << 20

// errClientGone is the cause of a call whose client went away before its
// answer ended: its connection closed (the request's context ended), or a
// write of the answer to it failed. It is the client's doing: the
// failure's message says so rather than blame the upstream deployment.
var errClientGone = errors.New("the client closed its connection before the answer ended")

// clientGone returns the Canceled failure of a call whose client went
// away; err is what showed it (the failed write, the context's cause).
func clientGone(err error) *failure.Error {
	return failure.Wrap(failure.Canceled, fmt.Errorf("%w (%v)", errClientGone, err))
}

// ownErrors are the gateway's own causes, whose text is fit for a client
// (besides a *timeoutError, which describe names first).
var ownErrors = []error{errNotStream, errStreamNotAsked, errUpstreamTooLarge, errNoSim}

// publicFailure returns fe with a message fit for a client. A failure
// built from a Go error (a network error, whose text names the upstream
// base URL and socket addresses) says "upstream deployment NAME: WHAT"
// instead, WHAT being a short description (connection reset, connection
// refused, timed out, ...). The Go error stays in Cause for the log. Other
// failures (those read from a provider's response) are returned as they
// are.
func publicFailure(fe *failure.Error, dep string) *failure.Error {
	if fe == nil || fe.Cause == nil || failure.As(fe.Cause) != nil || errors.Is(fe.Cause, errUpstreamTooLarge) ||
		errors.Is(fe.Cause, errClientGone) {
		return fe // not from a Go error, or already phrased for the client (tooLarge)
	}
	switch fe.Reason {
	case failure.Timeout, failure.ConnectionError, failure.StreamInterrupted, failure.Canceled,
		failure.ServerError, failure.Unknown:
	default:
		return fe
	}
	cp := *fe
	cp.Message = "upstream deployment " + dep + ": " + describe(fe.Cause)
	return &cp
}

// describe names what a Go error from an upstream exchange means, without
// its text.
func describe(err error) string {
	if te, ok := errors.AsType[*timeoutError](err); ok {
		return te.Error() // names the timeout that passed
	}
	for _, own := range ownErrors {
		if errors.Is(err, own) {
			return own.Error()
		}
	}
	var (
		dns     *net.DNSError
		ne      net.Error
		certErr *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		record  tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.ECONNABORTED):
		return "connection aborted"
	case errors.Is(err, syscall.EPIPE):
		return "connection closed while the request was sent"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before the response ended"
	case errors.As(err, &dns):
		return "host name lookup failed"
	case errors.As(err, &certErr), errors.As(err, &unknown), errors.As(err, &record):
		return "TLS handshake failed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	}
	return "connection failed"
}

// detail returns the text of the first error in err's chain that is not a
// *failure.Error: what the log keeps of a failure the client sees without
// internals. It is "" when there is none.
func detail(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := e.(*failure.Error); !ok {
			return e.Error()
		}
	}
	return ""
}

// finalFailure is the failure the call ends with, err being the router's.
// A client that went away ends it Canceled. A chain stopped by its context
// for another reason — the run layer canceling the turn because the run
// was killed, stopped (turn cap, budget) or out of time — ends it with the
// run layer's cause (a *failure.Error: killed, max_turns_exceeded,
// deadline_exceeded, ...), so the client learns why, in its dialect,
// instead of a bare "canceled".
func (c *call) finalFailure(turnCtx context.Context, err error) error {
	if err == nil {
		return nil
	}
	fe := asFailure(err)
	if cause := context.Cause(c.r.Context()); errors.Is(cause, errShutdown) {
		if errors.Is(fe, errShutdown) {
			return fe
		}
		cp := *failure.Wrap(failure.Canceled, cause) // the client is still there: see shuttingDown
		cp.OutputStarted, cp.Deployment = fe.OutputStarted, fe.Deployment
		return &cp
	}
	if c.r.Context().Err() != nil { // the client went away
		if errors.Is(fe, errClientGone) {
			return fe
		}
		cp := *clientGone(context.Cause(c.r.Context()))
		cp.OutputStarted, cp.Deployment = fe.OutputStarted, fe.Deployment
		return &cp
	}
	if fe.Reason != failure.Canceled && fe.Reason != failure.DeadlineExceeded {
		return endedInFlight(fe)
	}
	cause := failure.As(context.Cause(turnCtx))
	if cause == nil || cause == fe {
		return fe
	}
	cp := *endedInFlight(cause)
	cp.OutputStarted = cp.OutputStarted || fe.OutputStarted
	if cp.Deployment == "" {
		cp.Deployment = fe.Deployment
	}
	return &cp
}

// shuttingDownType is the error type (OpenAI code) of a call the
// gateway's shutdown canceled.
const shuttingDownType = "shutting_down"

// shuttingDown answers a call that the shutdown canceled before its
// answer (its client still waits) with 503 in the client's dialect, type
// "shutting_down", and no x-should-retry: false: the client's SDK may
// retry, reaching another replica or the gateway once restarted. What
// the call used upstream is charged (see attempt).
func (c *call) shuttingDown(fe *failure.Error) (int, error) {
	// Labelled transient, as the answer asks for a retry (fe, the call's
	// own cancel, is fatal).
	c.unavailable(&failure.Error{Kind: failure.Transient, Reason: failure.ServerError}, shuttingDownType, shuttingDownMessage, 0)
	return http.StatusServiceUnavailable, fe
}

const shuttingDownMessage = "belay is shutting down: the call was canceled after timeouts.shutdown; retry"

// shutdownEvent is the error event that ends a stream the shutdown
// canceled: the type and message of shuttingDown's 503, in the client's
// dialect (numbered after the stream's events in a Responses stream).
func (c *call) shutdownEvent(fol streamFollower) []byte {
	if c.f.dialect() == failure.DialectAnthropic {
		return anthropic.ErrorEvent(shuttingDownType, shuttingDownMessage)
	}
	if rs, ok := fol.(*responsesStream); ok {
		return openai.ResponsesErrorEvent(shuttingDownType, shuttingDownType, shuttingDownMessage, rs.acc.NextSequence())
	}
	return openai.ErrorEvent(shuttingDownType, shuttingDownType, shuttingDownMessage)
}

// unavailable writes 503 in the client's dialect with error type typ
// (OpenAI's code too) and msg, and Retry-After when retryAfterMS > 0;
// without x-should-retry: false, so the client's SDK may retry. Its
// failure headers (failure.SetHeader) name fe.
func (c *call) unavailable(fe *failure.Error, typ, msg string, retryAfterMS int64) {
	h := c.w.Header()
	failure.SetHeader(h, fe)
	if c.f.dialect() == failure.DialectAnthropic {
		if retryAfterMS > 0 {
			anthropic.SetRetryAfter(h, retryAfterMS)
		}
		anthropic.WriteError(c.w, http.StatusServiceUnavailable, typ, msg)
		return
	}
	if retryAfterMS > 0 {
		openai.SetRetryAfter(h, retryAfterMS)
	}
	openai.WriteError(c.w, http.StatusServiceUnavailable, typ, typ, msg)
}

// Store unavailability: the run layer could not read or write belay's
// store (a locked SQLite file, a dropped PostgreSQL connection). It is
// transient, and nothing was sent upstream or charged, so the answer lets
// the client's SDK retry: 503 with Retry-After, no x-should-retry: false.
const (
	storeUnavailableType    = "store_unavailable"
	storeUnavailableMessage = "belay's store is unavailable (the call was not sent upstream and nothing was charged); retry shortly"
	storeRetryAfterMS       = 1000
)

// errStoreUnavailable is the failure reported (metrics, logs) for a call
// refused because the store failed; Cause holds the store's error.
func errStoreUnavailable(cause error) *failure.Error {
	return &failure.Error{Kind: failure.Transient, Reason: failure.ServerError, Status: http.StatusServiceUnavailable,
		Message: storeUnavailableMessage, Cause: cause}
}

// storeUnavailable answers 503 in the client's dialect, with error type
// "store_unavailable" (OpenAI code "store_unavailable") and Retry-After.
func (c *call) storeUnavailable(cause error) (int, error) {
	fe := errStoreUnavailable(cause)
	c.unavailable(fe, storeUnavailableType, storeUnavailableMessage, storeRetryAfterMS)
	return http.StatusServiceUnavailable, fe
}

// endedInFlight returns the run layer's cause of a call's cancel, fe, as the
// client is told it: when its run was ended (by its client, POST
// /v1/belay/runs/{id}/end, or a Go agent's Finish) while the call was in
// flight, fe is run_ended (409, or an error event after the stream began,
// as the run's next call gets) and its message says the call was canceled
// (a newcomer's call got a bare 499 "canceled"); otherwise fe itself.
func endedInFlight(fe *failure.Error) *failure.Error {
	if fe.Reason != failure.RunEnded || !errors.Is(fe, run.ErrEnded) || strings.HasSuffix(fe.Message, inFlightNote) {
		return fe
	}
	cp := *fe
	cp.Message += inFlightNote
	return &cp
}

// inFlightNote ends the message of a call its run's end canceled.
const inFlightNote = " while this call was in flight: the call was canceled and charged for what it used"
