package gateway

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/h1"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/route"
	"github.com/belay-run/belay/transport/inproc"
)

// upstreamMux sends requests for simHost to the in-process simulator and
// everything else to the real transport.
type upstreamMux struct {
	real http.RoundTripper
	sim  http.Handler
}

// CloseIdleConnections closes the idle connections of the real
// transport, when it has such a method (as http.Transport does).
func (m *upstreamMux) CloseIdleConnections() {
	if c, ok := m.real.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

var errNoSim = errors.New("gateway: no simulator configured for sim:// deployments")

func (m *upstreamMux) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != simHost {
		return m.real.RoundTrip(r)
	}
	if m.sim == nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, &net.OpError{Op: "dial", Net: "inproc", Err: errNoSim}
	}
	// The simulator has the whole request as soon as it is handed over, as
	// a provider has once the transport wrote it.
	if t := httptrace.ContextClientTrace(r.Context()); t != nil && t.WroteRequest != nil {
		t.WroteRequest(httptrace.WroteRequestInfo{})
	}
	return inproc.RoundTripper(m.sim).RoundTrip(r)
}

// defaultUpstream is the transport to real providers: proxy from the
// environment, connect (dial + TLS) bounded by timeouts.connect, HTTP/2
// when offered. A plain-http request that goes to no proxy (a model
// server on the host or the network) takes internal/h1 instead, which
// does the same HTTP/1.1 exchange on the handler's goroutine (see its
// package doc for why).
func defaultUpstream(t config.Timeouts) http.RoundTripper {
	dial := (&net.Dialer{Timeout: t.Connect.D(), KeepAlive: 30 * time.Second}).DialContext
	return &splitUpstream{
		plain: h1.New(h1.Options{Dial: dial, MaxIdlePerHost: 64, IdleTimeout: 90 * time.Second}),
		std: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dial,
			TLSHandshakeTimeout:   t.Connect.D(),
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		proxy: http.ProxyFromEnvironment,
	}
}

// splitUpstream sends plain-http requests that no proxy takes to plain,
// and the rest (https, proxied) to std.
type splitUpstream struct {
	plain *h1.Transport
	std   *http.Transport
	proxy func(*http.Request) (*url.URL, error)
}

func (s *splitUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" {
		if p, err := s.proxy(r); err == nil && p == nil {
			return s.plain.RoundTrip(r)
		}
	}
	return s.std.RoundTrip(r)
}

// CloseIdleConnections closes both transports' idle connections.
func (s *splitUpstream) CloseIdleConnections() {
	s.plain.CloseIdleConnections()
	s.std.CloseIdleConnections()
}

func retryBudget(r config.Retry) retry.BudgetSettings {
	return retry.BudgetSettings{Ratio: r.BudgetRatio}
}

// forwardHeaders are the client headers passed upstream; credentials are
// never forwarded (the deployment's own are set instead).
var forwardHeaders = []string{"Anthropic-Version", "Anthropic-Beta", "Openai-Beta", "Idempotency-Key"}

// Header values every upstream request carries, shared by all requests
// (one allocation each saved per request; nothing writes to them).
var (
	hdrJSON        = []string{"application/json"}
	hdrEventStream = []string{"text/event-stream"}
	hdrUserAgent   = []string{"belay"}
)

// send makes the upstream request for deployment d and returns the
// response once its headers arrived (bounded by timeouts.first_byte, which
// wd enforces). sent is set once the request was written in full: from
// then on the provider may bill it. The caller closes the body.
func (c *call) send(ctx context.Context, wd *watchdog, d *route.Deployment, sent *atomic.Bool) (*http.Response, error) {
	body, err := dialect.RewriteModelValid(c.req.body, d.Model) // parse decoded it
	if err != nil {
		return nil, failure.Wrap(failure.InvalidRequest, err)
	}
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			sent.Store(true)
		}
	}})
	accept := hdrJSON
	if c.req.stream {
		accept = hdrEventStream
	}
	// The call's front names the endpoint (chat completions or responses,
	// both OpenAI's): a fallback never crosses dialects.
	hr, err := c.upstreamRequest(tctx, c.f.upstreamURL(d.BaseURL), body, accept, d)
	if err != nil {
		return nil, err
	}
	if hr.URL.Host == simHost {
		hr.Header.Set(HeaderRunID, c.runID) // the simulator's scripts follow runs
	}
	wd.arm(c.s.timeoutsOf(d.Name).FirstByte.D(), errFirstByte)
	resp, err := c.s.roundTrip(hr)
	if err != nil {
		return nil, attemptError(ctx, err)
	}
	return resp, nil
}

