package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/belay-run/belay/internal/readall"
	"github.com/belay-run/belay/internal/suggest"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/route"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
)

// call is the state of one model call on the request path. It is used by
// one request's goroutine only (the router calls attempts sequentially),
// except for the charges, which are guarded by mu.
type call struct {
	s     *Server
	f     front
	w     http.ResponseWriter
	r     *http.Request
	start time.Time

	runID  string
	tenant config.Tenant
	asked  config.Limits // the limits the request's X-Belay-* headers asked for
	alias  string
	req    *request
	chain  []route.Deployment

	refused   failure.Reason // the reason of belay's own refusal of the call ("" when not refused)
	turn      Turn           // the admitted turn (nil before admission)
	attempts  int            // attempts started so far
	firstDep  string         // the chain's first deployment
	committed bool           // the response header has been written
	answer    *answer
	streamed  streamFollower // the committed stream's follower (nil: none)
	ttft      time.Duration
	writeBy   time.Time // the write deadline set on the client's connection (zero: none)

	// stopAttempts ends the router's loop before its next attempt, with
	// the cause the call's failure becomes (see coverNext).
	stopAttempts context.CancelCauseFunc

	aw       answerWriter // w's value
	settling bool         // the turn's settle has begun
	// answered: the client has its whole answer (a stream's terminator
	// relayed, a non-streamed answer written); taken: the charges serve
	// took for the settle; reading2xx: the attempt in progress reads a
	// non-streamed 2xx body. For panicked.
	answered, reading2xx bool
	// errorStatus: the attempt in progress got a non-2xx status (the
	// provider answered with an error: it generated nothing).
	errorStatus bool
	taken       []Charge

	mu      sync.Mutex
	charges []Charge
}

func frontFor(d string) front {
	if d == string(failure.DialectAnthropic) {
		return anthropicFront{}
	}
	return openAIFront{}
}

// serveModel returns the handler of one model endpoint.
func (s *Server) serveModel(f front) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := s.newCall(f, w, r)
		s.calls.Add(1)
		defer s.calls.Add(-1) // also when the handler panics
		status, err := c.serveGuarded()
		if !c.writeBy.IsZero() {
			// The server sets no write deadline of its own, so one set
			// here would carry over to the connection's next request.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		}
		s.metrics.observe(c, status)
		switch {
		case err == nil:
		case c.runID == "": // refused before it was counted in a run (key, body, model): no run to name
			s.log.LogAttrs(r.Context(), slog.LevelInfo, "call refused", slogString("tenant", c.tenant.Name),
				slogString("model", c.alias), slogErr(err))
			c.noteRefusal(status, err)
		case upstreamRejectedCredentials(err): // logged at error level by the attempt that got it
		default:
			s.log.LogAttrs(r.Context(), levelFor(err), "model call failed",
				slogString("run", c.runID), slogString("tenant", c.tenant.Name), slogString("model", c.alias), slogErr(err),
				slogDetail(err))
		}
	}
}

// newCall returns the call of request r in front f's dialect, answering
// through w (wrapped in the call's answerWriter).
func (s *Server) newCall(f front, w http.ResponseWriter, r *http.Request) *call {
	c := &call{s: s, f: f, r: r, start: time.Now()}
	c.aw.ResponseWriter = w
	c.w = &c.aw
	return c
}

// serveGuarded is serve, with a panic on the request path (a bug, or one
// in an Options.Upstream or Approver) turned into the call's failure
// instead of a dropped connection: see panicked.
func (c *call) serveGuarded() (status int, err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler { // a deliberate abort: net/http's to handle
				panic(p)
			}
			status, err = c.panicked(p, debug.Stack())
		}
	}()
	return c.serve()
}

