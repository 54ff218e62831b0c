package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
)

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

// wire writes req with write into a buffer and returns the bytes, the
// error, the body's Close count and the trace hooks called, in order.
func wire(t *testing.T, mk func(body io.ReadCloser) *http.Request, body string, write func(*bufio.Writer, *http.Request) error) (string, error, int, []string) {
	t.Helper()
	var hooks []string
	cc := &closeCounter{Reader: strings.NewReader(body)}
	req := mk(cc)
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteHeaders: func() { hooks = append(hooks, "headers") },
		WroteRequest: func(i httptrace.WroteRequestInfo) { hooks = append(hooks, "request:"+errString(i.Err)) },
	})
	req = req.WithContext(ctx)
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	err := write(bw, req)
	if ferr := bw.Flush(); ferr != nil {
		t.Fatal(ferr)
	}
	return out.String(), err, cc.closes, hooks
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// The lean writer puts the same bytes on the wire as http.Request.Write,
// calls the same trace hooks, closes the body once, and fails the same way
// on a body whose length differs from ContentLength.
func TestWriteRequestMatchesRequestWrite(t *testing.T) {
	type mkReq func(body io.ReadCloser) *http.Request
	withBody := func(method, url string, n int64, hdr http.Header) mkReq {
		return func(body io.ReadCloser) *http.Request {
			req, err := http.NewRequest(method, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Body, req.ContentLength = body, n
			if n == 0 {
				req.Body = http.NoBody
			}
			for k, v := range hdr {
				req.Header[k] = v
			}
			return req
		}
	}
	cases := []struct {
		name string
		mk   mkReq
		body string
	}{
		{"gateway call", withBody("POST", "http://127.0.0.1:8080/v1/chat/completions", 13, http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json"}, "User-Agent": {"belay/1"},
			"Authorization": {"Bearer sk-x"}, "X-Stainless-Retry-Count": {"0"}, "Idempotency-Key": {"k1"},
		}), `{"model":"m"}`},
		{"no user agent in the header: Go's default", withBody("POST", "http://h:1/p?q=1&r=%20", 2, http.Header{"B": {"1"}, "A": {"2", "3"}}), "{}"},
		{"empty user agent: none sent", withBody("POST", "http://h/p", 2, http.Header{"User-Agent": {""}}), "{}"},
		{"values with CR, LF and spaces", withBody("POST", "http://h/p", 2, http.Header{"X-A": {"  a\r\nb \t"}, "User-Agent": {" ua\n"}}), "{}"},
		{"excluded fields in the header", withBody("POST", "http://h/p", 2, http.Header{
			"Host": {"other"}, "Content-Length": {"99"}, "Transfer-Encoding": {"gzip"}, "Trailer": {"X"}, "Lower": {"v"}, "host": {"x"},
		}), "{}"},
		{"POST without a body", withBody("POST", "http://h/p", 0, nil), ""},
		{"GET without a body", withBody("GET", "http://h/p", 0, nil), ""},
		{"DELETE without a body", withBody("DELETE", "http://h/p", 0, nil), ""},
		{"IPv6 host", withBody("PUT", "http://[::1]:9/p", 1, nil), "x"},
		{"Host field set on the request", func(b io.ReadCloser) *http.Request {
			r := withBody("POST", "http://h/p", 1, nil)(b)
			r.Host = "api.example.com"
			return r
		}, "x"},
		{"body shorter than ContentLength", withBody("POST", "http://h/p", 10, nil), "short"},
		{"body longer than ContentLength", withBody("POST", "http://h/p", 2, nil), "longer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr, wantCloses, wantHooks := wire(t, tc.mk, tc.body, func(bw *bufio.Writer, r *http.Request) error { return r.Write(bw) })
			var ok bool
			got, gotErr, gotCloses, gotHooks := wire(t, tc.mk, tc.body, func(bw *bufio.Writer, r *http.Request) error {
				var err error
				ok, err = writeRequest(bw, r)
				return err
			})
			if !ok {
				t.Fatal("writeRequest declined a request it is meant to write")
			}
			if got != want {
				t.Errorf("on the wire:\n%q\nwant (Request.Write):\n%q", got, want)
			}
			if errString(gotErr) != errString(wantErr) {
				t.Errorf("error %v; want %v", gotErr, wantErr)
			}
			if gotCloses != wantCloses || tc.body != "" && gotCloses != 1 {
				t.Errorf("body closed %d times; Request.Write closes it %d", gotCloses, wantCloses)
			}
			if strings.Join(gotHooks, ",") != strings.Join(wantHooks, ",") {
				t.Errorf("trace hooks %v; want %v", gotHooks, wantHooks)
			}
		})
	}
}

