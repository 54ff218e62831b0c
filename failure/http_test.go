package failure

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// countingReader serves prefix and then an endless run of fill bytes,
// counting what was read.
type countingReader struct {
	prefix []byte
	fill   byte
	n      int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	k := 0
	for k < len(p) && len(r.prefix) > 0 {
		p[k] = r.prefix[0]
		r.prefix = r.prefix[1:]
		k++
	}
	for ; k < len(p); k++ {
		p[k] = r.fill
	}
	r.n += int64(k)
	return k, nil
}

func response(status int, h http.Header, body io.Reader) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(body)}
}

func TestClassifyHTTPReadsOnlyTheHead(t *testing.T) {
	// A 429 whose error object is followed by megabytes of padding: the body
	// never ends, so reading it all would never return.
	r := &countingReader{
		prefix: []byte(`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"},"padding":"`),
		fill:   'x',
	}
	e, head, err := ClassifyHTTPAt(testNow, DialectOpenAI, response(429, nil, r))
	if err != nil {
		t.Fatal(err)
	}
	if r.n > MaxHeadBytes {
		t.Errorf("read %d bytes, want about %d", r.n, MaxHeadBytes)
	}
	if len(head) != MaxHeadBytes {
		t.Errorf("head is %d bytes, want %d", len(head), MaxHeadBytes)
	}
	if e == nil || e.Reason != QuotaExhausted {
		t.Errorf("got %v, want quota_exhausted from the head", e)
	}

	// A huge HTML page from a proxy.
	r = &countingReader{prefix: []byte("<html><title>502 Bad Gateway</title>"), fill: ' '}
	e, _, _ = ClassifyHTTPAt(testNow, DialectOpenAI, response(502, hdr("content-type", "text/html"), r))
	if e == nil || e.Reason != ServerError || e.Message != "502 Bad Gateway" {
		t.Errorf("got %+v", e)
	}

	// A huge successful body is OK.
	r = &countingReader{prefix: []byte(`{"id":"c","choices":[{"message":{"content":"`), fill: 'a'}
	if e, _, _ := ClassifyHTTPAt(testNow, DialectOpenAI, response(200, nil, r)); e != nil {
		t.Errorf("huge OK body: %v", e)
	}
}

func TestClassifyHTTP(t *testing.T) {
	body := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	e, head, err := ClassifyHTTP(DialectAnthropic, response(529, hdr("request-id", "req_1", "retry-after", "3"), strings.NewReader(body)))
	if err != nil || string(head) != body {
		t.Fatalf("head %q, err %v", head, err)
	}
	if e.Reason != Overloaded || e.Kind != Transient || e.RequestID != "req_1" || !e.HasRetryAfter || e.RetryAfter.Seconds() != 3 {
		t.Errorf("got %+v", e)
	}

	ok := `{"id":"c","choices":[]}`
	if e, head, err := ClassifyHTTP(DialectOpenAI, response(200, nil, strings.NewReader(ok))); e != nil || string(head) != ok || err != nil {
		t.Errorf("OK response: %v, %q, %v", e, head, err)
	}

	// A 2xx stream is left unread for a StreamWatcher.
	stream := strings.NewReader("data: {}\n\n")
	e, head, err = ClassifyHTTP(DialectOpenAI, response(200, hdr("content-type", "text/event-stream"), stream))
	if e != nil || head != nil || err != nil || stream.Len() != len("data: {}\n\n") {
		t.Errorf("stream: %v, %q, %v, %d left", e, head, err, stream.Len())
	}

	if _, _, err := ClassifyHTTP(DialectOpenAI, nil); err == nil {
		t.Error("nil response accepted")
	}

	noBody := &http.Response{StatusCode: 503, Header: http.Header{}}
	if e, _, err := ClassifyHTTP(DialectOpenAI, noBody); err != nil || e.Reason != Overloaded {
		t.Errorf("no body: %v, %v", e, err)
	}
}

func TestClassifyHTTPReadErrors(t *testing.T) {
	// A 500 whose body breaks is still a server error.
	broken := io.MultiReader(strings.NewReader("<html>"), iotest.ErrReader(io.ErrUnexpectedEOF))
	e, head, err := ClassifyHTTP(DialectOpenAI, response(500, nil, broken))
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(head) != "<html>" || e.Reason != ServerError {
		t.Errorf("500: %v, %q, %v", e, head, err)
	}
	// A 200 whose body breaks is a connection error.
	broken = io.MultiReader(bytes.NewReader([]byte(`{"id":`)), iotest.ErrReader(io.ErrUnexpectedEOF))
	e, _, err = ClassifyHTTP(DialectOpenAI, response(200, nil, broken))
	if err == nil || e == nil || e.Reason != ConnectionError || e.Status != 200 {
		t.Errorf("200: %+v, %v", e, err)
	}
}
