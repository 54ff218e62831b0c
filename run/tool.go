package run

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/ids"
	"github.com/belay-run/belay/internal/jsonnum"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// ErrNoEffect marks a tool error whose effect is known not to have happened
// (the tool failed before touching anything). Wrap it in the error a tool
// function returns (fmt.Errorf("...: %w", run.ErrNoEffect)); only then is
// the idempotency key abandoned, so a later call runs the tool again, and
// only then is a transient error retried for a tool not SafeToRepeat. Any
// other error is stored as the call's result and replayed.
var ErrNoEffect = errors.New("run: tool call had no effect")

// ErrInFlight is the cause of the Transient error returned when another
// live owner holds the call's idempotency key: the caller may try again
// later and will then get the stored result.
var ErrInFlight = errors.New("run: tool call in flight elsewhere")

// ToolCall is one call of a tool.
type ToolCall struct {
	Name   string
	CallID string // the model's tool call id, for the trace
	// Arguments is the JSON the model produced; it is stored with an
	// approval request exactly as given.
	Arguments json.RawMessage
	// IdempotencyKey names the effect; empty means IdempotencyKey(run id,
	// Name, Arguments). Give an explicit key to deduplicate across the
	// runs of one tenant: a run of another tenant (Spec.Tenant) has its
	// own effect under the same key (stored under a form no other tenant's
	// key takes, see storedKey; DefaultTenant's as given); the tool sees
	// the key as given (IdempotencyKeyFrom).
	IdempotencyKey string
	// SafeToRepeat declares that running the effect twice is harmless: an
	// expired key is taken over and run again instead of reported as
	// outcome unknown, and transient errors are retried.
	SafeToRepeat bool
	// ReadOnly declares that the tool has no side effect (MCP's
	// readOnlyHint), as does a name matching Policy.ReadOnly: there is no
	// effect to deduplicate, so no key is claimed or stored and every
	// call runs fn (a status poll with the same arguments sees fresh
	// data, not the first call's result replayed); transient errors are
	// retried as for SafeToRepeat. The call is still admitted (kill
	// switch, disabled tool, the run's limits) and traced. A tool that
	// matches Policy.Irreversible is not read-only: it waits for its
	// approval and is deduplicated whatever ReadOnly says.
	ReadOnly bool
	// Irreversible declares that this call's effect cannot be undone (a
	// payment, an email), as does a name matching Policy.Irreversible: it
	// waits for the Approver before fn runs (and is not read-only,
	// whatever ReadOnly says). For a program that knows its own tools
	// without a config naming them.
	Irreversible bool
	// Retry, when set, retries transient tool errors (failure.Transient)
	// with this policy's backoff, if SafeToRepeat or ReadOnly or the
	// error wraps ErrNoEffect. Nil means one attempt.
	Retry *retry.Policy
}

// ToolError is a tool's own failure, stored as the call's result: the
// first call returns it with Cause set; a replay of the same key returns it
// with Replayed set and the stored Message.
type ToolError struct {
	Tool     string
	Message  string
	Replayed bool
	Cause    error
}

func (e *ToolError) Error() string {
	if e.Replayed {
		return fmt.Sprintf("tool %s failed (replayed): %s", e.Tool, e.Message)
	}
	return fmt.Sprintf("tool %s failed: %s", e.Tool, e.Message)
}

func (e *ToolError) Unwrap() error { return e.Cause }

// IdempotencyKey derives a call's key: "tool:" and the hex SHA-256 of the
// run id, the tool name and the canonical JSON of the arguments, so the
// same call in the same run has the same key however the model wrote it:
// insignificant space removed; object members sorted by their names
// folded as encoding/json matches a struct field's (ignoring case,
// strings.EqualFold), the last of two that fold alike kept, as a tool
// decoding into a struct keeps it; each number written one way for its
// value (40, 40.0, 4e1 and 40.00 are 40). Arguments that are not one JSON
// value (trailing data included) are hashed as they are.
func IdempotencyKey(runID, tool string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(runID))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canonicalJSON(args))
	return "tool:" + hex.EncodeToString(h.Sum(nil))
}