// panicked ends a call whose request path panicked with p: it logs p and
// stack at error level; settles the admitted turn, when its settle had
// not begun, with what the attempts so far used (so that the run's
// reservation is released and the run does not stay live waiting for a
// settle); and answers 500 in the client's dialect (OpenAI's
// server_error, Anthropic's api_error) with x-should-retry: false when
// no answer had begun, or ends a stream already relaying with an error
// event. A panic after the client had its whole answer (a stream's
// terminator, a written answer) is only logged, and the call settled as
// a success.
func (c *call) panicked(p any, stack []byte) (int, error) {
	fe := &failure.Error{Kind: failure.Permanent, Reason: failure.Unknown, Status: http.StatusInternalServerError,
		Message: "belay failed on this call with an internal error (logged with its stack trace); the same request may fail the same way"}
	c.s.log.LogAttrs(c.r.Context(), slog.LevelError, "panic serving a model call", slogString("run", c.runID),
		slogString("tenant", c.tenant.Name), slogString("model", c.alias),
		slog.String("panic", fmt.Sprint(p)), slog.String("stack", string(stack)))
	if c.turn != nil && !c.settling {
		c.settling = true
		charges := c.taken
		if c.mu.TryLock() { // a panic while it was held left it locked
			charges = append(charges, c.charges...)
			c.charges = nil
			c.mu.Unlock()
		}
		o := Outcome{Charges: charges, Err: fe}
		if c.answered { // the client has its whole answer: the call succeeded
			o.Err = nil
		}
		cost, err := c.turn.Settle(context.WithoutCancel(c.r.Context()), o)
		if err != nil {
			c.s.log.LogAttrs(c.r.Context(), levelFor(err), "settle failed", slogString("run", c.runID), slogErr(err))
		}
		c.s.metrics.addSpend(c.tenant.Name, cost)
		if c.committed { // a stream's cost goes in its trailer (see streamTrailers)
			c.w.Header().Set(HeaderCostUSD, cost.Decimal())
		}
	}
	switch {
	case c.answered: // nothing may follow a whole answer
		return http.StatusOK, nil
	case c.committed:
		cf := afterCommit(fe)               // as a stream's other failures after its output began
		failure.SetHeader(c.w.Header(), cf) // a trailer (see streamTrailers)
		_ = c.relay(errorEventOf(c.f, c.streamed, cf))
	case !c.aw.begun:
		return c.refuse(fe)
	}
	return http.StatusInternalServerError, fe
}

// answerWriter is a call's http.ResponseWriter: it notes whether the
// answer has begun (a status or a byte written), for panicked. Used by
// the call's goroutine only; http.ResponseController reaches the
// server's writer through Unwrap.
type answerWriter struct {
	http.ResponseWriter
	begun bool
}

