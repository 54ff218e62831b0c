package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/route"
)

var errNotStream = errors.New("upstream answered a stream request without an event stream")

// errStreamNotAsked is the failure of an upstream that answers a request
// without "stream": true with an event stream.
var errStreamNotAsked = errors.New("upstream answered a request that asked for no stream with an event stream (text/event-stream)")

// attemptStream is the streaming attempt on deployment d.
//
// It holds the stream's first events (message_start, role chunks, pings)
// until model output starts, so that a failure before that — an HTTP
// error, an early error event, a cut, the first-token timeout — is
// returned to the router and can be retried or fall back invisibly. At the
// first output (or the terminator of an empty answer) it commits: writes
// the header and the held events, then relays each event as it arrives,
// flushed. After the commit a failure (an error event, a cut before the
// terminator, the idle timeout) ends the client's stream with an error
// event in the client's dialect — never a silent clean end — and is
// returned with OutputStarted set, so the router stops. A partial or
// canceled stream is charged from its usage events, or estimated.
func (c *call) attemptStream(ctx context.Context, wd *watchdog, d *route.Deployment, sent *atomic.Bool) error {
	resp, err := c.send(ctx, wd, d, sent)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dl := frontFor(d.Dialect).dialect()
	// The headers are in: from here the wait is for model output (the
	// classifier peeks at the body's head, which a hung upstream never
	// sends).
	t := c.s.timeoutsOf(d.Name)
	wd.arm(t.FirstToken.D(), errFirstToken)
	fe, _, rerr := failure.ClassifyHTTP(dl, resp)
	switch {
	case timeoutCause(ctx) != nil:
		// A body that stalled (a hang after the headers) is a
		// transient timeout, retried or sent to a fallback, not the
		// unknown failure a short read looks like (regression:
		// TestRegression_StreamHangAfterHeadersIsTimeout).
		return attemptError(ctx, rerr)
	case fe != nil:
		fe.Message += pathHint(fe, d)
		return fe
	case rerr != nil:
		return attemptError(ctx, rerr)
	case !failure.IsEventStream(resp.Header):
		return failure.Wrap(failure.ServerError, errNotStream)
	}

	watch := failure.NewStreamWatcher(dl)
	fol := c.f.newStream(c.req)
	lim := &eventLimit{r: resp.Body, max: c.s.upstreamLimit()}
	rd := failure.NewSSEReader(lim)
	var held [][]byte
	for {
		lim.reset()
		ev, err := rd.Next()
		switch {
		case lim.over || errors.Is(err, failure.ErrSSELineTooLong):
			err = errUpstreamTooLarge // an event past the cap is never relayed
		case err == nil && ev.Partial:
			if !endsStream(dl, fol, ev) {
				err = io.ErrUnexpectedEOF // a cut event is never relayed
				break
			}
			// The stream's terminator, whole but for the blank line after
			// it ("data: [DONE]\n" and the end): the upstream did finish.
			// The client gets it with its blank line.
			ev.Raw = append(bytes.TrimRight(ev.Raw, "\r\n"), "\n\n"...)
		}
		if err != nil {
			return c.endStream(ctx, d, watch, fol, err)
		}
		if c.committed {
			wd.arm(t.Idle.D(), errIdle)
		}
		o := watch.ObserveEvent(ev)
		if o.Terminator && !followerEnds(fol, ev) {
			// Not this dialect's end ([DONE] in a Responses stream): the
			// stream ended before its final event.
			return c.failStream(d, fol, failure.New(failure.StreamInterrupted,
				"the stream ended with "+strings.TrimSpace(string(ev.Data))+" before its final event"))
		}
		if ev.Data != nil {
			fol.add(ev.Event, ev.Data)
		}
		if o.Err != nil {
			if !c.committed {
				c.chargeReported(d, fol)
				return o.Err
			}
			c.chargeStream(d, fol)
			fe := afterCommit(o.Err)
			if json.Valid(bytes.TrimSpace(ev.Data)) {
				_ = c.relay(providerErrorEvent(fol, ev, fe)) // the provider's error event is in the client's dialect
			} else { // not JSON: no client could read it; belay's own error event instead
				_ = c.relay(errorEventOf(c.f, fol, publicFailure(fe, d.Name)))
			}
			return fe
		}
		if ev.Data == nil && !c.committed {
			continue // a keep-alive comment before output: nothing to hold
		}
		if fol.strip(ev.Event, ev.Data) {
			continue
		}
		ev.Raw = fol.rewrite(ev.Raw)
		if o.Terminator {
			// Charged and announced to the run before the client has
			// the terminator: a next call it sends at once waits for
			// this step's settle and is admitted against what the step
			// used, not its estimate.
			c.chargeStream(d, fol)
			c.quoteStream()
		}
		if !c.committed {
			held = append(held, ev.Raw)
			if !o.Output && !o.Terminator {
				continue
			}
			c.commit(d, resp.Header, o.Output)
			c.streamed = fol
			wd.arm(t.Idle.D(), errIdle)
			for _, raw := range held {
				if err = c.relay(raw); err != nil {
					break
				}
			}
			held = nil
			if err == nil && o.Output && c.s.calls.Load() == 1 {
				// The first output is out: the client it woke reads it
				// before the rest is relayed (see serve's yield).
				yieldThread()
			}
		} else {
			err = c.relay(ev.Raw)
		}
		if err != nil { // the client went away
			if !o.Terminator {
				c.chargeStream(d, fol)
			}
			return afterCommit(clientGone(err))
		}
		if o.Terminator {
			c.answered = true
			finishBody(resp.Body, wd, c.s.finishWait)
			return nil
		}
	}
}