func canonicalJSON(b json.RawMessage) []byte {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := strictValue(d)
	if err != nil {
		return b
	}
	if _, err := d.Token(); err != io.EOF { // more after the value: not one document
		return b
	}
	out, err := json.Marshal(canonicalValue(v)) // map keys come out sorted
	if err != nil {
		return b
	}
	return out
}

// canonicalValue returns v (as strictValue gives it) in canonical form:
// objects as maps keyed by their members' folded names (foldName), the
// last member of a name kept; numbers canonical (jsonnum.Canonical).
func canonicalValue(v any) any {
	switch x := v.(type) {
	case []member:
		m := make(map[string]any, len(x))
		for _, mb := range x {
			m[foldName(mb.name)] = canonicalValue(mb.value)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canonicalValue(e)
		}
		return out
	case json.Number:
		return json.Number(jsonnum.Canonical(string(x)))
	}
	return v
}

// foldName returns s with each rune replaced by the least rune of its
// simple case-folding orbit (unicode.SimpleFold): two names fold alike
// exactly when strings.EqualFold holds, as encoding/json matches them.
func foldName(s string) string {
	var b strings.Builder
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// storedKey is the key an explicit idempotency key of tenant is stored
// under: the key itself for DefaultTenant ("~" before it when it begins
// with "~"), else "~", the tenant's length, "~", the tenant and the key.
// No two tenants' keys meet (adversarial review: "acme~invoice-42" of the
// default tenant met acme's "invoice-42", and tenant "acme~x"'s "y" met
// acme's "x~y").
func storedKey(tenant, key string) string {
	if tenant == DefaultTenant {
		if strings.HasPrefix(key, "~") {
			return "~" + key
		}
		return key
	}
	return "~" + strconv.Itoa(len(tenant)) + "~" + tenant + key
}

// Tool runs one tool call inside the run:
//
//  1. admit: the run is live and neither it nor the tool is killed (a
//     disabled tool fails fast with Fatal ToolDisabled); time is left.
//  2. approval: a tool matching Policy.Irreversible waits for the
//     Approver; denied or expired (or no approver) is Fatal ApprovalDenied.
//     A call whose key already holds a completed result is not put to
//     the Approver again: it replays the result (step 3) at once; nor is
//     one whose key is in flight under a live owner, or expired and not
//     safe to repeat (step 3 answers them).
//  3. idempotency (not for a read-only tool, see ToolCall.ReadOnly: fn
//     runs at once): the key is claimed. Completed: the stored result is
//     returned (a stored failure as *ToolError with Replayed) and fn does
//     not run. In flight under a live owner: a Transient error wrapping
//     ErrInFlight. Expired (its owner died mid-call): Fatal OutcomeUnknown,
//     unless SafeToRepeat, which takes it over and runs fn.
//  4. fn runs with a context canceled if the run is killed, retried per
//     ToolCall.Retry; its result is stored under the key. An error
//     wrapping ErrNoEffect abandons the key; any other error is stored and
//     returned as *ToolError.
//  5. the span "execute_tool {name}" records all of it.
//
// When fn panics, the step is closed and its span recorded (an error,
// "panicked: …") before the panic goes on to the caller; the key stays
// claimed, and once its lease runs out a repeat is OutcomeUnknown (the
// effect may have happened), as for an owner that died.
func (r *Run) Tool(ctx context.Context, call ToolCall, fn func(ctx context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	attrs := map[string]any{
		trace.AttrOperationName: "execute_tool",
		trace.AttrToolName:      call.Name,
		trace.AttrToolArguments: string(call.Arguments),
	}
	if call.CallID != "" {
		attrs[trace.AttrToolCallID] = call.CallID
	}
	start := r.m.now()
	a, err := r.Admit(ctx, Step{Kind: KindTool, Tool: call.Name})
	if err != nil {
		// A refused call is recorded too, so the trace shows what the agent
		// tried: a disabled tool, or a call after the run was stopped.
		attrs[trace.AttrToolOutcome] = trace.ToolRefused
		if errors.Is(err, failure.ToolDisabled) {
			attrs[trace.AttrToolOutcome] = trace.ToolDisabled
		}
		failAttrs(attrs, err)
		traceID, runSpanID := r.traceIDs()
		r.m.sink.Record(trace.Span{
			TraceID: traceID, SpanID: trace.NewID(), ParentID: runSpanID, RunID: r.id, Kind: trace.KindTool,
			Name: "execute_tool " + call.Name, Start: start, End: r.m.now(), Status: trace.StatusError, Attrs: attrs,
		})
		return nil, err
	}
	res, err, panicked := r.toolRecovering(a, call, fn, attrs)
	a.close()
	a.done()
	status := trace.StatusOK
	if err != nil {
		status = trace.StatusError
		failAttrs(attrs, err)
	} else {
		attrs[trace.AttrToolResult] = string(res)
	}
	traceID, runSpanID := r.traceIDs()
	r.m.sink.Record(trace.Span{
		TraceID: traceID, SpanID: a.spanID, ParentID: runSpanID, RunID: r.id, Kind: trace.KindTool,
		Name: "execute_tool " + call.Name, Start: a.start, End: r.m.now(), Status: status, Attrs: attrs,
	})
	_ = r.persist(context.WithoutCancel(ctx))
	r.stepClosed()
	if panicked != nil {
		panic(panicked) // the step closed and recorded first
	}
	return res, err
}

// toolRecovering is tool, with a panic of fn recovered as the call's
// error and returned to be raised again once the step is closed: an open
// step would keep its run from ending. Its idempotency key stays claimed
// until its lease runs out (the effect may have happened).
func (r *Run) toolRecovering(a *Admitted, call ToolCall, fn func(context.Context) (json.RawMessage, error), attrs map[string]any) (res json.RawMessage, err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			res, err, panicked = nil, &ToolError{Tool: call.Name, Message: fmt.Sprintf("panicked: %v", p)}, p
		}
	}()
	res, err = r.tool(a, call, fn, attrs)
	return res, err, nil
}

