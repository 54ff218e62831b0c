// Package h1 is an HTTP/1.1 client transport for plain-http upstreams
// (a model server on the host or the network: vLLM, Ollama, a sidecar,
// belay sim) that writes each request and reads its response on the
// calling goroutine.
//
// net/http's Transport hands every request to a connection's write
// goroutine and its response back from the connection's read goroutine,
// and after the body's end hands the connection back once more: on a
// machine with few cores each hand-off can wait for a thread to wake. On
// loopback that was most of what a gateway added to a call
// (bench/gateway: a belay process limited to one thread, where no hand-off
// waits, added a third less than one on two). This transport does the
// same work without them; the wire format is net/http's own
// (http.Request.Write, http.ReadResponse), and only the connection pool
// is this package's.
//
// It speaks HTTP/1.1 over TCP only: no TLS, no proxy, no HTTP/2, no
// compression (no Accept-Encoding is sent), no redirects (like any
// RoundTripper). Callers route https and proxied requests to an
// http.Transport instead (see Transport.RoundTrip's errors).
package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ErrScheme is returned for a request whose URL is not http://.
var ErrScheme = errors.New("h1: only http:// URLs are served")

// Transport is an http.RoundTripper for HTTP/1.1 over plain TCP with a
// pool of keep-alive connections per host:port. The zero value is not
// usable; make one with New. Safe for concurrent use; each connection
// serves one request at a time.
type Transport struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int
	idleTimeout time.Duration
	now         func() time.Time

	mu   sync.Mutex
	idle map[string][]*conn // most recently returned last
}

// Options configure New. Zero fields take the defaults given.
type Options struct {
	// Dial opens a connection (default: a net.Dialer with ConnectTimeout
	// and a 30s TCP keep-alive). The request's context bounds it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ConnectTimeout bounds a dial by the default dialer (default 10s).
	ConnectTimeout time.Duration
	// MaxIdlePerHost is how many idle connections are kept per host:port
	// (default 64); a connection returned past it is closed.
	MaxIdlePerHost int
	// IdleTimeout is how long an idle connection is kept (default 90s):
	// one idle longer is closed when next taken instead of used.
	IdleTimeout time.Duration
}

// New returns a Transport with opts.
func New(opts Options) *Transport {
	t := &Transport{dial: opts.Dial, maxIdle: opts.MaxIdlePerHost, idleTimeout: opts.IdleTimeout,
		now: time.Now, idle: make(map[string][]*conn)}
	if t.dial == nil {
		ct := opts.ConnectTimeout
		if ct <= 0 {
			ct = 10 * time.Second
		}
		t.dial = (&net.Dialer{Timeout: ct, KeepAlive: 30 * time.Second}).DialContext
	}
	if t.maxIdle <= 0 {
		t.maxIdle = 64
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = 90 * time.Second
	}
	return t
}

// conn is one keep-alive connection.
type conn struct {
	t      *Transport
	key    string
	nc     net.Conn
	br     *bufio.Reader // over limitedReader{c}
	bw     *bufio.Writer
	idleAt time.Time
	// left is how many more bytes br may take from nc: MaxHeaderBytes
	// while a response's status line and headers are read, unbounded for
	// its body.
	left int64
}

// MaxHeaderBytes bounds a response's status line and headers (1 MiB;
// providers send a few KB): past it the call fails with
// ErrHeaderTooLarge rather than hold an unbounded header in memory.
const MaxHeaderBytes = 1 << 20

// ErrHeaderTooLarge is returned for a response whose headers pass
// MaxHeaderBytes.
var ErrHeaderTooLarge = fmt.Errorf("h1: response headers exceed %d bytes", MaxHeaderBytes)

// limitedReader reads from c's connection at most c.left bytes.
type limitedReader struct{ c *conn }

func (r limitedReader) Read(p []byte) (int, error) {
	c := r.c
	if c.left <= 0 {
		return 0, ErrHeaderTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.nc.Read(p)
	c.left -= int64(n)
	return n, err
}

// RoundTrip sends req and returns its response once the status line and
// headers have been read; the body is read from the connection as the
// caller reads it. The connection goes back to the pool when the body has
// been read to its end and neither side asked to close it; Close before
// the end closes the connection. The request's context cancels the call
// at any point, the body's reads included: the error is then the
// context's cause (context.Cause), as net/http's Transport gives it.
// Informational (1xx) responses other than 101 are skipped. The request's
// httptrace.ClientTrace, if any, gets WroteRequest (and the other write
// hooks of http.Request.Write) as from net/http's Transport.
//
// Errors: ErrScheme for a URL that is not http://; a dial, write or read
// error otherwise. A pooled connection the server has closed is not
// written to: each one taken from the pool is checked first (see alive).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if req.URL == nil || req.URL.Scheme != "http" {
		closeBody(req)
		return nil, ErrScheme
	}
	if err := ctxErr(ctx); err != nil {
		closeBody(req)
		return nil, err
	}
	key := hostPort(req)
	c, err := t.get(ctx, key)
	if err != nil {
		closeBody(req)
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	// A canceled context ends any read or write in progress (and every
	// later one) on the connection; the connection is then closed.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		c.nc.Close()
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	// Write closes req.Body, and calls the request's
	// httptrace.ClientTrace.WroteRequest before the flush, as net/http's
	// Transport does.
	werr := req.Write(c.bw)
	if werr == nil {
		werr = c.bw.Flush()
	}
	if werr != nil {
		// A server may answer before it has read the whole request (a
		// 413 for a body over its limit) and close: its answer is the
		// call's outcome, as with net/http. It is looked for briefly.
		_ = c.nc.SetReadDeadline(time.Now().Add(earlyAnswerWait))
		resp, err := c.readResponse(req)
		if err != nil || !stop() { // no answer, or the context ended
			return fail(werr)
		}
		_ = c.nc.SetReadDeadline(time.Time{})
		stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
		resp.Body = &body{r: resp.Body, c: c, stop: stop, keep: false, ctx: ctx}
		return resp, nil
	}
	resp, err := c.readResponse(req)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Not a protocol this transport speaks past the headers.
		stop()
		c.nc.Close()
		return nil, fmt.Errorf("h1: %s answered 101 Switching Protocols, which this transport does not take", key)
	}
	keep := !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		// No body to read (HEAD, 204, 304, Content-Length: 0): the
		// connection is free now.
		c.release(stop, keep)
		return resp, nil
	}
	resp.Body = &body{r: resp.Body, c: c, stop: stop, keep: keep, ctx: ctx}
	return resp, nil
}

