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
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// server is an httptest server that counts the connections it accepted.
type server struct {
	*httptest.Server
	conns atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, tr *Transport, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "belay-test")
	return tr.RoundTrip(req)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pooled(tr *Transport) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, l := range tr.idle {
		n += len(l)
	}
	return n
}

func TestRequestOnTheWireAndKeepAlive(t *testing.T) {
	var got []string
	var mu sync.Mutex
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, fmt.Sprintf("%s %s %s ct=%s ua=%s ae=%q len=%d body=%s", r.Proto, r.Method, r.URL.Path,
			r.Header.Get("Content-Type"), r.Header.Get("User-Agent"), r.Header.Get("Accept-Encoding"), r.ContentLength, b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"n":%d}`, len(b))
	})
	tr := New(Options{})
	for i := range 3 {
		resp, err := post(t, tr, context.Background(), s.URL+"/v1/chat/completions", `{"model":"m"}`)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if body := readAll(t, resp); resp.StatusCode != 200 || body != `{"n":13}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	want := `HTTP/1.1 POST /v1/chat/completions ct=application/json ua=belay-test ae="" len=13 body={"model":"m"}`
	for i, g := range got {
		if g != want {
			t.Errorf("request %d arrived as %s; want %s", i, g, want)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("3 sequential requests used %d connections; want 1 (kept alive)", n)
	}
	if n := pooled(tr); n != 1 {
		t.Errorf("%d idle connections after the requests; want 1", n)
	}
}

// waitReadable blocks until the connection has something to read (bytes
// or the peer's FIN) without consuming it, or 10s pass.
func waitReadable(t *testing.T, nc net.Conn) {
	t.Helper()
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer nc.SetReadDeadline(time.Time{})
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return err != unix.EAGAIN
	})
	if err != nil {
		t.Fatalf("waiting for the connection to become readable: %v", err)
	}
}

func loopbackPair(t *testing.T) (client *conn, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close(); sc.Close() })
	return &conn{nc: nc, br: bufio.NewReader(nc)}, sc
}

func TestAlive(t *testing.T) {
	c, _ := loopbackPair(t)
	if !alive(c) {
		t.Error("an open connection with nothing to read: alive = false")
	}
	c, sc := loopbackPair(t)
	sc.Close()
	waitReadable(t, c.nc)
	if alive(c) {
		t.Error("a connection the server closed: alive = true")
	}
	c, sc = loopbackPair(t)
	sc.Write([]byte("HTTP/1.1 200 OK\r\n"))
	waitReadable(t, c.nc)
	if alive(c) {
		t.Error("a connection with bytes no request asked for: alive = true")
	}
}

// A pooled connection the server closed is not written to: the next
// request dials a new one and succeeds.
func TestServerClosedIdleConnectionIsNotUsed(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := New(Options{})
	resp, err := post(t, tr, context.Background(), s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	tr.mu.Lock()
	var idle *conn
	for _, l := range tr.idle {
		idle = l[0]
	}
	tr.mu.Unlock()
	s.CloseClientConnections()
	waitReadable(t, idle.nc)
	resp, err = post(t, tr, context.Background(), s.URL, "{}")
	if err != nil {
		t.Fatalf("request after the server closed the idle connection: %v", err)
	}
	if body := readAll(t, resp); body != "ok" {
		t.Errorf("body %q", body)
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("connections %d; want 2", n)
	}
}

// Canceling while the headers are awaited returns the context's cause and
// closes the connection (the server sees the client leave).
func TestCancelBeforeHeaders(t *testing.T) {
	left := make(chan struct{})
	arrived := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		close(arrived)
		<-r.Context().Done()
		close(left)
	})
	tr := New(Options{})
	cause := errors.New("first byte timeout")
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { <-arrived; cancel(cause) }()
	_, err := post(t, tr, ctx, s.URL, "{}")
	if !errors.Is(err, cause) {
		t.Fatalf("error %v; want the cause %v", err, cause)
	}
	<-left
	if n := pooled(tr); n != 0 {
		t.Errorf("%d pooled connections after a cancel; want 0", n)
	}
}

// A body is read as the server writes it (chunk by chunk), and a cancel
// between chunks ends the next read with the cause.
func TestStreamedBodyAndCancelMidBody(t *testing.T) {
	next := make(chan struct{})
	left := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 2 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				close(left)
				return
			}
		}
	})
	tr := New(Options{})
	cause := errors.New("client went away")
	ctx, cancel := context.WithCancelCause(context.Background())
	resp, err := post(t, tr, ctx, s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for i := range 2 {
		line, err := br.ReadString('\n')
		if want := fmt.Sprintf("data: %d\n", i); line != want || err != nil {
			t.Fatalf("event %d: %q %v; want %q", i, line, err, want)
		}
		br.ReadString('\n')
		if i == 0 {
			next <- struct{}{} // the server writes the second event only now
		}
	}
	cancel(cause)
	if _, err := br.ReadString('\n'); !errors.Is(err, cause) {
		t.Errorf("read after cancel: %v; want %v", err, cause)
	}
	<-left
	resp.Body.Close()
	if n := pooled(tr); n != 0 {
		t.Errorf("%d pooled connections; want 0", n)
	}
}