func (r *Run) tool(a *Admitted, call ToolCall, fn func(context.Context) (json.RawMessage, error), attrs map[string]any) (json.RawMessage, error) {
	ctx := a.ctx
	key := call.IdempotencyKey
	switch {
	case key == "":
		key = IdempotencyKey(r.id, call.Name, call.Arguments)
	default:
		// One tenant never replays another's result (its refund's
		// confirmation, say) nor is kept from its own effect by it
		// (adversarial review: a run of tenant B got A's stored result).
		key = storedKey(r.tenant, key)
	}
	st, owner, lease := r.m.st, r.m.owner, r.m.cfg.IdempotencyLease
	pol := r.m.cfg.Policy
	approval := call.Irreversible || pol.NeedsApproval(call.Name)
	if (call.ReadOnly || pol.IsReadOnly(call.Name)) && !approval {
		call.ReadOnly, call.SafeToRepeat = true, true
		attrs["belay.idempotency.state"] = "read_only"
		attrs[trace.AttrToolOutcome] = trace.ToolExecuted
		return r.execute(a, call, key, fn, attrs)
	}
	call.ReadOnly = false
	attrs[trace.AttrIdempotency] = key
	skipped := false // approval not asked: the key was in flight, or expired and not safe to repeat
	if approval {
		// A call whose effect already happened under its key only
		// replays the stored result: no one is asked again. Nor is anyone
		// asked for a call that could not run once approved: its key in
		// flight under a live owner (another process running the effect),
		// or expired and not safe to repeat (outcome unknown). Those go
		// straight to the claim below, which answers them (adversarial
		// review, session 26: a second process asked a person to approve
		// an effect that was already running, then replayed its result).
		c, err := st.Lookup(ctx, key, r.m.now())
		if err == nil && c.State == store.ClaimCompleted {
			attrs["belay.idempotency.state"] = string(c.State)
			attrs[trace.AttrToolOutcome] = trace.ToolReplayed
			return replay(call.Name, c)
		}
		if err == nil && (c.State == store.ClaimInFlight || c.State == store.ClaimExpired && !call.SafeToRepeat) {
			approval, skipped = false, true
		}
	}
	var c store.Claim
	for {
		if approval {
			if err := r.approveTool(ctx, a, call, attrs); err != nil {
				return nil, err
			}
		}
		var err error
		c, err = st.Claim(ctx, key, owner, lease, r.m.now())
		if err != nil {
			return nil, a.cause(fmt.Errorf("run: claim %s: %w", key, err))
		}
		// The key was given up (ErrNoEffect) or ran out since it was
		// looked up: this call would run its effect, which must be
		// approved first (adversarial review, session 26). The claim is
		// given back while a person decides.
		if skipped && (c.State == store.ClaimNew || c.State == store.ClaimExpired && call.SafeToRepeat) {
			if c.State == store.ClaimNew {
				if err := st.Abandon(context.WithoutCancel(ctx), key, owner); err != nil {
					return nil, a.cause(fmt.Errorf("run: give back %s for its approval: %w", key, err))
				}
			}
			approval, skipped = true, false
			continue
		}
		break
	}
	attrs["belay.idempotency.state"] = string(c.State)
	switch c.State {
	case store.ClaimCompleted:
		attrs[trace.AttrToolOutcome] = trace.ToolReplayed
		return replay(call.Name, c)
	case store.ClaimInFlight:
		return nil, &failure.Error{Kind: failure.Transient, Reason: failure.Unknown, Cause: ErrInFlight,
			Message: fmt.Sprintf("tool %s: key %s is in flight, held by %s until %s", call.Name, key, c.Owner, c.LeaseEnd.Format(time.RFC3339))}
	case store.ClaimExpired:
		if !call.SafeToRepeat {
			attrs[trace.AttrToolOutcome] = trace.ToolUnknown
			return nil, refusal(failure.OutcomeUnknown,
				"tool %s: owner %s died holding key %s; the effect may or may not have happened", call.Name, c.Owner, key)
		}
		if _, err := st.TakeOver(ctx, key, owner, lease, r.m.now()); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return nil, &failure.Error{Kind: failure.Transient, Reason: failure.Unknown, Cause: ErrInFlight,
					Message: fmt.Sprintf("tool %s: key %s was taken over by another owner", call.Name, key)}
			}
			return nil, fmt.Errorf("run: take over %s: %w", key, err)
		}
		attrs["belay.idempotency.state"] = "taken_over"
	}
	attrs[trace.AttrToolOutcome] = trace.ToolExecuted
	return r.execute(a, call, key, fn, attrs)
}

