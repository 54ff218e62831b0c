// Package h1 is an HTTP/1.1 client transport for plain-http upstreams
// (a model server on the host or the network: vLLM, Ollama, a sidecar,
// belay sim) that writes each request (up to 64 KiB of body) and reads its
// response on the calling goroutine.
//
// net/http's Transport hands every request to a connection's write
// goroutine and its response back from the connection's read goroutine,
// and after the body's end hands the connection back once more: on a
// machine with few cores each hand-off can wait for a thread to wake. On
// loopback, without them belay added 10–18% less to a call
// (bench/gateway/README.md). The wire format is net/http's own
// (http.Request.Write, http.ReadResponse); the connection pool and the
// rules around it (a peek at pooled connections, one resend of a
// replayable request on the keep-alive race, an answer sent before the
// request was read, at most 5 informational answers) follow net/http's
// Transport, and tests hold it to net/http's behaviour.
//
// It speaks HTTP/1.1 over TCP only: no TLS, no proxy, no HTTP/2, no
// compression (no Accept-Encoding is sent), no redirects (like any
// RoundTripper). Callers route https and proxied requests to an
// http.Transport instead. Idle connections are closed when taken or
// checked past Options.IdleTimeout, when found closed by the server (on
// the next release to their host, or by a sweep every 30s while any is
// pooled), and by CloseIdleConnections.
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

	"golang.org/x/net/http/httpguts"
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
	// gen counts CloseIdleConnections calls: a connection made before the
	// last one is closed when its request ends, not pooled.
	gen uint64
	// sweep runs sweepIdle every sweepEvery while the pool holds a
	// connection (armed: it is pending).
	sweep *time.Timer
	armed bool
}

// sweepEvery is how often idle connections are checked while any is
// pooled: the server may have closed them (their sockets then wait in
// CLOSE_WAIT with their descriptors held) or they may have idled past
// IdleTimeout, with no request to that host to find them.
const sweepEvery = 30 * time.Second

// probeAfter is how long the pool's oldest connection idles before a
// release peeks at it (alive). Under load every pooled connection idles
// for less, and a peek per release was a system call per request (2% of
// the gateway's CPU at saturation, with the peek before reuse); a server
// closes an idle connection on its keep-alive timer, seconds after its
// last request (Node and uvicorn: 5 s), and a connection taken from the
// pool is peeked at before its reuse whatever its age.
const probeAfter = time.Second

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
	gen    uint64 // Transport.gen when it was dialed
	reused bool   // taken from the pool for this request
	got    int64  // bytes read from nc
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
	c.got += int64(n)
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
// Errors: ErrScheme for a URL that is not http://; an invalid method,
// header or trailer (see checkRequest); a dial, write or read error
// otherwise. A pooled connection the server has closed is not
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
	if err := checkRequest(req); err != nil {
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
	resp, err, silent := c.exchange(ctx, req)
	if err == nil || !silent || !c.reused || !replayable(req) || ctx.Err() != nil {
		return resp, err
	}
	// The keep-alive race: the server closed the pooled connection as
	// the request went out (its idle timer), and nothing came back. A
	// request that may be sent twice is sent once more on a new
	// connection, as net/http's Transport does.
	b, gerr := req.GetBody()
	if gerr != nil {
		return nil, err
	}
	again := *req
	again.Body = b
	if c, gerr = t.dialConn(ctx, key); gerr != nil {
		b.Close()
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, cerr
		}
		return nil, gerr
	}
	resp, err, _ = c.exchange(ctx, &again)
	return resp, err
}

// checkRequest refuses a request that cannot go on the wire as it is, as
// net/http's Transport does: a method that is not a token, a header or
// trailer key that is not a field name (an RFC 9110 token), or a header
// value with a control byte other than a tab (CR and LF among them).
// Unchecked, any of them with CR LF would add a line of its own to the
// request (http.Request.Write writes them as they are).
func checkRequest(req *http.Request) error {
	if req.Method != "" && !httpguts.ValidHeaderFieldName(req.Method) { // a method is a token
		return fmt.Errorf("h1: invalid method %q", req.Method)
	}
	for k := range req.Trailer {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h1: invalid trailer field name %q", k)
		}
	}
	for k, vs := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h1: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h1: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// replayable reports whether req may be sent a second time after its
// connection failed with no answer: its body can be made again and its
// method is idempotent or it carries an idempotency key (net/http's
// Transport's rule, from RFC 9110 §9.2.2).
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	if !ok {
		_, ok = req.Header["X-Idempotency-Key"]
	}
	return ok
}

