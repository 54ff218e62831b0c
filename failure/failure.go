// Package failure names what went wrong with a step and what to do about it.
//
// Every failure belay sees — an HTTP error from a provider, an error event in a
// stream, a Go network error, one of belay's own limits — becomes one *Error
// with a Kind (what to do: retry, fall back, stop) and a Reason (what
// happened). The taxonomy is the one in DESIGN.md.
//
// Callers test failures with errors.Is against a Kind or a Reason:
//
//	errors.Is(err, failure.Transient)   // any transient failure
//	errors.Is(err, failure.RateLimited) // this reason only
//
// and read the details with errors.As(err, &*failure.Error).
//
// The classifiers read what the wire says, by meaning before status code:
//
//   - ClassifyResponse / ClassifyHTTP: an HTTP response in the OpenAI,
//     Anthropic or Gemini dialect (JSON error objects, an error object inside
//     an HTTP 200, HTML pages from proxies, other bodies), with the server's
//     hints: retry-after-ms, retry-after, Gemini RetryInfo, x-should-retry,
//     rate-limit reset headers (ParseRetryAfter, ParseDelay);
//   - StreamWatcher / ClassifyStream over SSEReader: error events and error
//     data lines in a stream, a stream cut before its terminator, whether
//     model output had started, and the usage reported;
//   - ClassifyError: Go errors from an attempt that got no response.
//
// Every function that depends on the clock has a twin taking the time
// (ClassifyResponseAt, ClassifyHTTPAt), so tests inject it.
package failure

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind is what a caller should do about a failure. The zero value is OK.
type Kind uint8

const (
	// OK is not a failure.
	OK Kind = iota
	// Transient: the same attempt may succeed later; retry the same
	// deployment with backoff, inside the limits.
	Transient
	// Degraded: this deployment cannot serve now; fall back to the next one
	// and mark the result degraded.
	Degraded
	// Permanent: the request itself is wrong; neither retry nor fall back
	// (except a configured context-window or content-policy fallback).
	Permanent
	// Fatal: the run must stop, keeping its partial state and trace.
	Fatal
)

var kindNames = [...]string{"ok", "transient", "degraded", "permanent", "fatal"}

// String returns the lower-case name used in traces, metrics and config.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error makes a Kind usable as an errors.Is target.
func (k Kind) Error() string { return k.String() }

// ParseKind returns the Kind named s ("ok", "transient", ...).
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("failure: unknown kind %q (want one of %s)", s, strings.Join(kindNames[:], ", "))
}

// Reason is what happened, in the snake_case names of DESIGN.md. A Reason is
// an error value so that errors.Is(err, failure.RateLimited) works.
type Reason string

// Error makes a Reason usable as an errors.Is target.
func (r Reason) Error() string { return string(r) }

// Known reports whether r is one of the reasons this package defines
// (a newer gateway's reason, or free text, is not).
func (r Reason) Known() bool {
	_, ok := reasonKinds[r]
	return ok
}

// Kind returns the kind a reason has by default. A classifier may override
// it (a Retry-After longer than the policy allows turns RateLimited into
// Degraded, for example).
func (r Reason) Kind() Kind {
	if k, ok := reasonKinds[r]; ok {
		return k
	}
	return Permanent
}

// Reasons, grouped by their default Kind.
const (
	// Transient.
	RateLimited       Reason = "rate_limited"
	Overloaded        Reason = "overloaded"
	ServerError       Reason = "server_error"
	Timeout           Reason = "timeout"
	ConnectionError   Reason = "connection_error"
	StreamInterrupted Reason = "stream_interrupted"

	// Degraded.
	QuotaExhausted   Reason = "quota_exhausted"
	Authentication   Reason = "authentication"
	PermissionDenied Reason = "permission_denied"
	ModelNotFound    Reason = "model_not_found"
	// RetryAfterTooLong: the server asked for a longer wait than the policy
	// allows, so the chain moves on instead of waiting.
	RetryAfterTooLong Reason = "retry_after_too_long"
	// CircuitOpen: the deployment's breaker refused the attempt.
	CircuitOpen Reason = "circuit_open"

	// Permanent.
	InvalidRequest        Reason = "invalid_request"
	ContextLengthExceeded Reason = "context_length_exceeded"
	ContentFiltered       Reason = "content_filtered"
	RequestTooLarge       Reason = "request_too_large"
	// Unknown: a failure nothing recognised; treated as permanent so that an
	// unknown condition is never retried blindly.
	Unknown Reason = "unknown"

	// Fatal.
	BudgetExceeded   Reason = "budget_exceeded"
	MaxTurnsExceeded Reason = "max_turns_exceeded"
	DeadlineExceeded Reason = "deadline_exceeded"
	Killed           Reason = "killed"
	ApprovalDenied   Reason = "approval_denied"
	Canceled         Reason = "canceled"
	// ToolDisabled: an operator disabled the tool with the kill switch.
	ToolDisabled Reason = "tool_disabled"
	// OutcomeUnknown: a tool's effect may or may not have happened (its
	// owner died holding the idempotency key); it is not run again.
	OutcomeUnknown Reason = "outcome_unknown"
	// RunEnded: a step asked of a run that has ended (succeeded, failed,
	// stopped by the caller's Finish); a run stopped by a limit or a kill
	// gives that reason instead.
	RunEnded Reason = "run_ended"
)