// endsStream reports whether ev, an event of dialect d cut off by the end of the
// upstream's body before its blank line, is a whole terminator: OpenAI's
// [DONE], Anthropic's message_stop with its data complete (see
// failure.StreamWatcher), that follower fol takes as its stream's end.
// Some servers end a finished stream so; a client reading them directly
// sees a clean end.
func endsStream(d failure.Dialect, fol streamFollower, ev failure.SSEEvent) bool {
	return failure.NewStreamWatcher(d).ObserveEvent(ev).Terminator && followerEnds(fol, ev)
}

// followerEnds reports whether ev, an event the failure.StreamWatcher
// takes for a terminator, ends fol's stream: every terminator does,
// unless fol says otherwise (a Responses stream ends only with its final
// response event; see responsesStream.ends).
func followerEnds(fol streamFollower, ev failure.SSEEvent) bool {
	if e, ok := fol.(interface{ ends(failure.SSEEvent) bool }); ok {
		return e.ends(ev)
	}
	return true
}

// After a stream's terminator the upstream's body still has its end to
// come (a chunked body's last chunk, maybe trailers), often in a packet of
// its own. A body closed before its end closes its connection, in
// internal/h1 as in net/http's Transport, and the deployment's next call
// opens a new one (over TLS, a handshake): on loopback, 5% of
// bench/gateway's sequential streams (212 of 4,200) ended that way, and
// the next calls' time to first token paid for the dial. So the end is
// read, at most afterTerminatorMax bytes and for at most
// afterTerminatorWait; an upstream that sends more or holds its body open
// has its connection closed as before. The client's stream has had its
// terminator by then; only the end of its response waits, and so does a
// next call of the run, which is admitted after this step's settle (the
// step is quoted before the terminator is relayed: see quoteStream).
const (
	afterTerminatorMax  = 4 << 10
	afterTerminatorWait = 100 * time.Millisecond
)

// errAfterTerminator cancels the read of a body's end that did not come
// within afterTerminatorWait; the call has succeeded.
var errAfterTerminator = errors.New("the upstream's body did not end after its stream's terminator")

// finishBody reads body to its end after a stream's terminator, at most
// afterTerminatorMax bytes and for at most wait (see afterTerminatorMax),
// discarding what it reads.
func finishBody(body io.Reader, wd *watchdog, wait time.Duration) {
	wd.arm(wait, errAfterTerminator)
	_, _ = io.CopyN(io.Discard, body, afterTerminatorMax)
	wd.arm(0, nil)
}

// endStream handles the end of an upstream stream before its terminator:
// read error, cut, timeout or cancellation.
func (c *call) endStream(ctx context.Context, d *route.Deployment, watch *failure.StreamWatcher, fol streamFollower, readErr error) error {
	var fe *failure.Error
	switch {
	case c.r.Context().Err() != nil:
		fe = failure.Wrap(failure.Canceled, context.Cause(c.r.Context()))
	case timeoutCause(ctx) != nil:
		fe = failure.Wrap(failure.Timeout, timeoutCause(ctx))
	case failure.As(context.Cause(ctx)) != nil: // the run was killed, stopped or ended
		fe = endedInFlight(failure.As(context.Cause(ctx)))
	case errors.Is(readErr, errUpstreamTooLarge):
		fe = tooLarge(d.Name, http.StatusOK, c.s.upstreamLimit())
	default:
		fe = watch.End(readErr)
		if fe == nil { // the terminator was seen (cannot happen: we stop there)
			return nil
		}
	}
	return c.failStream(d, fol, fe)
}

// failStream ends an upstream stream that failed with fe before its
// terminator: before the commit, it charges what the provider reported
// and returns fe for the router; after it, it charges the stream, ends
// the client's stream with an error event (a shutdown's, or fe's; none
// for a client that went away) and returns fe as a failure after output.
func (c *call) failStream(d *route.Deployment, fol streamFollower, fe *failure.Error) error {
	if !c.committed {
		c.chargeReported(d, fol)
		return fe
	}
	c.chargeStream(d, fol)
	fe = afterCommit(publicFailure(fe, d.Name))
	switch {
	case errors.Is(fe, errShutdown): // the client is still there: told as a non-streamed call is
		_ = c.relay(c.shutdownEvent(fol))
	case fe.Reason != failure.Canceled:
		_ = c.relay(errorEventOf(c.f, fol, fe))
	}
	return fe
}

