package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawServer serves each accepted connection with serve on its own goroutine.
func rawServer(t *testing.T, serve func(n int, c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); serve(n, c, bufio.NewReader(c)) })
		}
	})
	return "http://" + ln.Addr().String()
}

// transports returns the transport under test and net/http's for the same
// server: each test holds h1 to net/http's behaviour.
func transports() map[string]http.RoundTripper {
	return map[string]http.RoundTripper{
		"h1":       New(Options{}),
		"net/http": &http.Transport{DisableCompression: true},
	}
}

// A server that starts its (large) answer before it reads the (large)
// request body, reading the body only once the answer is written: e.g. an
// early 413/401 with a long error document, or a full-duplex endpoint.
// net/http's Transport returns the response as soon as its headers arrive
// and reads it while its write goroutine still sends the body; so does h1
// for a body over inlineBodyMax (written whole before the read, both
// sides blocked in their writes until the context ended).
func TestLargeAnswerBeforeLargeRequestBody(t *testing.T) {
	const size = 32 << 20
	u := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br) // headers only
		if err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", size)
		c.Write([]byte(strings.Repeat("e", size))) // blocks until the client reads
		io.Copy(io.Discard, req.Body)
	})
	for name, rt := range transports() {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // failure guard (32 MiB each way under -race on a loaded machine took 8s)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(strings.Repeat("x", size)))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v; want the server's 413", err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 413 || n != size || err != nil {
				t.Errorf("%d, %d bytes, %v; want 413 with %d bytes", resp.StatusCode, n, err, size)
			}
		})
	}
}

// The gateway forwards a client's Idempotency-Key. net/http retries such a
// request on a new connection when a reused keep-alive connection is
// closed by the server before any response byte (the keep-alive race: the
// server's idle timer fires as the request is sent), and so does h1. The
// server here closes a reused connection after reading its request, which
// from the client looks exactly like that race.
func TestReusedConnectionClosedUnansweredIsRetriedWhenReplayable(t *testing.T) {
	u := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if i > 0 {
				return // closes the reused connection without an answer
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	for name, rt := range transports() {
		t.Run(name, func(t *testing.T) {
			for i := range 2 {
				req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"model":"m"}`))
				req.Header.Set("Idempotency-Key", fmt.Sprintf("k%d", i))
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "ok" || err != nil {
					t.Fatalf("request %d: %q %v", i, b, err)
				}
			}
		})
	}
}

// A server (or a broken proxy) that sends 1xx responses without end: net/http
// bounds the 1xx headers together with the final ones
// (MaxResponseHeaderBytes) and fails the call, and so does h1 (its
// MaxHeaderBytes, and at most max1xx of them), rather than loop until the
// context ends (forever when timeouts.first_byte is 0).
func TestEndless1xxIsCutOff(t *testing.T) {
	u := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		hdr := "HTTP/1.1 103 Early Hints\r\nLink: <" + strings.Repeat("a", 8000) + ">\r\n\r\n"
		for {
			if _, err := io.WriteString(c, hdr); err != nil {
				return
			}
		}
	})
	for name, rt := range transports() {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeoutCause(context.Background(), 5*time.Second, errors.New("guard: still reading 1xx after 5s"))
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatal("a response; want an error")
			}
			if ctx.Err() != nil {
				t.Errorf("RoundTrip ended only by the context: %v; want a header-limit error", err)
			}
		})
	}
}

// After a burst, the pool holds one connection per request of the burst,
// used last-in first-out, so one below the top is not taken while traffic
// keeps the top one busy. When the server closes it (its own keep-alive
// timer: Node 5s, uvicorn 5s), its socket must not stay open in
// CLOSE_WAIT: each release checks the pool's oldest connection once it
// has idled probeAfter (net/http's Transport notices the close at once, in
// its read loop). Here: 4 connections from a burst, the server closes the
// 3 not in use; 5 requests within probeAfter leave them pooled, 20 after
// it leave none of them.
func TestServerClosedIdleConnectionsAreDropped(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := New(Options{})
	tr.now = func() time.Time { return now }
	b := newBurst(t, tr, 4)
	do := func() {
		resp, err := post(t, tr, context.Background(), b.URL, "{}")
		if err != nil {
			t.Error(err)
			return
		}
		readAll(t, resp)
	}
	// The server closes the idle connections except the one the next
	// request takes (the pool's top).
	tr.mu.Lock()
	var list []*conn
	for _, l := range tr.idle {
		list = append(list, l...)
	}
	tr.mu.Unlock()
	top := list[len(list)-1]
	for _, c := range list[:len(list)-1] {
		b.closeServerSide(t, c)
	}
	closedPooled := func() int {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		n := 0
		for _, l := range tr.idle {
			for _, c := range l {
				if c != top && !alive(c) {
					n++
				}
			}
		}
		return n
	}
	// Younger than probeAfter, they are not peeked at on release.
	for range 5 {
		do()
	}
	if n := closedPooled(); n != 3 {
		t.Errorf("%d closed connections pooled after 5 requests within probeAfter; want 3 (not peeked at yet)", n)
	}
	now = now.Add(probeAfter)
	for range 20 {
		do()
	}
	if n := closedPooled(); n != 0 {
		t.Errorf("%d connections the server closed still pooled (in CLOSE_WAIT) after 20 requests past probeAfter; want 0", n)
	}
}

// Connections in use during CloseIdleConnections are closed when their
// request ends, not pooled (as net/http's Transport: closeIdle).
func TestCloseIdleConnectionsClosesInUseOnesAtTheirEnd(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := New(Options{})
	resp, err := post(t, tr, context.Background(), s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections() // e.g. at shutdown, with this call in flight
	readAll(t, resp)
	if n := pooled(tr); n != 0 {
		t.Errorf("%d pooled after CloseIdleConnections and the in-flight body's end; want 0 (closed when its request ends)", n)
	}
}
