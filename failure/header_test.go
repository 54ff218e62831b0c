package failure

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// SetHeader and FromResponse round-trip a failure's kind and reason; an
// answer without both headers, with a kind this package does not define,
// or with a reason that is not a snake_case name, gives nil. A reason
// this package does not define (a newer gateway's) is kept with its kind.
func TestFailureHeaders(t *testing.T) {
	h := http.Header{}
	SetHeader(h, &Error{Kind: Degraded, Reason: RateLimited, Message: "not in the headers"})
	if h.Get(HeaderKind) != "degraded" || h.Get(HeaderReason) != "rate_limited" {
		t.Fatalf("headers %v", h)
	}
	fe := FromResponse(&http.Response{StatusCode: 429, Header: h})
	if fe == nil || fe.Kind != Degraded || fe.Reason != RateLimited || fe.Status != 429 || !errors.Is(fe, RateLimited) {
		t.Errorf("FromResponse = %+v", fe)
	}
	for _, c := range []struct{ kind, reason string }{
		{"", ""}, {"fatal", ""}, {"", "killed"}, {"deadly", "killed"}, {"deadly", "no_such_reason"},
		{"fatal", "No_Such"}, {"fatal", "_x"}, {"fatal", "9lives"}, {"fatal", "rate-limited"}, {"fatal", "a b"},
		{"transient", "x" + strings.Repeat("y", 64)},
	} {
		h := http.Header{}
		if c.kind != "" {
			h.Set(HeaderKind, c.kind)
		}
		if c.reason != "" {
			h.Set(HeaderReason, c.reason)
		}
		if fe := FromResponse(&http.Response{StatusCode: 403, Header: h}); fe != nil {
			t.Errorf("kind %q reason %q: %+v, want nil", c.kind, c.reason, fe)
		}
	}
	h = http.Header{}
	h.Set(HeaderKind, "transient")
	h.Set(HeaderReason, "quota_window_2")
	fe = FromResponse(&http.Response{StatusCode: 503, Header: h})
	if fe == nil || fe.Kind != Transient || fe.Reason != "quota_window_2" || fe.Status != 503 ||
		!errors.Is(fe, Transient) || errors.Is(fe, RateLimited) {
		t.Errorf("a newer gateway's reason: FromResponse = %+v", fe)
	}
	if FromResponse(nil) != nil {
		t.Error("nil response")
	}
	SetHeader(h, nil) // no panic, no change
}