// earlyAnswerWait is how long a failed write waits for an answer the
// server sent before it read the request (net/http's Transport waits
// 50ms as well).
const earlyAnswerWait = 50 * time.Millisecond

// readResponse reads the final response to req: its status line and
// headers (at most MaxHeaderBytes), skipping informational (1xx) ones.
func (c *conn) readResponse(req *http.Request) (*http.Response, error) {
	for {
		c.left = MaxHeaderBytes
		resp, err := http.ReadResponse(c.br, req)
		c.left = math.MaxInt64
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols || resp.StatusCode < 100 {
			return resp, nil
		}
		// An informational answer (100 Continue, 103 Early Hints): the
		// final one follows.
		_, _ = io.Copy(io.Discard, resp.Body)
	}
}

// ctxErr is the error of a call whose context ended, as net/http gives
// it: the context's cause (context.Cause), nil while it has not ended.
func ctxErr(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// aLongTimeAgo is a deadline in the past: set on a connection, it makes
// its blocked and later reads and writes fail at once.
var aLongTimeAgo = time.Unix(1, 0)

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// hostPort is the dial address of req: its URL's host with port 80 when
// none is given.
func hostPort(req *http.Request) string {
	host := req.URL.Host
	if req.URL.Port() == "" {
		return net.JoinHostPort(req.URL.Hostname(), "80")
	}
	return host
}

// get returns an idle connection to key that is still open, or dials one.
func (t *Transport) get(ctx context.Context, key string) (*conn, error) {
	now := t.now()
	for {
		t.mu.Lock()
		list := t.idle[key]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[key] = list[:len(list)-1]
		t.mu.Unlock()
		if now.Sub(c.idleAt) > t.idleTimeout || !alive(c) {
			c.nc.Close()
			continue
		}
		return c, nil
	}
	nc, err := t.dial(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	c := &conn{t: t, key: key, nc: nc, bw: bufio.NewWriterSize(nc, 4096)}
	c.br = bufio.NewReaderSize(limitedReader{c}, 4096)
	return c, nil
}

// release ends the connection's request: stop is its cancel hook. The
// connection goes back to the pool when keep holds and the hook had not
// fired; it is closed otherwise.
func (c *conn) release(stop func() bool, keep bool) {
	if !stop() || !keep { // the context's cancel set the past deadline
		c.nc.Close()
		return
	}
	t := c.t
	c.idleAt = t.now()
	t.mu.Lock()
	if len(t.idle[c.key]) >= t.maxIdle {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	t.idle[c.key] = append(t.idle[c.key], c)
	t.mu.Unlock()
}

// CloseIdleConnections closes the connections in the pool; connections in
// use are closed when their request ends. The Transport stays usable.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*conn)
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.nc.Close()
		}
	}
}

// body is a response body on a pooled connection.
type body struct {
	r    io.ReadCloser // http.ReadResponse's body reader
	c    *conn
	stop func() bool
	keep bool
	ctx  context.Context

	mu     sync.Mutex  // Read and Close may come from different goroutines
	done   bool        // the connection was released or closed
	closed atomic.Bool // Close was called
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	n, err := b.r.Read(p)
	if err == nil {
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		if err == io.EOF {
			return n, err
		}
		return n, errBodyClosed
	}
	b.done = true
	if err == io.EOF {
		b.c.release(b.stop, b.keep)
		return n, io.EOF
	}
	b.stop()
	b.c.nc.Close()
	if cerr := ctxErr(b.ctx); cerr != nil {
		return n, cerr
	}
	return n, err
}

// errBodyClosed is a read after Close.
var errBodyClosed = errors.New("h1: read on closed response body")

// Close ends the body: before its end it closes the connection (the rest
// of the response is not read), after it does nothing.
func (b *body) Close() error {
	b.closed.Store(true)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil
	}
	b.done = true
	b.stop()
	// A read blocked in another goroutine returns once the connection is
	// closed.
	return b.c.nc.Close()
}
