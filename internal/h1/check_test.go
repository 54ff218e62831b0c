package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A request that cannot go on the wire as it is — a method that is not a
// token, a header or trailer key that is not a field name, a header value
// with a control byte other than tab — is refused before any connection
// is made, as net/http's Transport refuses it (adversarial reviews:
// http.Request.Write writes them raw, so one with CR LF put lines of its
// own on the wire). A tab in a value is allowed.
func TestUnwritableRequestRefused(t *testing.T) {
	var conns atomic.Int32
	url := rawServer(t, func(n int, c net.Conn, br *bufio.Reader) {
		conns.Add(1)
		if _, err := http.ReadRequest(br); err == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}
	})
	cases := []struct {
		name, want string
		change     func(*http.Request)
	}{
		{"method with CR LF", `h1: invalid method "GET /admin HTTP/1.1\r\nInjected: 1\r\nX:"`,
			func(r *http.Request) { r.Method = "GET /admin HTTP/1.1\r\nInjected: 1\r\nX:" }},
		{"trailer key with CR LF", `h1: invalid trailer field name "X-T\r\nInjected: 1"`, func(r *http.Request) {
			r.Body, r.ContentLength, r.GetBody = io.NopCloser(strings.NewReader("{}")), -1, nil
			r.Trailer = http.Header{"X-T\r\nInjected: 1": nil}
		}},
		{"header key with CR LF", `h1: invalid header field name "X-A: 1\r\nInjected"`,
			func(r *http.Request) { r.Header["X-A: 1\r\nInjected"] = []string{"yes"} }},
		{"header value with a control byte", `h1: invalid header field value for "Authorization"`,
			func(r *http.Request) { r.Header.Set("Authorization", "Bearer a\x01b") }},
		{"header value with CR LF", `h1: invalid header field value for "Authorization"`,
			func(r *http.Request) { r.Header.Set("Authorization", "Bearer ab\r\n") }},
		{"header value with DEL", `h1: invalid header field value for "Authorization"`,
			func(r *http.Request) { r.Header.Set("Authorization", "Bearer a\x7f") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for name, rt := range transports() {
				req, err := http.NewRequest(http.MethodPost, url+"/v1/x", strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				tc.change(req)
				resp, err := rt.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
					t.Errorf("%s sent the request; want it refused", name)
				} else if name == "h1" && err.Error() != tc.want {
					t.Errorf("h1: %v; want %s", err, tc.want)
				}
			}
		})
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("%d connections reached the server; want none", n)
	}
	req, err := http.NewRequest(http.MethodPost, url+"/v1/x", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer a\tb") // a tab is allowed
	tr := New(Options{})
	defer tr.CloseIdleConnections()
	if resp, err := tr.RoundTrip(req); err != nil {
		t.Errorf("h1 refused a value with a tab: %v", err)
	} else {
		resp.Body.Close()
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