// upstreamRequest builds the POST of body to url for deployment d: the
// client headers forwardHeaders lets through, belay's own content type,
// Accept (accept) and user agent, and d's credentials in its dialect's
// header (never the client's key). A URL that does not parse is an
// InvalidRequest failure.
func (c *call) upstreamRequest(ctx context.Context, url string, body []byte, accept []string, d *route.Deployment) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, failure.Wrap(failure.InvalidRequest, err)
	}
	for _, k := range forwardHeaders {
		if v := c.r.Header.Values(k); len(v) > 0 {
			hr.Header[k] = v
		}
	}
	// Shared values: the transport only reads a request's header.
	hr.Header["Content-Type"] = hdrJSON
	hr.Header["Accept"] = accept
	hr.Header["User-Agent"] = hdrUserAgent
	frontFor(d.Dialect).setAuth(hr.Header, d.APIKey)
	return hr, nil
}

// roundTrip sends hr through the upstream transport as http.Client would:
// an error names the request (its URL redacted), a response without a
// body gets http.NoBody, and a RoundTripper of Options.Upstream that
// returns neither a response nor an error gives an error.
func (s *Server) roundTrip(hr *http.Request) (*http.Response, error) {
	resp, err := s.upstream.RoundTrip(hr)
	if err == nil && resp == nil {
		err = errors.New("the upstream RoundTripper returned no response and no error")
	}
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: hr.URL.Redacted(), Err: err}
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	return resp, nil
}

// attemptError classifies an error that ended an attempt, preferring the
// watchdog's timeout cause and the client's cancellation.
func attemptError(ctx context.Context, err error) *failure.Error {
	if cause := timeoutCause(ctx); cause != nil {
		return failure.Wrap(failure.Timeout, cause)
	}
	return failure.ClassifyError(err)
}

// attemptOnce is the non-streaming attempt: send, classify, read the whole
// body (each read bounded by timeouts.idle, the whole by
// max_upstream_body_bytes), and keep the answer for the response. It
// returns a *failure.Error for any failure. A body past the cap fails the
// attempt with tooLarge, is not read further, and is charged the estimated
// prompt and the request's output limit (the provider generated it).
func (c *call) attemptOnce(ctx context.Context, wd *watchdog, d *route.Deployment, sent *atomic.Bool) error {
	resp, err := c.send(ctx, wd, d, sent)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	c.reading2xx = resp.StatusCode/100 == 2 // until attempt returns (not reset by a defer: see its recover)
	c.errorStatus = !c.reading2xx
	idle := c.s.timeoutsOf(d.Name).Idle.D()
	wd.arm(idle, errIdle)
	if c.reading2xx && failure.IsEventStream(resp.Header) {
		// Not an answer belay can read as one, nor a cut stream
		// (adversarial review: it was called a stream ended before its
		// terminator). The upstream may have made the output: charged as
		// a cut answer, estimated. Degraded: the same deployment would
		// answer alike, so the chain falls back without retrying it.
		c.chargeCut(d)
		return &failure.Error{Kind: failure.Degraded, Reason: failure.ServerError, Status: resp.StatusCode, Deployment: d.Name,
			Message: "upstream deployment " + d.Name + ": " + errStreamNotAsked.Error(), Cause: errStreamNotAsked}
	}
	fe, head, rerr := failure.ClassifyHTTP(frontFor(d.Dialect).dialect(), resp)
	if rerr != nil && c.reading2xx { // fe classifies rerr
		c.chargeCut(d)
	}
	if fe != nil {
		if timeoutCause(ctx) != nil { // what came is an artifact of the watchdog's cancel
			return attemptError(ctx, rerr)
		}
		fe.Message += pathHint(fe, d)
		return fe
	}
	if rerr != nil {
		return attemptError(ctx, rerr)
	}
	limit := c.s.upstreamLimit()
	if resp.ContentLength > limit {
		return c.overLimit(d, resp.StatusCode, limit)
	}
	body := head
	if len(head) == failure.MaxHeadBytes { // the head ended at its cap, not the body's end: read the rest
		rest, rerr := io.ReadAll(io.LimitReader(idleReader{resp.Body, wd, idle}, limit-int64(len(head))+1))
		if rerr != nil {
			c.chargeCut(d)
			return attemptError(ctx, rerr)
		}
		body = append(head, rest...)
	}
	if int64(len(body)) > limit {
		return c.overLimit(d, resp.StatusCode, limit)
	}
	if fe := failure.ClassifyResponse(frontFor(d.Dialect).dialect(), resp.StatusCode, resp.Header, body); fe != nil {
		return fe
	}
	// A UTF-8 byte order mark is dropped: some clients' JSON decoders
	// (Go's) refuse it, and it is not part of the JSON (RFC 8259 §8.1).
	body = bytes.TrimPrefix(body, utf8BOM)
	if fault := answerFault(body, c.f.answerMember()); fault != "" {
		// The provider may have billed what it generated: charged as a
		// cut stream without usage is, estimated.
		u := dialect.Usage{Input: c.req.promptTokens, Output: dialect.EstimateTokens(int64(len(body)))}
		u.WebSearches, u.FileSearches = c.toolCalls(body)
		c.charge(d, u, true)
		fe := failure.New(failure.ServerError, "the upstream's 2xx answer is "+fault)
		fe.Status = resp.StatusCode
		return fe
	}
	u, ok := c.f.usage(body)
	if !ok {
		size := int64(len(body))
		if o, ok := c.f.(interface{ outputChars([]byte) int64 }); ok {
			size = o.outputChars(body)
		}
		u = dialect.Usage{Input: c.req.promptTokens, Output: max(dialect.EstimateTokens(size), 1)}
		u.WebSearches, u.FileSearches = c.toolCalls(body)
	}
	c.charge(d, u, !ok)
	c.answer = &answer{status: resp.StatusCode, header: resp.Header, body: body}
	return nil
}