// exchange writes req on c and reads its response's headers. silent
// reports a failure with no byte of an answer received.
func (c *conn) exchange(ctx context.Context, req *http.Request) (resp *http.Response, err error, silent bool) {
	// A canceled context ends any read or write in progress (and every
	// later one) on the connection; the connection is then closed.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	got := c.got
	fail := func(err error) (*http.Response, error, bool) {
		stop()
		c.nc.Close()
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, cerr, false
		}
		return nil, err, c.got == got
	}
	if req.ContentLength > inlineBodyMax || req.ContentLength < 0 && req.Body != nil && req.Body != http.NoBody {
		return c.exchangeLarge(ctx, req, stop, fail)
	}
	// Write closes req.Body, and calls the request's
	// httptrace.ClientTrace.WroteRequest before the flush, as net/http's
	// Transport does.
	werr := c.write(req)
	if werr != nil {
		// A server may answer before it has read the whole request (a
		// 413 for a body over its limit) and close: its answer is the
		// call's outcome, as with net/http. It is looked for briefly.
		_ = c.nc.SetReadDeadline(time.Now().Add(earlyAnswerWait))
		if ctx.Err() != nil { // its cancel's past deadline was just replaced
			return fail(werr)
		}
		resp, err := c.readResponse(req)
		if err != nil || !stop() { // no answer, or the context ended
			return fail(werr)
		}
		_ = c.nc.SetReadDeadline(time.Time{})
		stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
		resp.Body = &body{r: resp.Body, c: c, stop: stop, keep: false, ctx: ctx}
		return resp, nil, false
	}
	resp, err = c.readResponse(req)
	if err != nil {
		return fail(err)
	}
	return c.answer(ctx, req, resp, stop, nil)
}

// answer hands resp to the caller, its body reading from c: the
// connection is released at the body's end (body.release), at once when
// there is no body (HEAD, 204, 304, Content-Length: 0). A 101 is refused
// and closes c. stop is the cancel hook; wrote, when not nil, gives the
// outcome of a write still running (exchangeLarge).
func (c *conn) answer(ctx context.Context, req *http.Request, resp *http.Response, stop func() bool,
	wrote <-chan error) (*http.Response, error, bool) {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// Not a protocol this transport speaks past the headers.
		stop()
		c.nc.Close()
		if wrote != nil {
			<-wrote
		}
		return nil, fmt.Errorf("h1: %s answered 101 Switching Protocols, which this transport does not take", c.key), false
	}
	b := &body{r: resp.Body, c: c, stop: stop, keep: !resp.Close && !req.Close, ctx: ctx, wrote: wrote}
	if resp.Body == http.NoBody {
		b.release()
		return resp, nil, false
	}
	resp.Body = b
	return resp, nil, false
}

// inlineBodyMax is the largest request body written before the response
// is read, on the caller's goroutine (64 KiB): one that fits in the
// connection's socket buffers, so that the write ends even when the
// server answers before it reads. A larger one (or one of unknown length)
// is written by a goroutine of its own while the caller reads the
// response: a server that sends a large answer (an error page, 413)
// before it reads a large request would otherwise leave both sides
// blocked in their writes.
const inlineBodyMax = 64 << 10

// write writes req on c and flushes it. Write closes req.Body, and calls
// the request's httptrace.ClientTrace.WroteRequest before the flush, as
// net/http's Transport does.
func (c *conn) write(req *http.Request) error {
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	return err
}

// exchangeLarge is exchange for a body over inlineBodyMax: written by a
// goroutine while the response is read. The connection is reused only
// when the write had ended without error by the response body's end.
func (c *conn) exchangeLarge(ctx context.Context, req *http.Request, stop func() bool,
	fail func(error) (*http.Response, error, bool)) (*http.Response, error, bool) {
	wrote := make(chan error, 1)
	go func() { wrote <- c.write(req) }()
	resp, err := c.readResponse(req)
	if err != nil {
		r, ferr, silent := fail(err) // closes the connection: the write ends
		if werr := <-wrote; werr != nil && ctx.Err() == nil && silent {
			ferr = werr // nothing came back: the write's failure says more
		}
		return r, ferr, silent
	}
	return c.answer(ctx, req, resp, stop, wrote)
}

// earlyAnswerWait is how long a failed write waits for an answer the
// server sent before it read the request (net/http's Transport waits
// 50ms as well).
const earlyAnswerWait = 50 * time.Millisecond