func (w *answerWriter) WriteHeader(code int) {
	w.begun = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(b []byte) (int, error) {
	w.begun = true
	return w.ResponseWriter.Write(b)
}

func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serve runs the request path and returns the HTTP status sent and the
// call's failure (nil on success).
func (c *call) serve() (int, error) {
	s := c.s
	// identify: the key first, so that a bad key is 401 whatever else is
	// wrong
	tenant, fe := s.tenants.identify(c.r)
	if fe != nil {
		return c.refuse(fe)
	}
	clientID, clientNamed, fe := runID(c.r, !s.tenants.open)
	if fe != nil {
		return c.refuse(fe)
	}
	agent, fe := agentName(c.r)
	if fe != nil {
		return c.refuse(fe)
	}
	if fe := unknownHeader(c.r); fe != nil {
		return c.refuse(fe)
	}
	c.tenant = tenant
	id := s.tenants.runKey(tenant.Name, clientID)
	limits, asked, fe := requestLimits(c.r, s.cfg.TenantLimits(tenant.Name))
	if fe != nil {
		return c.refuse(fe)
	}
	c.asked = asked
	c.limitsApply(limits) // until the run's are known
	body, fe := c.readBody()
	if fe != nil {
		return c.refuse(fe)
	}
	req, err := c.f.parse(body)
	if err != nil {
		return c.refuse(invalid(err))
	}
	c.req, c.alias = req, req.model
	if req.previous != "" { // a Responses continuation: its stored context is billed again
		if n, ok := s.contexts.get(tenant.Name, req.previous); ok {
			req.promptTokens = run.AddTokens(req.promptTokens, n)
		}
	}
	req.keepAnswer = s.cfg.Capture != config.CaptureOff
	routeAlias, ok := s.aliases[aliasKey{c.f.dialect(), req.model}]
	if !ok {
		return c.refuse(s.unknownModel(c.f.dialect(), req.model))
	}
	c.chain = s.router.Deployments(routeAlias)
	c.firstDep = c.chain[0].Name
	if c.asked.MaxCostUSD > 0 && len(s.unpriced) > 0 {
		for _, d := range c.chain {
			if s.unpriced[d.Name] {
				return c.refuse(refusal(failure.InvalidRequest, fmt.Sprintf("%s cannot hold for model %q: its deployment %s has no price, so its calls count as $0 "+
					"(the gateway's config can price it under pricing:)", HeaderMaxCostUSD, req.model, d.Name)))
			}
		}
	}
	if req.priority {
		if fe := s.priorityPriced(c.chain); fe != nil {
			return c.refuse(fe)
		}
	}
	// A flag on the alias itself is the run layer's to refuse (Admit, with
	// the run's stop): only the deployments' flags are looked at here.
	switch flags, killed, open := s.unservable("", c.chain); {
	case killed:
		return c.refuse(c.killedFailure(flags))
	case open:
		if wait, ok := s.reopenIn(c.chain, time.Now()); ok {
			return c.refuseAllOpen(wait)
		}
	}
	// From here the call is counted in run id (a refusal by the run's
	// limits stops that run); a request refused above never had a run.
	c.runID = id
	c.w.Header().Set(HeaderRunID, clientID)

	// admit
	turn, err := s.runs.Admit(c.r.Context(), Admission{
		RunID: id, Named: !clientNamed, Tenant: tenant.Name, Agent: agent, TenantBudget: tenant.Budget, Limits: limits,
		Alias: req.model, Dialect: string(c.f.dialect()), API: req.api, Chain: c.chain,
		PromptTokens: req.promptTokens, MaxOutputTokens: req.maxOutput, OutputLimitField: req.limitField,
		CacheWrites: req.cacheWrites, WebSearches: req.webSearches, FileSearches: req.fileSearches, Stream: req.stream,
		Priority: req.priority,
	})
	if err != nil {
		var rr *runRefusal
		if errors.As(err, &rr) { // the run's limits apply, not the ones asked
			c.limitsApply(rr.limits)
		}
		if fe := failure.As(err); fe != nil {
			return c.refuse(fe)
		}
		if c.r.Context().Err() != nil { // the client went away during admission
			return c.refuse(failure.Wrap(failure.Canceled, context.Cause(c.r.Context())))
		}
		// Not a refusal: the run layer could not use the store.
		return c.storeUnavailable(err)
	}
	c.turn = turn
	if c.asked != (config.Limits{}) { // the run's limits are read only when some were asked
		c.limitsApply(turn.Limits())
	}
	if agent != "" {
		if ra := turn.Agent(); ra != agent {
			c.w.Header().Set(HeaderAgentOverridden, cmp.Or(ra, "none"))
		}
	}
	ctx := turn.Context()
	if dl := turn.Deadline(); !dl.IsZero() && !deadlineBy(ctx, dl) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}

	// route + relay
	ctx, c.stopAttempts = context.WithCancelCause(ctx)
	defer c.stopAttempts(nil)
	res, err := s.router.Do(ctx, routeAlias, c.attempt)
	s.metrics.observeRoute(req.model, &res)
	if _, ok := c.f.(responsesFront); ok && err == nil {
		s.rememberContext(c)
	}
	err = attemptsNote(deadlineNote(preferTransient(c.finalFailure(ctx, err), &res), &res), &res)

	// settle + record, respond
	c.taken = c.takeCharges()
	out := Outcome{Charges: c.taken, Result: res, Err: err, TimeToFirstToken: c.ttft}
	settle := func() budget.USD {
		c.settling = true
		if s.cfg.Capture != config.CaptureOff { // for the record only: after the answer
			out.InputMessages, out.OutputMessages = c.payload()
		}
		out.ResponseID, out.ResponseModel, out.FinishReasons = c.answerFacts()
		sctx := context.WithoutCancel(c.r.Context())
		cost, serr := turn.Settle(sctx, out)
		if serr != nil {
			s.log.LogAttrs(sctx, levelFor(serr), "settle failed", slogString("run", id), slogErr(serr))
		}
		return cost
	}
	if c.committed { // a stream: the body is written; the cost (and a failure) go in the trailers
		cost := settle()
		s.metrics.addSpend(tenant.Name, cost)
		c.w.Header().Set(HeaderCostUSD, cost.Decimal())
		if err != nil {
			failure.SetHeader(c.w.Header(), asFailure(err))
		}
		return http.StatusOK, err
	}
	// The answer goes out before the settle when the reservation covers
	// the cost (the settle only records then): the client does not wait
	// for the step's span and the run's end. A cost above the reservation
	// is charged first, so that the client's next call is admitted
	// against it; so is a large answer, whose write a client that stops
	// reading could hold (the server has no write timeout).
	cost, later := turn.Quote(out)
	later = later && (c.answer == nil || len(c.answer.body) <= settleAfterAnswerMax)
	if !later {
		cost = settle()
	}
	s.metrics.addSpend(tenant.Name, cost)
	c.w.Header().Set(HeaderCostUSD, cost.Decimal())
	c.setRouteHeaders(&res)
	var status int
	var werr error
	if _, ok := errors.AsType[*coverStoreError](err); ok {
		fe := asFailure(err)
		c.unavailable(fe, storeUnavailableType, fe.Message, storeRetryAfterMS)
		status, werr = http.StatusServiceUnavailable, fe
	} else if err != nil {
		status, werr = c.refuseUpstream(asFailure(err), len(res.Refused()) > 0)
	} else {
		status, werr = c.writeAnswer()
		c.answered = werr == nil
	}
	if later {
		// The answer has its length: once flushed it is complete. The
		// settle stays in the handler, not in a goroutine of its own: the
		// handler's return is what holds a client back when the store
		// falls behind, and what the server's shutdown waits for (a
		// goroutine per settle piled up without bound behind a slow
		// store, and could outlive Stack.Close). The run's next call, on
		// any connection, waits for it (run.Run.Admit).
		_ = http.NewResponseController(c.w).Flush()
		if s.calls.Load() == 1 {
			// The only call in progress: the client the flush woke
			// reads its answer before the settle runs. Under load the
			// settle goes on at once, as every other call's work does.
			yieldThread()
		}
		settle()
	}
	return status, werr
}