// chargeCut charges a 2xx answer whose body did not arrive whole (the
// connection lost, timeouts.idle, a cancel, the cap). A non-streamed
// answer is sent once generated, so the provider bills it whole: the
// prompt and, its usage unread, the request's output limit (or the
// output the call reserved without one, DefaultReserveOutputTokens) and
// the built-in tool calls the call reserved for, estimated.
func (c *call) chargeCut(d *route.Deployment) {
	c.charge(d, dialect.Usage{Input: c.req.promptTokens, Output: cmp.Or(c.req.maxOutput, DefaultReserveOutputTokens),
		WebSearches: c.req.webSearches, FileSearches: c.req.fileSearches}, true)
}

// toolCalls counts the built-in tool calls of a 2xx body whose usage is
// unread, for its estimate: those its items show (the Responses API's
// web_search_call and file_search_call, Anthropic's server_tool_use
// blocks named web_search), 0 in a dialect without such items.
func (c *call) toolCalls(body []byte) (web, file int64) {
	if tc, ok := c.f.(interface{ toolCalls([]byte) (int64, int64) }); ok {
		return tc.toolCalls(body)
	}
	return 0, 0
}

// utf8BOM is the UTF-8 encoding of U+FEFF.
var utf8BOM = []byte("\xEF\xBB\xBF")

// overLimit charges a response past the cap and returns its failure. Its
// usage is unread: it is charged as a cut answer (chargeCut; an
// adversarial review found such an answer charged no output at all).
func (c *call) overLimit(d *route.Deployment, status int, limit int64) error {
	c.chargeCut(d)
	return tooLarge(d.Name, status, limit)
}

// idleReader re-arms the idle timer on every read that returns data.
type idleReader struct {
	r    io.Reader
	wd   *watchdog
	idle time.Duration
}

func (r idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.wd.arm(r.idle, errIdle)
	}
	return n, err
}

// answer is a complete upstream response kept for the client.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// pathHint returns a hint, for the failure's message, when an upstream's
// 404 says that the URL called is unknown rather than the model: OpenAI's
// error code unknown_url ("Unknown request URL: POST /chat/completions"),
// or, with no error code, a bare "Not Found" of a server that has no such
// route (vLLM's and Ollama's HTTP layers). The usual cause is a
// deployment's base_url with a /v1 too many or too few (a newcomer's
// finding: the 404 read as model_not_found). "" for any other failure. The
// hint names neither the base_url nor the path called: the message may
// reach a client (a 404 without an error object is belay's to word), and
// a path can hold an account's ids.
func pathHint(fe *failure.Error, d *route.Deployment) string {
	if fe.Status != http.StatusNotFound {
		return ""
	}
	code := strings.ToLower(fe.ProviderCode)
	msg := strings.ToLower(strings.TrimSpace(fe.Message))
	unknownURL := code == "unknown_url" || strings.Contains(msg, "unknown request url")
	bare := (code == "" || code == "not_found_error") && (msg == "" || msg == "not found" || msg == "404 page not found")
	if !unknownURL && !bare {
		return ""
	}
	want := "an openai deployment's base_url ends in /v1, as https://api.openai.com/v1 does: belay adds /chat/completions"
	if d.Dialect == "anthropic" {
		want = "an anthropic deployment's base_url has no /v1, as https://api.anthropic.com has none: belay adds /v1/messages"
	}
	return fmt.Sprintf(" (the upstream has no such URL: check deployment %s's base_url in the gateway's config; %s)", d.Name, want)
}
