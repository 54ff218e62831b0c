package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A trailer key that is not a field name is refused, as net/http's
// Transport refuses it (an adversarial review: http.Request.Write, h1's
// path for a request with a Trailer, wrote the key raw into the
// "Trailer:" line, so a key with CR LF added a header line of its own).
// Not reachable through the gateway, which sets no Trailer.
func TestInvalidTrailerRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- ""
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		var head strings.Builder
		for {
			line, err := br.ReadString('\n')
			head.WriteString(line)
			if err != nil || line == "\r\n" {
				break
			}
		}
		got <- head.String()
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	}()
	mk := func() *http.Request {
		req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/x", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Body = io.NopCloser(strings.NewReader("{}"))
		req.ContentLength = -1
		req.GetBody = nil
		req.Trailer = http.Header{"X-T\r\nInjected: 1": nil}
		return req
	}
	// What net/http's Transport does with it (no connection is made).
	if _, err := (&http.Transport{}).RoundTrip(mk()); err == nil {
		t.Fatal("net/http's Transport sent the request")
	}
	tr := New(Options{})
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(mk())
	if err == nil {
		resp.Body.Close()
		head := <-got
		t.Errorf("invalid Trailer key: expected an error (as net/http's Transport: invalid trailer field name); got the request sent, head %q", head)
	}
}