// Closing a body before its end closes the connection; a read after
// Close fails.
func TestCloseBeforeEnd(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 64<<10))
	})
	tr := New(Options{})
	resp, err := post(t, tr, context.Background(), s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 10)); !errors.Is(err, errBodyClosed) {
		t.Errorf("read after Close: %v; want %v", err, errBodyClosed)
	}
	if n := pooled(tr); n != 0 {
		t.Errorf("%d pooled connections; want 0", n)
	}
	resp, err = post(t, tr, context.Background(), s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); len(body) != 64<<10 {
		t.Errorf("second body %d bytes", len(body))
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("connections %d; want 2", n)
	}
}

func TestConnectionCloseIsNotPooled(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	tr := New(Options{})
	for range 2 {
		resp, err := post(t, tr, context.Background(), s.URL, "{}")
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); body != "bye" {
			t.Errorf("body %q", body)
		}
	}
	if n, p := s.conns.Load(), pooled(tr); n != 2 || p != 0 {
		t.Errorf("connections %d, pooled %d; want 2, 0", n, p)
	}
}

func TestInformationalResponsesAreSkipped(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "made")
	})
	tr := New(Options{})
	resp, err := post(t, tr, context.Background(), s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 201 || body != "made" {
		t.Errorf("%d %q; want 201 made", resp.StatusCode, body)
	}
}

func TestNoBodyResponsesFreeTheConnection(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	tr := New(Options{})
	for range 2 {
		resp, err := post(t, tr, context.Background(), s.URL, "{}")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 204 || resp.Body != http.NoBody {
			t.Fatalf("%d %T", resp.StatusCode, resp.Body)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("connections %d; want 1", n)
	}
}

func TestSchemeAndTrace(t *testing.T) {
	tr := New(Options{})
	req, _ := http.NewRequest(http.MethodPost, "https://example.invalid/v1", strings.NewReader("{}"))
	if _, err := tr.RoundTrip(req); !errors.Is(err, ErrScheme) {
		t.Errorf("https: %v; want ErrScheme", err)
	}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	var wrote []error
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote = append(wrote, i.Err) }})
	resp, err := post(t, tr, ctx, s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if len(wrote) != 1 || wrote[0] != nil {
		t.Errorf("WroteRequest calls %v; want one with no error", wrote)
	}
}

func TestIdleTimeoutAndMaxIdle(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	now := time.Unix(1000, 0)
	tr := New(Options{IdleTimeout: time.Minute, MaxIdlePerHost: 1})
	tr.now = func() time.Time { return now }
	do := func() {
		resp, err := post(t, tr, context.Background(), s.URL, "{}")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	do()
	now = now.Add(59 * time.Second)
	do()
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("connections %d after an idle of 59s; want 1", n)
	}
	now = now.Add(61 * time.Second)
	do()
	if n := s.conns.Load(); n != 2 {
		t.Errorf("connections %d after an idle of 61s (timeout 1m); want 2", n)
	}
	// Two requests at once hold two connections; one is kept.
	a, err := post(t, tr, context.Background(), s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	b, err := post(t, tr, context.Background(), s.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, a)
	readAll(t, b)
	if n := pooled(tr); n != 1 {
		t.Errorf("pooled %d with MaxIdlePerHost 1; want 1", n)
	}
	tr.CloseIdleConnections()
	if n := pooled(tr); n != 0 {
		t.Errorf("pooled %d after CloseIdleConnections; want 0", n)
	}
}

func TestConcurrentRequests(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	tr := New(Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 16*50)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				want := fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)
				resp, err := post(t, tr, context.Background(), s.URL, want)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != want {
					errs <- fmt.Errorf("got %q %v; want %q", b, err, want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.conns.Load(); n > 16 {
		t.Errorf("%d connections for 16 concurrent clients; want at most 16", n)
	}
}

// A response whose headers pass MaxHeaderBytes fails the call; it is not
// held in memory whole.
func TestHeaderLimit(t *testing.T) {
	u := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		go io.Copy(io.Discard, br) // drained, not closed: no reset loses the bytes sent
		c.Write([]byte("HTTP/1.1 200 OK\r\nX-Big: "))
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for range 2 * MaxHeaderBytes / len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	tr := New(Options{})
	_, err := post(t, tr, context.Background(), u+"/", "{}")
	if !errors.Is(err, ErrHeaderTooLarge) {
		t.Errorf("error %v; want ErrHeaderTooLarge", err)
	}
}

// A server that answers before reading a large body (a 413) and closes:
// the answer is the call's outcome, not the failed write.
func TestEarlyAnswerToALargeBody(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, `{"error":"too large"}`)
	})
	tr := New(Options{})
	resp, err := post(t, tr, context.Background(), s.URL, strings.Repeat("x", 16<<20))
	if err != nil {
		t.Fatalf("error %v; want the 413", err)
	}
	if body := readAll(t, resp); resp.StatusCode != 413 || body != `{"error":"too large"}` {
		t.Errorf("%d %q; want 413", resp.StatusCode, body)
	}
	if n := pooled(tr); n != 0 {
		t.Errorf("pooled %d; want 0", n)
	}
}