// approveTool asks for the approval of call and records it on attrs; it
// returns the refusal (denied, expired, the run stopped while waiting, a
// kill flag set meanwhile), nil when approved.
func (r *Run) approveTool(ctx context.Context, a *Admitted, call ToolCall, attrs map[string]any) error {
	ap, err := r.approve(ctx, call)
	if err != nil {
		return a.cause(err)
	}
	attrs[trace.AttrApproval] = ap.ID
	attrs[trace.AttrApprovalState] = string(ap.State)
	attrs["belay.approval.by"] = ap.DecidedBy
	if ap.State != store.ApprovalApproved {
		if fe := failure.As(context.Cause(ctx)); ctx.Err() != nil && fe != nil {
			return fe // the run was killed or stopped while waiting
		}
		attrs[trace.AttrToolOutcome] = trace.ToolDenied
		return refusal(failure.ApprovalDenied, "%s", denial(call.Name, ap))
	}
	// The wait can be long (a person decides): a kill flag set on the
	// tool or the run meanwhile holds, approval or not (adversarial
	// review: a tool disabled while its call waited ran once approved).
	// A run, tenant or all flag also cancels the wait.
	ks := r.m.loadKills()
	k, killed := ks.forRun(r.id, r.tenant)
	if !killed {
		k, killed = ks.forStep(Step{Kind: KindTool, Tool: call.Name})
	}
	if killed {
		attrs[trace.AttrToolOutcome] = trace.ToolRefused
		if k.Target == store.KillTool {
			attrs[trace.AttrToolOutcome] = trace.ToolDisabled
		}
		return killFailure(k)
	}
	return nil
}

// replay returns a completed call's stored result.
func replay(tool string, c store.Claim) (json.RawMessage, error) {
	if !c.IsError {
		return json.RawMessage(c.Result), nil
	}
	var stored struct {
		Error string `json:"error"`
	}
	msg := string(c.Result)
	if json.Unmarshal(c.Result, &stored) == nil && stored.Error != "" {
		msg = stored.Error
	}
	return nil, &ToolError{Tool: tool, Message: msg, Replayed: true}
}

