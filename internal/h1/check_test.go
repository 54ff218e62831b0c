package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A request that cannot go on the wire as it is — a method that is not a
// token, a trailer key that is not a field name — is refused before any
// connection is made, as net/http's Transport refuses it (a third review:
// http.Request.Write, h1's path for the requests writeRequest declines,
// wrote them raw, so one with CR LF put header lines of its own on the
// wire). Neither is reachable through the gateway (POST, no trailer).
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
}