// Requests outside the fast path are declined with nothing written and
// the body left open, for Request.Write to handle.
func TestWriteRequestDeclines(t *testing.T) {
	base := func() *http.Request {
		r, err := http.NewRequest("POST", "http://h/p", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := map[string]func(r *http.Request) *http.Request{
		"connection close": func(r *http.Request) *http.Request { r.Close = true; return r },
		"chunked":          func(r *http.Request) *http.Request { r.TransferEncoding = []string{"chunked"}; return r },
		"unknown length":   func(r *http.Request) *http.Request { r.ContentLength = -1; return r },
		"zero with a body": func(r *http.Request) *http.Request { r.ContentLength = 0; return r },
		"trailer":          func(r *http.Request) *http.Request { r.Trailer = http.Header{"X": nil}; return r },
		"unicode host":     func(r *http.Request) *http.Request { r.Host = "bücher.example"; return r },
		"zone in host":     func(r *http.Request) *http.Request { r.Host = "[fe80::1%eth0]:80"; return r },
		"control in path":  func(r *http.Request) *http.Request { r.URL.RawQuery = "a=\x01"; return r },
		"method not token": func(r *http.Request) *http.Request { r.Method = "PO ST"; return r },
		"CONNECT":          func(r *http.Request) *http.Request { r.Method = "CONNECT"; return r },
		"many header keys": func(r *http.Request) *http.Request { manyKeys(r.Header, 30); return r },
		"header field hook": func(r *http.Request) *http.Request {
			return r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{WroteHeaderField: func(string, []string) {}}))
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			cc := &closeCounter{Reader: strings.NewReader("{}")}
			r := base()
			r.Body = cc
			r = change(r)
			var out bytes.Buffer
			bw := bufio.NewWriter(&out)
			ok, err := writeRequest(bw, r)
			_ = bw.Flush()
			if ok || err != nil || out.Len() != 0 || cc.closes != 0 {
				t.Errorf("ok %v, err %v, wrote %q, body closed %d times; want declined with nothing done", ok, err, out.String(), cc.closes)
			}
		})
	}
}

func manyKeys(h http.Header, n int) {
	for i := range n {
		h["X-"+strings.Repeat("a", i+1)] = []string{"v"}
	}
}

// A failed write of the header is returned, and the body is closed.
func TestWriteRequestWriteError(t *testing.T) {
	cc := &closeCounter{Reader: strings.NewReader("{}")}
	r, err := http.NewRequest("POST", "http://h/p", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body, r.ContentLength = cc, 2
	bw := bufio.NewWriterSize(failWriter{}, 16)
	ok, err := writeRequest(bw, r)
	if !ok || !errors.Is(err, errFail) || cc.closes != 1 {
		t.Errorf("ok %v, err %v, closes %d; want the writer's error and the body closed once", ok, err, cc.closes)
	}
}

var errFail = errors.New("write failed")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errFail }

// inMemory sees through http.NewRequest's io.NopCloser to the readers
// Request.Write takes as held in memory, and only those.
func TestInMemory(t *testing.T) {
	body := func(r io.Reader) io.Reader {
		req, err := http.NewRequest("POST", "http://h/p", r)
		if err != nil {
			t.Fatal(err)
		}
		return req.Body
	}
	cases := []struct {
		name string
		r    io.Reader
		want bool
	}{
		{"bytes.Reader via NewRequest", body(bytes.NewReader([]byte("x"))), true},
		{"strings.Reader via NewRequest", body(strings.NewReader("x")), true},
		{"bytes.Buffer via NewRequest", body(bytes.NewBufferString("x")), true},
		{"bare bytes.Reader", bytes.NewReader(nil), true},
		{"NopCloser of a reader without WriteTo", io.NopCloser(&closeCounter{Reader: strings.NewReader("x")}), false},
		{"a ReadCloser of its own", &closeCounter{Reader: strings.NewReader("x")}, false},
		{"a pipe", func() io.Reader { r, _ := io.Pipe(); return r }(), false},
	}
	for _, tc := range cases {
		if got := inMemory(tc.r); got != tc.want {
			t.Errorf("%s: inMemory %v; want %v", tc.name, got, tc.want)
		}
	}
}