// noteRefusal records a refusal of a request that names its run
// (X-Belay-Run-Id) but was refused before it counted in it (a malformed
// body, an unknown model) as a "request.refused" event on the run's span,
// when this process holds the run and it is the request's tenant's: an
// agent's failed call then shows in its run's trace. A request refused
// for its key (its tenant unknown) is not noted.
func (c *call) noteRefusal(status int, err error) {
	n, ok := c.s.runs.(noter)
	id := strings.TrimSpace(c.r.Header.Get(HeaderRunID))
	if !ok || id == "" || c.tenant.Name == "" { // no tenant: refused for its key
		return
	}
	id = c.s.tenants.runKey(c.tenant.Name, id)
	attrs := map[string]any{"http.response.status_code": int64(status), "error": err.Error()}
	if fe := failure.As(err); fe != nil {
		attrs["reason"] = string(fe.Reason)
	}
	if c.alias != "" {
		attrs["model"] = c.alias
	}
	n.Note(id, c.tenant.Name, "request.refused", attrs)
}

// limitsApply sets X-Belay-Limits-Overridden for the limits that apply
// to the call, or removes it when each limit asked for applies.
func (c *call) limitsApply(apply config.Limits) {
	if c.asked == (config.Limits{}) {
		return
	}
	if v := limitsOverridden(c.asked, apply); v != "" {
		c.w.Header().Set(HeaderLimitsOverridden, v)
	} else {
		c.w.Header().Del(HeaderLimitsOverridden)
	}
}

// deadlineNote adds to a deadline failure what its earlier attempts
// failed with, when they failed otherwise (a run deadline reached during
// a third hung attempt says so, and that the first two timed out): the
// deadline is what ended the call, not always why it took so long.
func deadlineNote(err error, res *route.Result) error {
	fe := failure.As(err)
	if fe == nil || fe.Reason != failure.DeadlineExceeded {
		return err
	}
	atts := res.Attempts()
	for i := len(atts) - 1; i >= 0; i-- {
		f := atts[i].Failure
		if f == nil || f.Reason == failure.DeadlineExceeded || f.Reason == failure.Canceled {
			continue
		}
		cp := *fe
		n := fmt.Sprintf("%d attempts", len(atts))
		if len(atts) == 1 {
			n = "1 attempt"
		}
		cp.Message = fmt.Sprintf("%s (%s; attempt %d failed with %s: %s)", fe.Message, n, i+1, f.Reason, f.Message)
		return &cp
	}
	return err
}

