package failure

import (
	"errors"
	"net/http"
	"testing"
)

// SetHeader and FromResponse round-trip a failure's kind and reason; an
// answer without both headers, or with a kind or reason this package does
// not define, gives nil.
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
		{"", ""}, {"fatal", ""}, {"", "killed"}, {"fatal", "no_such_reason"}, {"deadly", "killed"},
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
	if FromResponse(nil) != nil {
		t.Error("nil response")
	}
	SetHeader(h, nil) // no panic, no change
}
