package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A method that is not a token is refused, as net/http's Transport
// refuses it (an adversarial review: http.Request.Write, h1's path for a
// request writeRequest declines, wrote the method raw, so one with CR LF
// put header lines of its own on the wire). Not reachable through the
// gateway, whose method is always POST.
func TestInvalidMethodRefused(t *testing.T) {
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
		req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/v1/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Method = "GET /admin HTTP/1.1\r\nInjected: 1\r\nX:"
		return req
	}
	if _, err := (&http.Transport{}).RoundTrip(mk()); err == nil {
		t.Fatal("net/http's Transport sent the request")
	}
	tr := New(Options{})
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(mk())
	if err == nil {
		resp.Body.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "method") {
		head := ""
		select {
		case head = <-got:
		default:
		}
		t.Errorf("method with CR LF: expected an error (as net/http's Transport: invalid method); got err=%v, head %q", err, head)
	}
}