// attemptsNote adds to the failure of a call that made two or more
// attempts how many, on which deployments ("… (after 5 attempts: down ×3,
// unreachable ×2)"): the failure names the last deployment only, and the
// client's operator otherwise cannot tell that a fallback was tried
// (newcomer finding). A deadline failure says it its own way
// (deadlineNote); a canceled call's client is gone.
func attemptsNote(err error, res *route.Result) error {
	fe := failure.As(err)
	atts := res.Attempts()
	if fe == nil || len(atts) < 2 || fe.Reason == failure.DeadlineExceeded || fe.Reason == failure.Canceled {
		return err
	}
	var deps []string
	count := map[string]int{}
	for _, a := range atts {
		if count[a.Deployment] == 0 {
			deps = append(deps, a.Deployment)
		}
		count[a.Deployment]++
	}
	parts := make([]string, len(deps))
	for i, d := range deps {
		parts[i] = fmt.Sprintf("%s ×%d", d, count[d])
	}
	cp := *fe
	cp.Message = fmt.Sprintf("%s (after %d attempts: %s)", message(fe), len(atts), strings.Join(parts, ", "))
	return &cp
}

// unservable reports whether no deployment of chain, serving model alias
// alias ("": not looked at), can take a call now, looking once at each
// and stopping at the first that can: killed when a kill flag disables
// the alias or every one (flags: the flags, each once, "model
// gpt-4o: runaway"), else open when the breaker of every one a flag does
// not disable refuses calls now (open, or half-open with its probes in
// flight).
func (s *Server) unservable(alias string, chain []route.Deployment) (flags []string, killed, open bool) {
	if s.aliasDisabled != nil {
		if k, off := s.aliasDisabled(alias); off {
			return []string{killFlag(k)}, true, false
		}
	}
	for _, d := range chain {
		if s.disabled != nil {
			if k, off := s.disabled(d); off {
				f := killFlag(k)
				if !slices.Contains(flags, f) {
					flags = append(flags, f)
				}
				continue
			}
		}
		if b := s.router.Breaker(d.Name); b == nil || !b.Refusing() {
			return nil, false, false
		}
		open = true
	}
	if open {
		return nil, false, true
	}
	return flags, true, false
}

// killFlag describes kill flag k: "model gpt-4o: runaway".
func killFlag(k store.Kill) string {
	f := string(k.Target)
	if k.Name != "" { // the all flag has none
		f += " " + k.Name
	}
	if k.Reason != "" {
		f += ": " + k.Reason
	}
	return f
}

// outcomeUnknown reports whether an attempt that failed for reason r,
// after its request was sent, may have been processed and billed by the
// provider: no answer came (a timeout, a lost connection) or it was cut
// (a stream without its terminator). An error the provider answered (an
// HTTP error status, an error event) is not billed.
func outcomeUnknown(r failure.Reason) bool {
	return r == failure.Timeout || r == failure.ConnectionError || r == failure.StreamInterrupted
}

// killedFailure is the refusal of a call whose model's every deployment
// a kill flag disables (flags: the flags, as unservable returns them).
func (c *call) killedFailure(flags []string) *failure.Error {
	named := ""
	if len(flags) > 0 {
		named = strings.Join(flags, "; ") + "; "
	}
	return refusal(failure.Killed, fmt.Sprintf(
		"every deployment of model %q is disabled by a kill flag (%sundo with belay unkill)", c.alias, named))
}

// settleAfterAnswerMax is the largest answer body (bytes) written before
// its call is settled: the kernel's socket buffers take it whole, so the
// write returns even when the client does not read.
const settleAfterAnswerMax = 32 << 10

// deadlineBy reports whether ctx already ends at or before dl.
func deadlineBy(ctx context.Context, dl time.Time) bool {
	d, ok := ctx.Deadline()
	return ok && !d.After(dl)
}

