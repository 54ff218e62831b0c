package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/retry"
)

// exchange is one parsed model request and what the sim decided for it.
type exchange struct {
	model        string
	stream       bool
	includeUsage bool
	maxOut       int64 // 0: no limit given
	choices      int64 // OpenAI n; 0 or 1: one
	promptTokens int64
	conv         *Conversation
	// jsonOut: the request asks for structured output (a JSON object,
	// valid under schema when one is given): a text reply that is not
	// JSON is replaced by instanceOf(schema).
	jsonOut bool
	schema  json.RawMessage

	requestID, messageID string
	// itemIDs are a Responses answer's output item ids: the message's,
	// then each call's.
	itemIDs []string
	// echo is what a Responses answer repeats of its request.
	echo       *responsesEcho
	created    int64
	retryAfter time.Duration
}

// reply is what the simulated model says. cut is true when the output was
// cut short (the request's output limit, or the truncated_tool_args fault):
// the finish reason is then "length" (OpenAI) or "max_tokens" (Anthropic).
type reply struct {
	text  string
	calls []call
	cut   bool
}

// call is one tool call; partial is true when its arguments were cut.
type call struct {
	id, name, args string
	partial        bool
}

// limit returns r cut to maxOut output tokens (maxOut × 4 characters of
// text, then of tool names and arguments, in order; calls past the limit
// are dropped), as a provider stops generating at max_tokens. maxOut <= 0
// means no limit.
func (r reply) limit(maxOut int64) reply {
	budget := maxOut * dialect.CharsPerToken
	if maxOut <= 0 || r.outputChars() <= budget {
		return r
	}
	out := reply{cut: true}
	out.text = prefix(r.text, budget)
	budget -= int64(len(out.text))
	for _, c := range r.calls {
		if budget <= int64(len(c.name)) {
			break
		}
		budget -= int64(len(c.name))
		if args := prefix(c.args, budget); len(args) < len(c.args) {
			c.args, c.partial = args, true
		}
		budget -= int64(len(c.args))
		out.calls = append(out.calls, c)
		if c.partial {
			break
		}
	}
	return out
}

// truncate returns r as the truncated_tool_args fault sends it: the second
// half of the text (without tool calls) or of the last call's arguments is
// lost.
func (r reply) truncate() reply {
	r.cut = true
	if len(r.calls) == 0 {
		r.text = prefix(r.text, int64(len(r.text)/2))
		return r
	}
	r.calls = append([]call(nil), r.calls...)
	last := &r.calls[len(r.calls)-1]
	last.args, last.partial = last.args[:len(last.args)/2], true
	return r
}

// prefix returns at most n bytes of s, ending on a rune boundary.
func prefix(s string, n int64) string {
	if n >= int64(len(s)) {
		return s
	}
	k := int(max(n, 0))
	for k > 0 && !utf8RuneStart(s[k]) {
		k--
	}
	return s[:k]
}

func (r reply) outputChars() int64 {
	n := len(r.text)
	for _, c := range r.calls {
		n += len(c.name) + len(c.args)
	}
	return int64(n)
}

// usage returns the sim's usage: the dialect's prompt estimate, and output
// ≈ reply chars/4, at least 1 and at most the request's output limit.
func (ex *exchange) usage(r reply) dialect.Usage {
	out := max(dialect.EstimateTokens(r.outputChars()), 1)
	if ex.maxOut > 0 {
		out = min(out, ex.maxOut)
	}
	// Each choice (OpenAI n) is generated, and counted, in full.
	return dialect.Usage{Input: ex.promptTokens, Output: out * max(ex.choices, 1)}
}

// wire is one dialect's rendering.
type wire interface {
	parse(body []byte) (*exchange, error)
	idHeader() string
	ids(ex *exchange, rng *rand.Rand, calls int) []string
	writeError(w http.ResponseWriter, status int, errType, code, msg string)
	writeInvalid(w http.ResponseWriter, param, msg string)
	writeFault(w http.ResponseWriter, f Fault, ex *exchange)
	body(ex *exchange, r reply) []byte
	stream(w http.ResponseWriter, r *http.Request, ex *exchange, rep reply, p streamPlan)
}

