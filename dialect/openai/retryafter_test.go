package openai_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
)

// retry-after-ms (read first by the OpenAI SDKs) is the failure's
// RetryAfter rounded up to the millisecond, never below it: a client that
// waits exactly that long must not come back early (adversary finding: a
// gateway's wait of 400 µs was written as retry-after-ms 0).
func TestWriteFailureRetryAfterRoundsUp(t *testing.T) {
	for _, c := range []struct {
		wait time.Duration
		want string
	}{
		{1500 * time.Microsecond, "2"},
		{999_600 * time.Microsecond, "1000"},
		{400 * time.Microsecond, "1"},
	} {
		w := httptest.NewRecorder()
		openai.WriteFailure(w, &failure.Error{Kind: failure.Degraded, Reason: failure.CircuitOpen, Message: "all open",
			RetryAfter: c.wait, HasRetryAfter: true})
		if got := w.Header().Get("Retry-After-Ms"); got != c.want {
			t.Errorf("wait %v: retry-after-ms %q (retry-after %q); want %q, not less than the wait",
				c.wait, got, w.Header().Get("Retry-After"), c.want)
		}
	}
}