// attempt is the route's attempt function: one try on deployment d.
func (c *call) attempt(ctx context.Context, d *route.Deployment) error {
	if c.committed { // never: the router stops after a failure after commit
		return &failure.Error{Kind: failure.Fatal, Reason: failure.StreamInterrupted, Message: "response already committed", OutputStarted: true}
	}
	c.attempts++
	ctx, wd := newWatchdog(ctx)
	defer wd.stop()
	var sent atomic.Bool
	charged := c.chargeCount()
	c.reading2xx, c.errorStatus = false, false
	defer func() {
		if p := recover(); p != nil {
			// A panic during the attempt (see serveGuarded): charge what
			// it used, unless it was charged, as a cut stream (the
			// committed stream is this attempt's) or a canceled attempt
			// is charged.
			if !c.mu.TryLock() { // a panic while it was held left it locked
				panic(p)
			}
			n := len(c.charges)
			c.mu.Unlock()
			switch {
			case n != charged:
			case c.streamed != nil:
				c.chargeStream(d, c.streamed)
			case c.reading2xx: // generated whole: as a cut answer
				c.chargeCut(d)
			case sent.Load():
				c.chargeUnanswered(d)
			}
			panic(p)
		}
	}()
	var err error
	if c.req.stream {
		err = c.attemptStream(ctx, wd, d, &sent)
	} else {
		err = c.attemptOnce(ctx, wd, d, &sent)
		c.reading2xx = false
	}
	if err == nil {
		return nil
	}
	fe := publicFailure(asFailure(err), d.Name)
	if m, ok := c.f.(misdirecter); ok {
		fe = m.misdirected(fe)
	}
	if sent.Load() && c.chargeCount() == charged && (ctx.Err() != nil || outcomeUnknown(fe.Reason)) {
		// The request reached the provider, and the attempt ended without
		// its answer or its word that it failed: canceled (the client
		// went away, the run was killed or stopped), timed out, its
		// connection lost or its stream cut. Charged, estimated, so that
		// the run's limits count it and hold the retry's money.
		c.chargeUnanswered(d)
	}
	if fe.Kind != failure.Fatal && !c.committed && c.chargeCount() > charged {
		c.coverNext(fe)
	}
	if rejectsCredentials(fe.Reason) {
		c.logRejectedCredentials(d.Name, fe)
	} else {
		c.s.log.LogAttrs(c.r.Context(), slog.LevelDebug, "attempt failed", slogString("run", c.runID),
			slogString("deployment", d.Name), slogErr(fe), slogDetail(fe))
	}
	return fe
}

// chargeUnanswered charges, estimated, an attempt that reached the
// provider and ended without its answer or its word that it failed. A
// non-streamed call is charged as a cut answer is (chargeCut): the
// provider generates it whole before its answer's headers go out, so one
// belay stopped waiting for (timeouts.first_byte while a reasoning model
// thinks, a kill, a lost connection) may be billed whole (an adversarial
// review: charged its prompt only, such a call's retry was admitted as
// if no output were billed). Charged its prompt only are a stream (the
// provider stops generating when its connection goes, and what it
// streamed before a cut is charged as the stream's, chargeStream) and an
// attempt whose error status came before its error body was lost (the
// provider generated nothing).
func (c *call) chargeUnanswered(d *route.Deployment) {
	if c.req.stream || c.errorStatus {
		c.charge(d, dialect.Usage{Input: c.req.promptTokens}, true)
		return
	}
	c.chargeCut(d)
}

// coverNext holds the money for another attempt after the failed
// attempt fe used tokens: what the call's attempts have used so far and
// one more attempt's estimate (Turn.Cover). When that does not fit the
// run's or the tenant's money, or the store cannot hold it, the router is
// stopped before its next attempt, rather than spend past a limit: the
// call fails with the refusal (which names fe), or, when the store
// failed, with 503 store_unavailable naming fe (see coverStoreError).
func (c *call) coverNext(fe *failure.Error) {
	c.mu.Lock()
	charges := slices.Clone(c.charges)
	c.mu.Unlock()
	// The call's context: a store that hangs does not hold a call whose
	// client left or whose run was killed.
	err := c.turn.Cover(c.turn.Context(), charges)
	if err == nil {
		return
	}
	if c.r.Context().Err() != nil { // the client went away
		c.stopAttempts(failure.Wrap(failure.Canceled, context.Cause(c.r.Context())))
		return
	}
	if refused := failure.As(err); refused != nil {
		cp := *refused
		cp.Message = fmt.Sprintf("not retried after attempt %d failed (%s: %s): %s", c.attempts, fe.Reason, fe.Message, refused.Message)
		c.stopAttempts(&cp)
		return
	}
	c.s.log.LogAttrs(c.r.Context(), slog.LevelWarn, "store failed: a call is not retried without the money for its retry held",
		slogString("run", c.runID), slogString("deployment", fe.Deployment), slogErr(err))
	stop := errStoreUnavailable(&coverStoreError{err: err})
	stop.Deployment = fe.Deployment
	stop.Message = fmt.Sprintf("belay's store is unavailable: not retried after attempt %d failed (%s: %s), "+
		"since the money for the retry could not be held; what the attempts used is charged; retry shortly", c.attempts, fe.Reason, fe.Message)
	c.stopAttempts(stop)
}