// execute runs fn under the claimed key, with retries, and stores the
// outcome.
func (r *Run) execute(a *Admitted, call ToolCall, key string, fn func(context.Context) (json.RawMessage, error), attrs map[string]any) (json.RawMessage, error) {
	ctx, st, owner := context.WithValue(a.ctx, keyCtx{}, cmp.Or(call.IdempotencyKey, key)), r.m.st, r.m.owner
	wctx := context.WithoutCancel(ctx)
	var res json.RawMessage
	var ferr error
	var retried []string // the errors of the attempts that were tried again
	attempt := 1
	for ; ; attempt++ {
		res, ferr = fn(ctx)
		if ferr == nil || !r.retryTool(ctx, call, attempt, ferr) {
			break
		}
		retried = append(retried, ferr.Error())
	}
	// The trace shows every try under the one key (the timeout whose
	// answer was lost, then the repeat the key made safe).
	attrs[AttrToolAttempts] = attempt
	if len(retried) > 0 {
		attrs[AttrToolRetriedErrors] = retried
	}
	if call.ReadOnly { // nothing claimed, nothing stored
		switch {
		case ferr == nil:
			return res, nil
		case errors.Is(ferr, ErrNoEffect):
			return nil, a.cause(ferr)
		}
		return nil, &ToolError{Tool: call.Name, Message: ferr.Error(), Cause: a.cause(ferr)}
	}
	if ferr == nil {
		if err := st.Complete(wctx, key, owner, res, false); err != nil {
			// The effect happened here; its result is returned even if
			// the key was lost (the lease expired and was taken over).
			r.event("idempotency.conflict", map[string]any{"key": key, "error": err.Error()})
		}
		return res, nil
	}
	if errors.Is(ferr, ErrNoEffect) {
		_ = st.Abandon(wctx, key, owner)
		return nil, a.cause(ferr)
	}
	msg := ferr.Error()
	stored, _ := json.Marshal(map[string]string{"error": msg})
	_ = st.Complete(wctx, key, owner, stored, true)
	return nil, &ToolError{Tool: call.Name, Message: msg, Cause: a.cause(ferr)}
}

// retryTool reports whether to try fn again after ferr, waiting the
// policy's backoff first; it never retries an effect that may have
// happened unless the tool is safe to repeat.
func (r *Run) retryTool(ctx context.Context, call ToolCall, attempt int, ferr error) bool {
	if call.Retry == nil || ctx.Err() != nil {
		return false
	}
	if !call.SafeToRepeat && !errors.Is(ferr, ErrNoEffect) {
		return false
	}
	fe := failure.As(ferr)
	if fe == nil {
		fe = failure.ClassifyError(ferr)
	}
	left := retry.NoDeadline
	if !r.deadline.IsZero() {
		left = r.deadline.Sub(r.m.now())
	}
	d := call.Retry.Decide(attempt, fe, r.m.rand(), left)
	if d.Action != retry.Retry {
		return false
	}
	return retry.Sleep(ctx, d.Wait) == nil
}

// Tool span attributes set by Run.Tool: how many times the tool function
// ran, and the errors of the tries that were repeated.
const (
	AttrToolAttempts      = "belay.tool.attempts"
	AttrToolRetriedErrors = "belay.tool.retried_errors"
)

type keyCtx struct{}

// IdempotencyKeyFrom returns the idempotency key of the tool call whose
// function runs with ctx, so the tool can pass it on to an external system
// that deduplicates by key (a payments API's Idempotency-Key header). It
// returns "" outside a tool call.
func IdempotencyKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(keyCtx{}).(string)
	return k
}

// denial is the message of a tool call whose approval a was not given:
// the tool, the approval's id and state, who decided (when recorded) and
// the note given with the decision (when there is one), quoted:
// `tool wire_money: approval apr_… denied by bob: "already refunded"`.
func denial(tool string, a store.Approval) string {
	msg := fmt.Sprintf("tool %s: approval %s %s", tool, a.ID, a.State)
	if a.DecidedBy != "" {
		msg += " by " + a.DecidedBy
	}
	if a.Note != "" {
		msg += fmt.Sprintf(": %q", a.Note)
	}
	return msg
}

func newApprovalID() string { return "apr_" + ids.New() }
