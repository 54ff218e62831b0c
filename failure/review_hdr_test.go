package failure

import (
	"net/http"
	"testing"
)

// FromResponse with odd but plausible input.
func TestHdrFromResponseOddInput(t *testing.T) {
	mk := func(h http.Header) *Error { return FromResponse(&http.Response{StatusCode: 403, Header: h}) }

	// Spaces around the values (a proxy that pads): accepted.
	if fe := mk(http.Header{"X-Belay-Failure-Kind": {" fatal "}, "X-Belay-Failure-Reason": {"\tkilled "}}); fe == nil || fe.Reason != Killed {
		t.Errorf("padded: %v", fe)
	}
	// Header names as net/http hands them (canonical) whatever the wire's
	// case: a lower-case name set via Header.Set is canonicalized.
	h := http.Header{}
	h.Set("x-belay-failure-kind", "fatal")
	h.Set("x-belay-failure-reason", "killed")
	if fe := mk(h); fe == nil {
		t.Errorf("lower-case names set via Set: nil")
	}
	// Several values: the first is read.
	if fe := mk(http.Header{"X-Belay-Failure-Kind": {"fatal", "transient"}, "X-Belay-Failure-Reason": {"killed", "rate_limited"}}); fe == nil || fe.Reason != Killed || fe.Kind != Fatal {
		t.Errorf("multiple values: %v", fe)
	}
	// A kind that is not the reason's default (belay writes some: a
	// permanent model_not_found, a degraded rate_limited) is kept.
	if fe := mk(http.Header{"X-Belay-Failure-Kind": {"permanent"}, "X-Belay-Failure-Reason": {"model_not_found"}}); fe == nil || fe.Kind != Permanent {
		t.Errorf("non-default kind: %v", fe)
	}
	// A reason a newer belay defines (unknown here): kept, with its kind.
	if fe := mk(http.Header{"X-Belay-Failure-Kind": {"fatal"}, "X-Belay-Failure-Reason": {"future_reason"}}); fe == nil || fe.Kind != Fatal || fe.Reason != "future_reason" {
		t.Errorf("unknown reason: %v", fe)
	}
	// Upper-case values: nil (ParseKind is case-sensitive).
	if fe := mk(http.Header{"X-Belay-Failure-Kind": {"Fatal"}, "X-Belay-Failure-Reason": {"killed"}}); fe != nil {
		t.Logf("upper-case kind accepted: %v", fe)
	} else {
		t.Logf("upper-case kind: nil")
	}
	// A comma-joined list (what some proxies make of two values): nil.
	if fe := mk(http.Header{"X-Belay-Failure-Kind": {"fatal, fatal"}, "X-Belay-Failure-Reason": {"killed, killed"}}); fe != nil {
		t.Errorf("comma-joined: %v", fe)
	}
	// A nil Header map: no panic.
	if fe := FromResponse(&http.Response{StatusCode: 500}); fe != nil {
		t.Errorf("nil header map: %v", fe)
	}
	// SetHeader with no reason leaves earlier values in place.
	h = http.Header{}
	SetHeader(h, &Error{Kind: Fatal, Reason: Killed})
	SetHeader(h, &Error{Kind: Transient})
	if h.Get(HeaderReason) != "killed" {
		t.Errorf("SetHeader with no reason changed %v", h)
	}
}