// streamPlan says how a stream misbehaves.
type streamPlan struct {
	firstDelay, chunkDelay time.Duration
	// stopAfter is the number of content events sent before an error event
	// (fail) or before the stream just ends (cut); -1 sends everything.
	stopAfter int
	fail      bool
}

func (s *Server) serveModel(w http.ResponseWriter, r *http.Request, wr wire) {
	dep := r.PathValue("deployment")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			wr.writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", "request_too_large",
				"Request exceeds the maximum allowed number of bytes.")
			return
		}
		wr.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not read the request body: "+err.Error())
		return
	}
	if !s.authorized(r) {
		wr.writeFault(w, AuthError, &exchange{})
		return
	}
	ex, err := wr.parse(body)
	if err != nil {
		param := ""
		if fe := dialect.AsFieldError(err); fe != nil {
			param = fe.Field
		}
		wr.writeInvalid(w, param, err.Error())
		return
	}
	forced, hasForced := Fault(""), false
	if h := r.Header.Get("X-Sim-Fault"); h != "" {
		if forced, err = ParseFault(h); err != nil {
			wr.writeError(w, http.StatusBadRequest, "invalid_request_error", "", "X-Sim-Fault: "+err.Error())
			return
		}
		hasForced = true
	}

	runID := r.Header.Get("X-Belay-Run-Id")
	rng := s.requestRand(dep, runID, body)
	prof := s.profileFor(dep)
	// The order of draws is fixed: fault, latency, retry-after, reply, ids.
	fault := prof.Draw(rng)
	latency := prof.Latency.Draw(rng)
	ex.retryAfter = drawRetryAfter(rng, prof)
	rep, scripted := s.choose(ex.conv, runID, rng, !hasForced)
	if ex.jsonOut && len(rep.calls) == 0 && !json.Valid([]byte(rep.text)) {
		rep.text = string(instanceOf(ex.schema))
	}
	ids := wr.ids(ex, rng, len(rep.calls))
	for i := range rep.calls {
		rep.calls[i].id = ids[i]
	}
	ex.created = s.cfg.Now().Unix()
	if scripted != NoFault {
		fault = scripted
	}
	if hasForced {
		fault = forced
	}
	s.record(dep, fault)

	w.Header().Set(wr.idHeader(), ex.requestID)
	w.Header().Set("X-Sim-Profile", prof.Name) // which profile served: /d/flakey (a typo) says none
	if note := s.profileNote(dep, prof); note != "" {
		w.Header().Set("X-Sim-Note", note)
	}
	if fault != Reset && fault != Hang {
		if retry.Sleep(r.Context(), latency) != nil {
			return
		}
	}
	if r.Context().Err() != nil {
		return // the client is gone
	}
	s.respond(w, r, wr, ex, rep, fault, prof)
}

// failBeforeAnswer answers fault f when it strikes before any answer (a
// hang, a reset, an error response) and reports whether it did; the
// faults of an answer's body (stream errors and cuts, truncated tool
// arguments, a slow first token) are left to the answer.
func failBeforeAnswer(w http.ResponseWriter, r *http.Request, wr wire, ex *exchange, f Fault) bool {
	switch f {
	case NoFault, StreamError, StreamCut, TruncatedToolArgs, SlowFirstToken:
		return false
	case Hang:
		<-r.Context().Done()
	case Reset:
		reset(w)
	default:
		wr.writeFault(w, f, ex)
	}
	return true
}

// drawRetryAfter draws the Retry-After a rate limit of profile prof
// gives: from 100ms to its maximum.
func drawRetryAfter(rng *rand.Rand, prof Profile) time.Duration {
	const minRA = 100 * time.Millisecond
	return minRA + time.Duration(rng.Int64N(int64(max(prof.maxRetryAfter()-minRA, 0))+1))
}

