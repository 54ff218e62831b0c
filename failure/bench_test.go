package failure

import (
	"bytes"
	"net/http"
	"testing"
)

func BenchmarkClassifyResponse(b *testing.B) {
	h := http.Header{}
	h.Set("Retry-After", "2")
	h.Set("X-Request-Id", "req_1")
	body := []byte(`{"error": {"message": "Rate limit reached for gpt-4o on requests per min (RPM): Limit 500, Used 500, Requested 1.", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if e := ClassifyResponseAt(testNow, DialectOpenAI, 429, h, body); e.Reason != RateLimited {
			b.Fatal(e)
		}
	}
}

func BenchmarkStreamWatcher(b *testing.B) {
	var stream bytes.Buffer
	for range 100 {
		stream.WriteString(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"token"},"finish_reason":null}]}` + "\n\n")
	}
	stream.WriteString("data: [DONE]\n\n")
	b.SetBytes(int64(stream.Len()))
	b.ReportAllocs()
	for b.Loop() {
		r := NewSSEReader(bytes.NewReader(stream.Bytes()))
		w := NewStreamWatcher(DialectOpenAI)
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			w.ObserveEvent(ev)
		}
		if !w.Done() {
			b.Fatal("not done")
		}
	}
}