// With no more requests to a host, its pooled connections are still
// checked: the sweep (run every sweepEvery while any is pooled) closes
// those the server closed and those idle past IdleTimeout, keeps the rest,
// and stops re-arming once the pool is empty.
func TestSweepIdle(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := New(Options{IdleTimeout: time.Minute})
	tr.now = func() time.Time { return now }
	b := newBurst(t, tr, 3)
	tr.mu.Lock()
	var list []*conn
	for _, l := range tr.idle {
		list = append(list, l...)
	}
	armed := tr.armed
	tr.mu.Unlock()
	if len(list) != 3 || !armed {
		t.Fatalf("pooled %d, sweep armed %v; want 3, true", len(list), armed)
	}
	// The server closes one; another idles past the timeout.
	b.closeServerSide(t, list[0])
	now = now.Add(30 * time.Second)
	tr.mu.Lock()
	list[1].idleAt = now.Add(-2 * time.Minute)
	tr.mu.Unlock()
	tr.sweepIdle()
	if n := pooled(tr); n != 1 {
		t.Fatalf("pooled %d after the sweep; want 1 (the open, recent one)", n)
	}
	tr.mu.Lock()
	if !tr.armed || tr.idle[hostPort(&http.Request{URL: mustURL(t, b.URL)})][0] != list[2] {
		t.Errorf("after the sweep: armed %v, pool %v; want armed, holding the third connection", tr.armed, tr.idle)
	}
	tr.mu.Unlock()
	now = now.Add(2 * time.Minute)
	tr.sweepIdle()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 || tr.armed {
		t.Errorf("after the last one idled out: pool %v, armed %v; want empty, not armed", tr.idle, tr.armed)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// burst is a server that answered n requests sent at once through a
// Transport, each held until all n were in flight, so that they took n
// connections, now pooled; it answers "ok" to later requests at once.
type burst struct {
	*httptest.Server
	mu     sync.Mutex
	server map[string]net.Conn // its side of each connection, by the client's address
}

func newBurst(t *testing.T, tr *Transport, n int) *burst {
	t.Helper()
	b := &burst{server: map[string]net.Conn{}}
	var inFlight sync.WaitGroup
	inFlight.Add(n)
	held := make(chan struct{})
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-held:
		default:
			inFlight.Done()
			inFlight.Wait()
		}
		io.WriteString(w, "ok")
	}))
	b.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		b.mu.Lock()
		b.server[c.RemoteAddr().String()] = c
		b.mu.Unlock()
		return ctx
	}
	b.Start()
	t.Cleanup(b.Close)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := post(t, tr, context.Background(), b.URL, "{}")
			if err != nil {
				t.Error(err)
				return
			}
			readAll(t, resp)
		})
	}
	wg.Wait()
	close(held)
	if p := pooled(tr); p != n {
		t.Fatalf("pooled %d after a burst of %d; want %d", p, n, n)
	}
	return b
}

// closeServerSide closes the server's side of c and waits for its FIN to
// reach c.
func (b *burst) closeServerSide(t *testing.T, c *conn) {
	t.Helper()
	b.mu.Lock()
	b.server[c.nc.LocalAddr().String()].Close()
	b.mu.Unlock()
	waitReadable(t, c.nc)
}

// A 101 Switching Protocols is refused (this transport speaks nothing past
// HTTP/1.1's headers), and its connection is not pooled.
func TestSwitchingProtocolsIsRefused(t *testing.T) {
	u := rawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		if req, err := http.ReadRequest(br); err == nil {
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
			io.Copy(io.Discard, br)
		}
	})
	tr := New(Options{})
	for _, size := range []int{2, inlineBodyMax + 1} { // written inline, and by a goroutine
		_, err := post(t, tr, context.Background(), u, strings.Repeat("x", size))
		if err == nil || !strings.Contains(err.Error(), "101 Switching Protocols") {
			t.Errorf("body of %d bytes: %v; want the 101 refused", size, err)
		}
	}
	if n := pooled(tr); n != 0 {
		t.Errorf("pooled %d; want 0", n)
	}
}