func (s *Server) respond(w http.ResponseWriter, r *http.Request, wr wire, ex *exchange, rep reply, f Fault, prof Profile) {
	if failBeforeAnswer(w, r, wr, ex, f) {
		return
	}
	rep = rep.limit(ex.maxOut)
	if f == TruncatedToolArgs {
		rep = rep.truncate()
	}
	plan := streamPlan{stopAfter: -1, chunkDelay: prof.ChunkDelay}
	switch f {
	case SlowFirstToken:
		plan.firstDelay = prof.firstTokenDelay()
	case StreamError, StreamCut:
		plan.stopAfter, plan.fail = 2, f == StreamError
	}
	if ex.stream {
		wr.stream(w, r, ex, rep, plan)
		return
	}
	if retry.Sleep(r.Context(), plan.firstDelay) != nil {
		return
	}
	body := wr.body(ex, rep)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	if plan.stopAfter >= 0 {
		// A non-streamed body cut in the middle: the declared length is not
		// met and the connection is aborted.
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// reset closes the connection without a response: with SO_LINGER 0 on TCP,
// so the client sees a connection reset. Where the connection cannot be
// hijacked (HTTP/2, recorders) the handler is aborted instead.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// choose returns the scripted reply (or the default one) and a scripted
// fault, if a rule injects one now. With faults false (X-Sim-Fault decides)
// no rule's fault is spent.
func (s *Server) choose(c *Conversation, runID string, rng *rand.Rand, faults bool) (reply, Fault) {
	vars := builtins(c)
	sc := s.cfg.Script
	if sc != nil {
		all := c.AllText()
		for _, re := range sc.captures {
			capture(re, all, vars)
		}
		for i := range sc.Rules {
			rule := &sc.Rules[i]
			got, ok := rule.When.match(c)
			if !ok {
				continue
			}
			if rule.Probability > 0 && rule.Probability < 1 && rng.Float64() >= rule.Probability {
				continue
			}
			for k, v := range got {
				vars[k] = v
			}
			rep := render(rule.Reply, vars)
			if faults && rule.Fault != NoFault && s.spend(i, runID, rule.FaultTimes) {
				if rep.text == "" && len(rep.calls) == 0 {
					rep = defaultReply(c, rng)
				}
				return rep, rule.Fault
			}
			if rule.Reply.Text == "" && len(rule.Reply.ToolCalls) == 0 {
				continue
			}
			return rep, NoFault
		}
	}
	return defaultReply(c, rng), NoFault
}

func render(r Reply, vars map[string]string) reply {
	out := reply{text: fill(r.Text, vars)}
	for _, tc := range r.ToolCalls {
		args := map[string]any{}
		if tc.Arguments != nil {
			args = fillValue(tc.Arguments, vars).(map[string]any)
		}
		b, _ := json.Marshal(args)
		out.calls = append(out.calls, call{name: tc.Name, args: string(b)})
	}
	return out
}

var openers = []string{
	"Sure. You asked: %q. Here is a short answer: that is doable, and I can go into more detail if you like.",
	"Thanks for the question: %q. In short, the answer depends on a few details, but the usual approach works well.",
	"Understood: %q. I have looked into it and everything appears to be in order.",
}

// defaultReply is the reply when no rule matches: after a tool result it
// summarises the result; otherwise it quotes the user's latest text.
func defaultReply(c *Conversation, rng *rand.Rand) reply {
	i := rng.IntN(len(openers))
	if t, ok := c.LastToolResult(); ok {
		name := t.ToolName
		if name == "" {
			name = "tool"
		}
		return reply{text: fmt.Sprintf("The %s call returned: %s. Is there anything else I can help with?", name, clip(t.Text, 120))}
	}
	last := c.LastUserText()
	if last == "" {
		return reply{text: "Hello! How can I help you today?"}
	}
	return reply{text: fmt.Sprintf(openers[i], clip(last, 120))}
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pieces splits s into stream deltas of about n bytes, on rune boundaries.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randID(rng *rand.Rand, prefix string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idChars[rng.IntN(len(idChars))]
	}
	return prefix + string(b)
}
