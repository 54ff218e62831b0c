package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// advResult is everything observable about one write of a request.
type advResult struct {
	ok     bool
	wire   string
	err    error
	closes int
	hooks  []string
}

func (r advResult) String() string {
	return fmt.Sprintf("wire=%q err=%v (%T) closes=%d hooks=%v", r.wire, r.err, r.err, r.closes, r.hooks)
}

// advWrite builds a request with mk, attaches a WroteHeaders/WroteRequest
// trace, and writes it to dst through a bufio.Writer of size 4096, with
// writeRequest (fast) or http.Request.Write.
func advWrite(t *testing.T, fast bool, dst io.Writer, mk func() (*http.Request, *closeCounter)) advResult {
	t.Helper()
	req, cc := mk()
	var res advResult
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteHeaders: func() { res.hooks = append(res.hooks, "headers") },
		WroteRequest: func(i httptrace.WroteRequestInfo) { res.hooks = append(res.hooks, "request:"+errString(i.Err)) },
	})
	req = req.WithContext(ctx)
	var buf bytes.Buffer
	if dst == nil {
		dst = &buf
	}
	bw := bufio.NewWriter(dst)
	if fast {
		res.ok, res.err = writeRequest(bw, req)
	} else {
		res.ok, res.err = true, req.Write(bw)
	}
	bw.Flush()
	res.wire = buf.String()
	if cc != nil {
		res.closes = cc.closes
	}
	return res
}

func postWithHeader(k string, v ...string) func() (*http.Request, *closeCounter) {
	return func() (*http.Request, *closeCounter) {
		cc := &closeCounter{Reader: strings.NewReader("{}")}
		req, _ := http.NewRequest("POST", "http://127.0.0.1:8080/v1/chat/completions", nil)
		req.Body, req.ContentLength = cc, 2
		req.Header["Content-Type"] = []string{"application/json"}
		req.Header[k] = v
		return req, cc
	}
}

// Tests from an adversarial review of writeRequest; each failed on its
// first version.

// Header keys that are not field names (RFC 9110 tokens): Request.Write
// (Header.writeSubset) drops them, so writeRequest declines the request
// rather than write them (a key with CR LF would add a header line).
func TestWriteRequestDeclinesInvalidFieldNames(t *testing.T) {
	for _, k := range []string{
		"X-Evil\r\nInjected: yes",
		"X Space",
		"Colon:Key",
		"",
		"Ключ",
		"X\tTab",
		"X(paren)",
	} {
		t.Run(fmt.Sprintf("%q", k), func(t *testing.T) {
			mk := postWithHeader(k, "v")
			want := advWrite(t, false, nil, mk)
			got := advWrite(t, true, nil, mk)
			if got.ok || got.wire != "" || got.closes != 0 {
				t.Errorf("header key %q: writeRequest wrote %s; want it declined with nothing written, for Request.Write (which drops the key: %s)", k, got, want)
			}
		})
	}
}

// slowBody is a body that is not one of the in-memory readers net/http
// knows (so Request.Write sets FlushHeaders), and that records, on its
// first Read, what had already reached the underlying writer.
type slowBody struct {
	r       io.Reader
	sink    *bytes.Buffer
	atFirst *string
	reads   int
	closes  int
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.reads == 0 {
		*b.atFirst = b.sink.String()
	}
	b.reads++
	return b.r.Read(p)
}
func (b *slowBody) Close() error { b.closes++; return nil }

// Request.Write flushes the head to the connection before it reads a body
// that is not a known in-memory reader (transferWriter.FlushHeaders,
// go.dev/issue/22088), so a server sees the head while a slow or streaming
// body is produced; writeRequest does the same.
func TestWriteRequestFlushesHeadBeforeStreamingBody(t *testing.T) {
	run := func(fast bool) (string, bool) {
		var sink bytes.Buffer
		var atFirst string
		body := &slowBody{r: strings.NewReader("{}"), sink: &sink, atFirst: &atFirst}
		req, _ := http.NewRequest("POST", "http://h/p", nil)
		req.Body, req.ContentLength = body, 2
		bw := bufio.NewWriter(&sink)
		ok := true
		if fast {
			ok, _ = writeRequest(bw, req)
		} else {
			_ = req.Write(bw)
		}
		bw.Flush()
		return atFirst, ok
	}
	want, _ := run(false)
	got, ok := run(true)
	if !ok {
		t.Fatal("writeRequest declined a body not held in memory; it writes them, flushing the head first")
	}
	if got != want || !strings.HasSuffix(got, "\r\n\r\n") {
		t.Errorf("on the connection when the body is first read:\nexpected (Request.Write): %q\ngot (writeRequest):       %q", want, got)
	}
}

// With a connection whose write fails, the head's flush (the same rule)
// fails before the body is read: the write error is returned and given to
// WroteRequest, and the body is closed unread, as with Request.Write.
func TestWriteRequestHeadFlushError(t *testing.T) {
	mk := func() (*http.Request, *closeCounter) {
		cc := &closeCounter{Reader: strings.NewReader("{}")} // not a *strings.Reader itself: not "in memory" to net/http
		req, _ := http.NewRequest("POST", "http://h/p", nil)
		req.Body, req.ContentLength = cc, 2
		return req, cc
	}
	want := advWrite(t, false, failWriter{}, mk)
	got := advWrite(t, true, failWriter{}, mk)
	if !got.ok || got.closes != 1 || (errString(got.err) != errString(want.err) || strings.Join(got.hooks, ",") != strings.Join(want.hooks, ",")) {
		t.Errorf("write to a failing connection:\nexpected (Request.Write): %s\ngot (writeRequest):       %s", want, got)
	}
}

