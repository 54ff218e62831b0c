package failure_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/belay-run/belay/failure"
)

func ExampleClassifyResponse() {
	h := http.Header{}
	h.Set("Retry-After", "2")
	body := []byte(`{"error": {"message": "Rate limit reached for gpt-4o on requests per min (RPM)", "type": "requests", "code": "rate_limit_exceeded"}}`)

	e := failure.ClassifyResponse(failure.DialectOpenAI, 429, h, body)
	fmt.Println(e.Kind, e.Reason, e.RetryAfter)
	fmt.Println(errors.Is(e, failure.Transient))
	// Output:
	// transient rate_limited 2s
	// true
}

func ExampleClassifyResponse_insufficientQuota() {
	// A 429 that is not a rate limit: retrying cannot help, another
	// deployment may.
	body := []byte(`{"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": "insufficient_quota"}}`)
	e := failure.ClassifyResponse(failure.DialectOpenAI, 429, nil, body)
	fmt.Println(e.Kind, e.Reason)
	// Output: degraded quota_exhausted
}

func ExampleClassifyResponse_errorInside200() {
	// An OpenAI-compatible router answered HTTP 200 with an error object.
	body := []byte(`{"error": {"message": "Upstream provider returned an error", "code": 502}}`)
	e := failure.ClassifyResponse(failure.DialectOpenAI, 200, nil, body)
	fmt.Println(e.Kind, e.Reason)

	ok := []byte(`{"choices": [{"message": {"content": "hi"}}]}`)
	fmt.Println(failure.ClassifyResponse(failure.DialectOpenAI, 200, nil, ok) == nil)
	// Output:
	// transient server_error
	// true
}

func ExampleClassifyResponseAt() {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", "Sun, 29 Nov 2026 10:00:30 GMT")
	h.Set("X-Should-Retry", "false")
	e := failure.ClassifyResponseAt(now, failure.DialectAnthropic, 503, h, nil)
	fmt.Println(e.Kind, e.Reason, e.RetryAfter, e.NoRetry)
	// Output: degraded overloaded 30s true
}

func ExampleStreamWatcher() {
	w := failure.NewStreamWatcher(failure.DialectAnthropic)
	events := []struct{ name, data string }{
		{"message_start", `{"type": "message_start", "message": {"usage": {"input_tokens": 95, "output_tokens": 1}}}`},
		{"content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking"}}`},
		{"error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`},
	}
	for _, ev := range events {
		o := w.Observe(ev.name, []byte(ev.data))
		if o.FirstOutput {
			fmt.Println("output started at", ev.name)
		}
		if o.Err != nil {
			fmt.Println(o.Err.Reason, "after output:", o.Err.OutputStarted)
		}
	}
	// Output:
	// output started at content_block_delta
	// overloaded after output: true
}

func ExampleParseDelay() {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, s := range []string{"17", "1.5s", "6m0s", "Sun, 29 Nov 2026 10:00:30 GMT", "2026-11-29T09:00:00Z", "-1"} {
		d, ok := failure.ParseDelay(s, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 17s true
	// 1.5s true
	// 6m0s true
	// 30s true
	// 0s true
	// 0s false
}