var reasonKinds = map[Reason]Kind{
	RateLimited: Transient, Overloaded: Transient, ServerError: Transient,
	Timeout: Transient, ConnectionError: Transient, StreamInterrupted: Transient,

	QuotaExhausted: Degraded, Authentication: Degraded, PermissionDenied: Degraded,
	ModelNotFound: Degraded, RetryAfterTooLong: Degraded, CircuitOpen: Degraded,

	InvalidRequest: Permanent, ContextLengthExceeded: Permanent,
	ContentFiltered: Permanent, RequestTooLarge: Permanent, Unknown: Permanent,

	BudgetExceeded: Fatal, MaxTurnsExceeded: Fatal, DeadlineExceeded: Fatal,
	Killed: Fatal, ApprovalDenied: Fatal, Canceled: Fatal, ToolDisabled: Fatal,
	OutcomeUnknown: Fatal, RunEnded: Fatal,
}

// Error is one classified failure. All fields but Kind and Reason are
// optional; the zero value of each means "not known".
//
// An *Error matches errors.Is against its Kind, its Reason, and whatever its
// Cause matches.
type Error struct {
	Kind   Kind
	Reason Reason
	// Status is the HTTP status received, 0 when there was no response.
	Status int
	// ProviderType and ProviderCode are the provider's own error type and
	// code (OpenAI error.type and error.code, Anthropic error.type, Gemini
	// error.status), as sent.
	ProviderType string
	ProviderCode string
	// Param is the request field the provider's error names (OpenAI
	// error.param: "messages", "tools[0].function.name"), as sent; "" when
	// it names none.
	Param string
	// ProviderError is the provider's error object as received (the
	// "error" member of an OpenAI or Anthropic error body, with members
	// belay does not read, such as Anthropic's details.error_code), for a
	// gateway to relay; "" when the body had none in those shapes.
	ProviderError string
	// Message is the provider's (or belay's) human-readable message.
	Message string
	// RetryAfter is the delay the server asked for before a retry, before any
	// cap; meaningful only when HasRetryAfter is true.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// NoRetry is true when the server said x-should-retry: false; such a
	// failure is never retried on the same deployment.
	NoRetry bool
	// RequestID is the provider's request id (x-request-id, request-id).
	RequestID string
	// OutputStarted is true when model output had reached the client before
	// the failure (streams); such a failure cannot be retried invisibly.
	OutputStarted bool
	// Deployment names the deployment the failure came from, when known.
	Deployment string
	// Misdirected is true when the failure is the request's place, not
	// the deployment's health: the deployment does not serve the endpoint
	// called (a chat-only server's 404 for OpenAI's Responses API), or
	// lacks state another account keeps (a previous response). A router
	// falls back from it and its breaker does not count it (see
	// route's healthKind).
	Misdirected bool
	// Cause is the underlying Go error, if any.
	Cause error
}

// New returns an *Error with reason r, its default kind, and message msg.
func New(r Reason, msg string) *Error {
	return &Error{Kind: r.Kind(), Reason: r, Message: msg}
}

// Wrap returns an *Error with reason r and its default kind around cause.
func Wrap(r Reason, cause error) *Error {
	e := &Error{Kind: r.Kind(), Reason: r, Cause: cause}
	if cause != nil {
		e.Message = cause.Error()
	}
	return e
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.String())
	b.WriteString(": ")
	b.WriteString(string(e.Reason))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Deployment != "" {
		fmt.Fprintf(&b, " from %s", e.Deployment)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// ParseText reads text that Error wrote ("transient: rate_limited (HTTP
// 429) from d: slow down"), as a run record keeps it: the kind, the reason,
// and the rest as written after the reason (" (HTTP 429) from d: slow
// down"). ok is false for text of another form (its first word not a
// kind).
func ParseText(s string) (k Kind, r Reason, rest string, ok bool) {
	kind, after, found := strings.Cut(s, ": ")
	if !found {
		return 0, "", "", false
	}
	k, err := ParseKind(kind)
	if err != nil {
		return 0, "", "", false
	}
	i := strings.IndexAny(after, " :")
	if i < 0 {
		i = len(after)
	}
	return k, Reason(after[:i]), after[i:], true
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is this error's Kind or Reason.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Kind:
		return e.Kind == t
	case Reason:
		return e.Reason == t
	}
	return false
}

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	return nil
}

// KindOf returns the Kind of err: OK for nil, the Kind of the *Error in its
// chain, or the classification of a plain Go error (see ClassifyError).
func KindOf(err error) Kind {
	if err == nil {
		return OK
	}
	if fe := As(err); fe != nil {
		return fe.Kind
	}
	return ClassifyError(err).Kind
}