type errBody struct{ closes int }

var errBodyRead = errors.New("body read failed")

func (b *errBody) Read([]byte) (int, error) { return 0, errBodyRead }
func (b *errBody) Close() error             { b.closes++; return nil }

// A body read error: Request.Write returns it wrapped in net/http's
// unexported requestBodyReadError (same text, errors.Is(err, cause)
// false); writeRequest returns the cause itself, as its doc says. The
// text, the hooks and the body's Close match.
func TestAdvBodyReadError(t *testing.T) {
	run := func(fast bool) (error, error, bool, int) {
		var traced error
		b := &errBody{}
		req, _ := http.NewRequest("POST", "http://h/p", nil)
		req.Body, req.ContentLength = b, 2
		req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			WroteRequest: func(i httptrace.WroteRequestInfo) { traced = i.Err },
		}))
		bw := bufio.NewWriter(io.Discard)
		ok := true
		var err error
		if fast {
			ok, err = writeRequest(bw, req)
		} else {
			err = req.Write(bw)
		}
		return err, traced, ok, b.closes
	}
	want, wantTraced, _, wantCloses := run(false)
	got, gotTraced, ok, gotCloses := run(true)
	if !ok {
		t.Fatal("declined")
	}
	if errString(got) != errString(want) || !errors.Is(got, errBodyRead) || got != gotTraced || errString(wantTraced) != errString(want) ||
		gotCloses != wantCloses {
		t.Errorf("body read error: got %v (WroteRequest %v, closes %d); want the cause %v with Request.Write's text %q, reported to WroteRequest, closes %d",
			got, gotTraced, gotCloses, errBodyRead, want, wantCloses)
	}
}

// At the transport: a request whose header has a key with CR LF (or a
// value with one). net/http's Transport refuses it and sends nothing; so
// does h1 (checkRequest). Unchecked, the server would parse a header line
// the key smuggled in.
func TestTransportRefusesInvalidHeader(t *testing.T) {
	seen := make(chan string, 4)
	url := rawServer(t, func(n int, c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			seen <- req.Header.Get("Injected")
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	results := map[string]string{}
	for name, rt := range transports() {
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader("{}"))
		req.Header["X-A: 1\r\nInjected"] = []string{"yes"}
		resp, err := rt.RoundTrip(req)
		got := ""
		if err == nil {
			resp.Body.Close()
			got = "sent; server saw Injected=" + <-seen
		} else {
			got = "refused: " + err.Error()
		}
		results[name] = got
		if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
	if !strings.HasPrefix(results["net/http"], "refused") || results["h1"] != `refused: h1: invalid header field name "X-A: 1\r\nInjected"` {
		t.Errorf("header key \"X-A: 1\\r\\nInjected\": net/http %s; h1 %s; want both refused, h1 naming the key", results["net/http"], results["h1"])
	}
	for _, v := range []string{"Bearer a\x01b", "Bearer ab\r\n", "Bearer a\x7f"} {
		for name, rt := range transports() {
			req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader("{}"))
			req.Header.Set("Authorization", v)
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				<-seen
				t.Errorf("%s sent Authorization %q; want it refused", name, v)
			} else if name == "h1" && err.Error() != `h1: invalid header field value for "Authorization"` {
				t.Errorf("h1 refused Authorization %q with %q; want it to name the field", v, err)
			}
		}
	}
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer a\tb") // a tab is allowed
	if resp, err := New(Options{}).RoundTrip(req); err != nil {
		t.Errorf("h1 refused a value with a tab: %v", err)
	} else {
		resp.Body.Close()
		<-seen
	}
}

// gatedBody is a body of n bytes whose first Read waits until gate is
// closed (or, so that the test cannot hang, until giveUp has passed).
type gatedBody struct {
	gate   <-chan struct{}
	giveUp <-chan time.Time
	n      int
	opened bool
	gave   *atomic.Bool
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if !b.opened {
		select {
		case <-b.gate:
		case <-b.giveUp:
			b.gave.Store(true)
		}
		b.opened = true
	}
	if b.n == 0 {
		return 0, io.EOF
	}
	m := min(len(p), b.n)
	clear(p[:m])
	b.n -= m
	return m, nil
}
func (b *gatedBody) Close() error { return nil }

// The head's flush at the transport: a large request (over inlineBodyMax,
// written by exchangeLarge's goroutine so that an early answer can be
// read) whose body is produced only after the server has seen the head.
// The server reads the head and answers 401 at once; each transport gets
// the 401 with the body still unproduced (the body's guard timer, there so
// that a failure cannot hang the test, never fires).
func TestTransportHeadBeforeLargeStreamingBody(t *testing.T) {
	for name, rt := range transports() {
		t.Run(name, func(t *testing.T) {
			sawHead := make(chan struct{})
			url := rawServer(t, func(n int, c net.Conn, br *bufio.Reader) {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_ = req
				close(sawHead)
				io.WriteString(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			})
			var gave atomic.Bool
			body := &gatedBody{gate: sawHead, giveUp: time.After(2 * time.Second), n: 1 << 20, gave: &gave}
			req, _ := http.NewRequest("POST", url+"/v1/x", nil)
			req.Body, req.ContentLength = body, 1<<20
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			if gave.Load() {
				t.Errorf("%s: expected (net/http Transport): the head reaches the server before the body is read, and the 401 comes back; got: the server had not seen the head when the body's 2s guard gave up (resp err %v)", name, err)
			}
			if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
				c.CloseIdleConnections()
			}
		})
	}
}