// coverStoreError is the Cause of the failure that stops a call whose
// retry's money the store could not hold (coverNext): the call answers
// 503 store_unavailable, retryable by the client, as an admission the
// store failed does.
type coverStoreError struct{ err error }

func (e *coverStoreError) Error() string { return e.err.Error() }
func (e *coverStoreError) Unwrap() error { return e.err }

// rejectsCredentials reports whether an upstream failure with reason r is
// the provider's refusal of a deployment's credentials: authentication
// (HTTP 401, or Gemini's API_KEY_INVALID) or permission_denied (HTTP 403).
// The router falls back from it as from a degraded deployment, but it is
// a misconfiguration that lasts until the config is fixed.
func rejectsCredentials(r failure.Reason) bool {
	return r == failure.Authentication || r == failure.PermissionDenied
}

// upstreamRejectedCredentials reports whether the call's failure err is an
// upstream's refusal of a deployment's credentials (see
// rejectsCredentials), not belay's own refusal of a virtual key or a run.
func upstreamRejectedCredentials(err error) bool {
	fe := failure.As(err)
	return fe != nil && fe.Deployment != "" && rejectsCredentials(fe.Reason)
}

// logRejectedCredentials logs at error level that the upstream rejected
// the credentials of deployment dep (authentication), or refused what
// they may do (permission_denied: a key without access to the model, an
// account's region), naming it, the HTTP status and the provider's
// message.
func (c *call) logRejectedCredentials(dep string, fe *failure.Error) {
	msg := fmt.Sprintf("upstream rejected the credentials of deployment %s (HTTP %d): check its api_key", dep, fe.Status)
	if fe.Reason == failure.PermissionDenied {
		msg = fmt.Sprintf("upstream denied deployment %s permission (HTTP %d): check its api_key and what its account may use (see provider_message)", dep, fe.Status)
	}
	c.s.log.LogAttrs(c.r.Context(), slog.LevelError, msg,
		slogString("run", c.runID), slogString("tenant", c.tenant.Name), slogString("model", c.alias),
		slogString("deployment", dep), slog.Int("status", fe.Status), slogString("reason", string(fe.Reason)),
		slogString("provider_message", fe.Message))
}

// readBody reads the request body up to max_body_bytes; a larger body is a
// RequestTooLarge failure (413). The read must end within
// timeouts.body_read: a read deadline is set on the connection for it
// (where the ResponseWriter supports one) and cleared afterwards, so it
// never bounds the response, however long a stream lasts. A body not
// received in time is an InvalidRequest failure, and the server closes the
// connection.
func (c *call) readBody() ([]byte, *failure.Error) {
	limit := c.s.cfg.MaxBodyBytes
	timeout := c.s.cfg.Timeouts.BodyRead.D()
	rc := http.NewResponseController(c.w)
	armed := timeout > 0 && rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	body, err := readall.Sized(http.MaxBytesReader(c.w, c.r.Body, limit), min(c.r.ContentLength, limit))
	if err == nil {
		if armed {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return body, nil
	}
	// The body was not read to its end: the connection cannot carry
	// another request. Close it after the answer (and keep the expired
	// deadline, so the server does not wait for the rest of the body).
	c.w.Header().Set("Connection", "close")
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return nil, refusal(failure.RequestTooLarge, fmt.Sprintf("request body is larger than max_body_bytes (%d bytes)", limit))
	case errors.As(err, &ne) && ne.Timeout():
		return nil, refusal(failure.InvalidRequest, fmt.Sprintf("request body not received within timeouts.body_read (%s)", timeout))
	}
	return nil, refusal(failure.InvalidRequest, "reading the request body failed")
}

