package failure

import (
	"net/http"
	"strings"
)

// Headers on an error answer that belay wrote itself (its gateway, or its
// transport in process): the failure's kind ("fatal") and reason
// ("max_turns_exceeded"), as Kind.String and Reason name them. The
// answer's body is in the client's dialect, which has no place for them:
// an OpenAI body carries the reason as its code, an Anthropic body only a
// type and a message. A client, whatever its language, reads them from the
// response its SDK's error keeps (openai-go and anthropic-sdk-go:
// Error.Response); a Go agent calls FromResponse.
const (
	HeaderKind   = "X-Belay-Failure-Kind"
	HeaderReason = "X-Belay-Failure-Reason"
)

// SetHeader sets HeaderKind and HeaderReason on h from e.
func SetHeader(h http.Header, e *Error) {
	if e == nil || e.Reason == "" {
		return
	}
	h.Set(HeaderKind, e.Kind.String())
	h.Set(HeaderReason, string(e.Reason))
}

// FromResponse returns the failure a belay error answer names in its
// HeaderKind and HeaderReason (see SetHeader), with the answer's status:
// errors.Is matches it against its Kind and Reason. A reason this package
// does not define (a newer gateway's) is kept as written when it is a
// snake_case name (a lower-case letter, then lower-case letters, digits
// and underscores, at most 64 bytes), with its kind: a caller still
// tells a transient failure from a permanent one. It returns nil for a
// nil response or one without both headers (not written by belay), or
// whose kind is not a failure's (one this package defines, other than
// OK) or whose reason is not such a name. It does not read the body.
// Safe for concurrent use.
//
//	var apiErr *openai.Error
//	if errors.As(err, &apiErr) {
//		if fe := failure.FromResponse(apiErr.Response); fe != nil && errors.Is(fe, failure.MaxTurnsExceeded) { … }
//	}
func FromResponse(resp *http.Response) *Error {
	if resp == nil {
		return nil
	}
	k, err := ParseKind(strings.TrimSpace(resp.Header.Get(HeaderKind)))
	r := Reason(strings.TrimSpace(resp.Header.Get(HeaderReason)))
	if err != nil || k == OK || !r.Known() && !reasonName(string(r)) {
		return nil // a failure is never ok: a breaker would count it a success
	}
	return &Error{Kind: k, Reason: r, Status: resp.StatusCode}
}

// reasonName reports whether s has the shape of a reason's name:
// snake_case, at most 64 bytes.
func reasonName(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