// readResponse reads the final response to req: its status line and
// headers, skipping informational (1xx) ones, at most max1xx of them; the
// informational and final headers together at most MaxHeaderBytes.
func (c *conn) readResponse(req *http.Request) (*http.Response, error) {
	c.left = MaxHeaderBytes
	defer func() { c.left = math.MaxInt64 }()
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols || resp.StatusCode < 100 {
			return resp, nil
		}
		// An informational answer (100 Continue, 103 Early Hints): the
		// final one follows.
		if n == max1xx {
			return nil, fmt.Errorf("h1: more than %d informational (1xx) responses", max1xx)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}
}

// max1xx is how many informational responses one request may get (as
// net/http's Transport: 5).
const max1xx = 5

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
		c.reused = true
		return c, nil
	}
	return t.dialConn(ctx, key)
}

// dialConn opens a new connection to key.
func (t *Transport) dialConn(ctx context.Context, key string) (*conn, error) {
	nc, err := t.dial(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	gen := t.gen
	t.mu.Unlock()
	c := &conn{t: t, key: key, nc: nc, gen: gen, bw: bufio.NewWriterSize(nc, 4096)}
	c.br = bufio.NewReaderSize(limitedReader{c}, 4096)
	return c, nil
}

// release ends the connection's request: stop is its cancel hook. The
// connection goes back to the pool when keep holds, the hook had not fired
// and no CloseIdleConnections came since it was dialed; it is closed
// otherwise. The pool is used last in, first out, so a burst's extra
// connections sink to its bottom: each release also checks the oldest
// idle one (its age, and alive) and closes it when the server has closed
// it or it has idled past the timeout, so that they do not stay open
// (CLOSE_WAIT) while the top ones carry the traffic. The peek is skipped
// for one idle less than probeAfter.
func (c *conn) release(stop func() bool, keep bool) {
	if !stop() || !keep { // the context's cancel set the past deadline
		c.nc.Close()
		return
	}
	t := c.t
	now := t.now()
	c.idleAt = now
	c.reused = false
	t.mu.Lock()
	list := t.idle[c.key]
	if c.gen != t.gen || len(list) >= t.maxIdle {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	var oldest *conn
	if len(list) > 0 {
		oldest = list[0]
		copy(list, list[1:])
		list[len(list)-1] = nil
		list = list[:len(list)-1]
	}
	t.idle[c.key] = append(list, c)
	t.armSweep()
	t.mu.Unlock()
	if oldest == nil {
		return
	}
	if idled := now.Sub(oldest.idleAt); idled > t.idleTimeout || (idled >= probeAfter && !alive(oldest)) {
		oldest.nc.Close()
		return
	}
	t.mu.Lock()
	list = t.idle[c.key]
	if oldest.gen != t.gen || len(list) >= t.maxIdle {
		t.mu.Unlock()
		oldest.nc.Close()
		return
	}
	list = append(list, nil)
	copy(list[1:], list)
	list[0] = oldest
	t.idle[c.key] = list
	t.mu.Unlock()
}

// armSweep starts the sweep timer unless it is pending. Under t.mu.
func (t *Transport) armSweep() {
	if t.armed {
		return
	}
	t.armed = true
	if t.sweep == nil {
		t.sweep = time.AfterFunc(sweepEvery, t.sweepIdle)
	} else {
		t.sweep.Reset(sweepEvery)
	}
}

// sweepIdle closes the pooled connections that idled past IdleTimeout or
// that the server closed (alive: one non-blocking peek each, under the
// lock), and re-arms while any stay pooled.
func (t *Transport) sweepIdle() {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed = false
	for key, list := range t.idle {
		kept := list[:0]
		for _, c := range list {
			if now.Sub(c.idleAt) > t.idleTimeout || !alive(c) {
				c.nc.Close()
				continue
			}
			kept = append(kept, c)
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, key)
			continue
		}
		t.idle[key] = kept
		t.armSweep()
	}
}

// CloseIdleConnections closes the connections in the pool; connections in
// use are closed when their request ends. The Transport stays usable.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	t.gen++
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

	// wrote, for a body written by a goroutine (exchangeLarge), gives the
	// write's outcome; the connection is kept only if it came, without
	// error, by the body's end.
	wrote <-chan error

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
		b.release()
		return n, io.EOF
	}
	b.stop()
	b.c.nc.Close()
	if cerr := ctxErr(b.ctx); cerr != nil {
		return n, cerr
	}
	return n, err
}

// release hands the connection back at the body's end (see conn.release).
func (b *body) release() {
	keep := b.keep
	if b.wrote != nil {
		select {
		case err := <-b.wrote:
			keep = keep && err == nil
		default: // still writing: the server answered without the rest
			keep = false
		}
	}
	b.c.release(b.stop, keep)
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