// unknownModel is the ModelNotFound failure for a model not served in
// dialect d; it names the aliases d can use. Its kind is Permanent, not
// the reason's usual Degraded (an upstream's 404 for one deployment,
// which another may serve): no deployment serves a name belay does not
// know (a newcomer finding: logs said "degraded" for a typo).
func (s *Server) unknownModel(d failure.Dialect, model string) *failure.Error {
	notServed := func(msg string) *failure.Error {
		fe := refusal(failure.ModelNotFound, msg)
		fe.Kind = failure.Permanent
		return fe
	}
	for _, m := range s.models {
		if m.alias == model {
			var at []string
			for _, md := range m.dialects {
				path := openai.Path + " or " + openai.ResponsesPath
				if md == string(failure.DialectAnthropic) {
					path = anthropic.Path
				}
				at = append(at, fmt.Sprintf("the %s dialect, POST %s", md, path))
			}
			return notServed(fmt.Sprintf("model %q is not served in the %s dialect (it is served in %s)", model, d, strings.Join(at, "; ")))
		}
	}
	served := s.servedIn(d)
	hint := ""
	if near := suggest.Closest(model, served); near != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", near)
	}
	if len(served) > 20 {
		served = append(served[:20], "…")
	}
	return notServed(fmt.Sprintf("model %q is not a configured model alias%s (served in the %s dialect: %s)",
		model, hint, d, strings.Join(served, ", ")))
}

// charge records the usage of an attempt on d. A negative count (an
// upstream bug: a negative prompt_tokens, or cached tokens above the
// prompt) is charged and recorded as 0, one above maxUsageCount as
// maxUsageCount, and logged.
func (c *call) charge(d *route.Deployment, u dialect.Usage, estimated bool) {
	if clamped, odd := clampUsage(u); odd {
		c.s.log.LogAttrs(c.r.Context(), slog.LevelWarn, "upstream reported a negative or impossibly large token or tool call count; "+
			"charged as 0 or as the largest count belay keeps",
			slogString("run", c.runID), slogString("deployment", d.Name),
			slog.Int64("input", u.Input), slog.Int64("output", u.Output), slog.Int64("cached_input", u.CachedInput),
			slog.Int64("cache_write", u.CacheWrite), slog.Int64("cache_write_1h", u.CacheWrite1h), slog.Int64("reasoning", u.Reasoning),
			slog.Int64("web_searches", u.WebSearches), slog.Int64("file_searches", u.FileSearches))
		u = clamped
	}
	if u.Empty() {
		return
	}
	// A request that asked for priority processing is charged at it
	// unless its answer states the tier that served it (OpenAI bills a
	// request it downgraded at the standard price); an estimate has no
	// answer.
	if u.Tier == "" && c.req.priority {
		u.Tier = "priority"
	}
	c.mu.Lock()
	c.charges = append(c.charges, Charge{Deployment: *d, Usage: u, Estimated: estimated})
	c.mu.Unlock()
}

// maxUsageCount bounds each count of a charge: 2^40 (about 1.1 × 10^12
// tokens or tool calls), far above what any call is billed, and low
// enough that the sums of a call's counts (a prompt's input, cache reads
// and writes) and of a run's calls cannot wrap past int64 (an adversarial
// review: counts near 2^62 summed to a negative prompt, which a run's
// token limit let through).
const maxUsageCount = 1 << 40

// clampUsage returns u with each count within [0, maxUsageCount], and
// whether any was not.
func clampUsage(u dialect.Usage) (dialect.Usage, bool) {
	odd := false
	clamp := func(v *int64) {
		if n := min(max(*v, 0), maxUsageCount); n != *v {
			*v, odd = n, true
		}
	}
	for _, v := range []*int64{&u.Input, &u.Output, &u.CachedInput, &u.CacheWrite, &u.CacheWrite1h, &u.Reasoning, &u.WebSearches, &u.FileSearches} {
		clamp(v)
	}
	u.CacheWrite1h = min(u.CacheWrite1h, u.CacheWrite)
	return u, odd
}

func (c *call) chargeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.charges)
}

func (c *call) takeCharges() []Charge {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.charges
	c.charges = nil
	return out
}

// invalid turns a request-parsing error into an InvalidRequest failure
// naming the field: in its message, and as its Param (OpenAI's error
// object names the field in "param").
func invalid(err error) *failure.Error {
	if fe := dialect.AsFieldError(err); fe != nil {
		e := refusal(failure.InvalidRequest, fe.Error())
		if fe.Field != "body" && fe.Field != "" {
			e.Param = fe.Field // OpenAI's error names the field in param
		}
		return e
	}
	return refusal(failure.InvalidRequest, err.Error())
}

// asFailure returns err as a *failure.Error.
func asFailure(err error) *failure.Error {
	if fe := failure.As(err); fe != nil {
		return fe
	}
	return failure.ClassifyError(err)
}
