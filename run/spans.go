package run

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// traceIDFor derives the run's 32-hex-digit trace id from its id, so that
// every process and every resume writes the same one.
func traceIDFor(runID string) string {
	h := sha256.Sum256([]byte("belay.trace\x00" + runID))
	return hex.EncodeToString(h[:16])
}

// runSpanIDFor derives the run span's id, so writing it at start and at
// end replaces one span.
func runSpanIDFor(runID string) string {
	h := sha256.Sum256([]byte("belay.span\x00" + runID))
	return hex.EncodeToString(h[:8])
}

func newSpanID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// failAttrs adds the failure attributes of err to attrs.
func failAttrs(attrs map[string]any, err error) {
	if err == nil {
		return
	}
	fe := failure.As(err)
	if fe == nil {
		fe = failure.ClassifyError(err)
	}
	attrs[trace.AttrErrorType] = string(fe.Reason)
	attrs[trace.AttrFailureKind] = fe.Kind.String()
	attrs[trace.AttrFailureReason] = string(fe.Reason)
	// The detail a reader needs to act on (the provider's message, the
	// network error) goes to the trace, not to the client's error body.
	if msg := err.Error(); msg != "" {
		attrs[trace.AttrFailureMessage] = msg
	}
	if fe.Status != 0 {
		attrs[trace.AttrHTTPStatus] = int64(fe.Status)
	}
}

// runSpan is the run's span as of now: "invoke_agent {agent}".
//
// runSpanReadTimeout bounds the ledger reads that raise a run span's
// counts to every process's.
const runSpanReadTimeout = 2 * time.Second

// An ended run that other processes may serve (not Single) has its turns,
// tokens and cost raised to the ledger's, as its record is: every process
// that serves a step of the run writes the span, under one id, and the
// last one written must hold the whole run's counts, not its writer's
// share (adversarial review, session 26: the span said 1 turn of 4, each
// replica overwriting it). A running run's span is written again when it
// ends, so its ledger is not read before then (not at its start).
func (r *Run) runSpan() trace.Span {
	r.mu.Lock()
	rec, ended := r.rec, r.ended
	sp := runSpanOf(rec, r.costEstimated, r.eventsDropped, r.events) // events copied under the lock
	r.mu.Unlock()
	if !ended || !r.ledgerCounts() {
		return sp
	}
	ctx, cancel := context.WithTimeout(context.Background(), runSpanReadTimeout)
	defer cancel()
	raised := r.ledgerCounted(ctx, rec)
	if raised.Turns == rec.Turns && raised.Cost == rec.Cost && raised.InputTokens == rec.InputTokens &&
		raised.OutputTokens == rec.OutputTokens {
		return sp
	}
	sp.Attrs[trace.AttrInputTokens] = raised.InputTokens
	sp.Attrs[trace.AttrOutputTokens] = raised.OutputTokens
	sp.Attrs[trace.AttrCostUSD] = raised.Cost.Float()
	sp.Attrs["belay.run.turns"] = int64(raised.Turns)
	return sp
}

// runSpanOf is the run span of record rec: "invoke_agent {agent}", with
// its events (copied) and, when set, its estimated cost and the count of
// events dropped.
func runSpanOf(rec store.Run, costEstimated bool, eventsDropped int64, events []trace.Event) trace.Span {
	name := "invoke_agent"
	if rec.Agent != "" {
		name += " " + rec.Agent
	}
	attrs := map[string]any{
		trace.AttrOperationName:  "invoke_agent",
		trace.AttrConversationID: rec.ID,
		trace.AttrTenant:         rec.Tenant,
		trace.AttrRunStatus:      string(rec.Status),
		trace.AttrInputTokens:    rec.InputTokens,
		trace.AttrOutputTokens:   rec.OutputTokens,
		trace.AttrCostUSD:        rec.Cost.Float(),
		"belay.run.turns":        int64(rec.Turns),
		"belay.run.tool_calls":   int64(rec.ToolCalls),
	}
	if rec.Agent != "" {
		attrs[trace.AttrAgentName] = rec.Agent
	}
	if costEstimated {
		attrs[trace.AttrCostEstimated] = true
	}
	if eventsDropped > 0 {
		attrs["belay.run.events_dropped"] = eventsDropped
	}
	status := trace.StatusUnset
	switch rec.Status {
	case "succeeded":
		status = trace.StatusOK
	case "failed", "stopped":
		status = trace.StatusError
	}
	if rec.StopReason != "" {
		attrs[trace.AttrStopReason] = rec.StopReason
		attrs[trace.AttrFailureReason] = rec.StopReason
	}
	if rec.Error != "" { // why it stopped or failed: the limit and the amounts
		attrs[trace.AttrFailureMessage] = rec.Error
	}
	return trace.Span{
		TraceID: traceIDFor(rec.ID), SpanID: runSpanIDFor(rec.ID), RunID: rec.ID, Kind: trace.KindRun, Name: name,
		Start: rec.Started, End: rec.Ended, Status: status, Attrs: attrs,
		Events: slices.Clone(events),
	}
}