// eventLimit bounds what is read from an upstream stream for one event:
// after max bytes since the last reset it fails every read with
// errUpstreamTooLarge and sets over. The SSE reader holds at most about
// max bytes (plus its line buffer) for one event, however long the stream
// lasts. Not safe for concurrent use.
type eventLimit struct {
	r    io.Reader
	max  int64
	left int64
	over bool
}

func (l *eventLimit) reset() { l.left = l.max }

func (l *eventLimit) Read(p []byte) (int, error) {
	if l.left <= 0 {
		l.over = true
		return 0, errUpstreamTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// providerErrorEvent returns the provider's error event ev (JSON data;
// fe is its failure) as the client gets it: as sent, or as its follower
// makes it one the client's SDK raises (see responsesStream.raisable).
func providerErrorEvent(fol streamFollower, ev failure.SSEEvent, fe *failure.Error) []byte {
	if r, ok := fol.(interface {
		raisable(failure.SSEEvent, *failure.Error) []byte
	}); ok {
		return r.raisable(ev, fe)
	}
	return ev.Raw
}

// errorEventOf returns e as the error event of a stream in front f's
// dialect, numbered after the stream's events when its follower fol
// numbers them (the Responses API's sequence_number); fol may be nil.
func errorEventOf(f front, fol streamFollower, e *failure.Error) []byte {
	if n, ok := fol.(interface{ errorEvent(*failure.Error) []byte }); ok {
		return n.errorEvent(e)
	}
	return f.errorEvent(e)
}

// afterCommit marks a failure that happened after output reached the
// client: OutputStarted, and a kind the router cannot answer with another
// attempt. Transient failures keep their kind (the router stops on
// OutputStarted and the breaker still counts them); degraded and permanent
// ones become fatal, so no fallback chain is started behind a committed
// response.
func afterCommit(fe *failure.Error) *failure.Error {
	cp := *fe
	cp.OutputStarted = true
	if cp.Kind == failure.Degraded || cp.Kind == failure.Permanent {
		cp.Kind = failure.Fatal
	}
	return &cp
}

// streamTrailers are the trailers a stream announces: its cost, and the
// failure that ended it after output started (failure.SetHeader's).
var streamTrailers = HeaderCostUSD + ", " + failure.HeaderKind + ", " + failure.HeaderReason

// commit writes the stream's response header.
func (c *call) commit(d *route.Deployment, up http.Header, output bool) {
	h := c.w.Header()
	sse.SetHeaders(h)
	for _, k := range []string{"X-Request-Id", "Request-Id"} {
		if v := up.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	copyRateLimits(h, up)
	c.progressHeaders(d.Name)
	// The cost is known when the stream ends, and so is a failure after
	// output started (its error event says it in the body; the trailers
	// say it as a refusal's headers do).
	h.Set("Trailer", streamTrailers)
	c.w.WriteHeader(http.StatusOK)
	c.committed = true
	if output {
		c.ttft = time.Since(c.start)
	}
}

// relay writes raw to the client and flushes it, within
// timeouts.client_write.
func (c *call) relay(raw []byte) error {
	c.guardWrite()
	if _, err := c.w.Write(raw); err != nil {
		return err
	}
	return sse.Flush(c.w)
}

// chargeReported charges a stream attempt that failed before any output
// reached the client when the provider stated usage in it (Anthropic's
// message_start counts the prompt and its cache reads and writes): the
// provider bills what it reported, and the next attempt's usage is its
// own. Without a statement nothing is charged here (a canceled attempt is
// charged its prompt by call.attempt).
func (c *call) chargeReported(d *route.Deployment, fol streamFollower) {
	if fol.reported() {
		c.chargeStream(d, fol)
	}
}

// guardWrite keeps a write deadline at least timeouts.client_write ahead
// on the client's connection before a write (moving it at most once a
// second): a client that stops reading cannot hold the call, its
// upstream connection and its record open (the server has no write
// timeout, which would bound a whole stream). serveModel clears it.
func (c *call) guardWrite() {
	d := c.s.cfg.Timeouts.ClientWrite.D()
	if d <= 0 {
		return
	}
	now := time.Now()
	if !c.writeBy.IsZero() && c.writeBy.Sub(now) >= d-time.Second {
		return
	}
	if http.NewResponseController(c.w).SetWriteDeadline(now.Add(d)) == nil {
		c.writeBy = now.Add(d)
	}
}

// quoteStream announces the stream's settle to its run (Turn.Quote) with
// the charges so far: from here the run's next admission waits for the
// settle. It is called once a call: the terminator ends the attempt, and
// the route with it; attempts run only after admission set c.turn.
func (c *call) quoteStream() {
	c.mu.Lock()
	charges := slices.Clone(c.charges)
	c.mu.Unlock()
	c.turn.Quote(Outcome{Charges: charges})
}

// chargeStream records the usage of a stream attempt: reported, or
// estimated from the output characters.
func (c *call) chargeStream(d *route.Deployment, fol streamFollower) {
	u, estimated := fol.usage()
	c.charge(d, u, estimated)
}