// modelSpan is a model step's span: "chat {model}".
func (a *Admitted) modelSpan(u budget.Usage, o Outcome, cost budget.USD, estimated bool) trace.Span {
	provider, model := a.step.Provider, a.step.Model
	if o.Model != "" {
		provider, model = o.Provider, o.Model
	}
	attrs := map[string]any{
		trace.AttrOperationName: "chat",
		trace.AttrRequestModel:  model,
		trace.AttrInputTokens:   u.InputTokens,
		trace.AttrOutputTokens:  u.OutputTokens,
		trace.AttrCostUSD:       cost.Float(),
	}
	if provider != "" {
		attrs[trace.AttrProviderName] = provider
	}
	for _, kv := range [...]struct {
		k string
		v int64
	}{
		{trace.AttrCachedInputTokens, u.CachedInputTokens},
		{trace.AttrCacheWriteTokens, u.CacheWriteTokens},
		{trace.AttrCacheWrite1hTokens, u.CacheWrite1hTokens},
		{trace.AttrReasoningTokens, u.ReasoningTokens},
	} {
		if kv.v != 0 {
			attrs[kv.k] = kv.v
		}
	}
	if o.ResponseModel != "" {
		attrs[trace.AttrResponseModel] = o.ResponseModel
	}
	if o.ResponseID != "" {
		attrs[trace.AttrResponseID] = o.ResponseID
	}
	if o.InputMessages != "" {
		attrs[trace.AttrInputMessages] = o.InputMessages
	}
	if o.OutputMessages != "" {
		attrs[trace.AttrOutputMessages] = o.OutputMessages
	}
	if dep := cmpOr(o.Deployment, a.step.Deployment); dep != "" {
		attrs[trace.AttrDeployment] = dep
	}
	if a.step.Alias != "" {
		attrs[trace.AttrAlias] = a.step.Alias
	}
	if a.step.API != "" {
		attrs[trace.AttrOpenAIAPIType] = a.step.API
	}
	if estimated {
		attrs[trace.AttrCostEstimated] = true
	}
	if o.Degraded {
		attrs[trace.AttrDegraded] = true
	}
	if len(o.FinishReasons) > 0 {
		attrs[trace.AttrFinishReasons] = slices.Clone(o.FinishReasons)
	}
	status := trace.StatusOK
	if o.Err != nil {
		status = trace.StatusError
		failAttrs(attrs, o.Err)
	}
	name := "chat"
	if model != "" {
		name += " " + model
	}
	traceID, runSpanID := a.r.traceIDs()
	return trace.Span{
		TraceID: traceID, SpanID: a.spanID, ParentID: runSpanID, RunID: a.r.id,
		Kind: trace.KindModel, Name: name, Start: a.start, End: a.end, Status: status, Attrs: attrs,
	}
}

// attemptSpan is one attempt's span: "attempt {deployment}", a child of
// the model span.
func (a *Admitted) attemptSpan(n int, at AttemptRecord) trace.Span {
	attrs := map[string]any{
		trace.AttrDeployment: at.Deployment,
		trace.AttrAttempt:    int64(n),
		trace.AttrWaitMS:     at.Wait.Milliseconds(),
	}
	status := trace.StatusOK
	if at.Failure != nil {
		status = trace.StatusError
		failAttrs(attrs, at.Failure)
	}
	if at.RetryRefused {
		attrs[trace.AttrRetryRefused] = true
	}
	traceID, _ := a.r.traceIDs()
	return trace.Span{
		TraceID: traceID, SpanID: newSpanID(), ParentID: a.spanID, RunID: a.r.id,
		Kind: trace.KindAttempt, Name: "attempt " + at.Deployment, Start: at.Start,
		End: at.Start.Add(at.Duration), Status: status, Attrs: attrs,
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
