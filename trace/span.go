// Package trace records what a run did: one span for the run, one per model
// call (turn), tool call and attempt, with OpenTelemetry GenAI attribute
// names, and events for breaker transitions, budget alerts, kills and
// approvals.
package trace

import "time"

// SpanKind says what a span stands for.
type SpanKind string

const (
	KindRun     SpanKind = "run"     // name "invoke_agent {agent}"
	KindModel   SpanKind = "model"   // name "chat {model}"
	KindTool    SpanKind = "tool"    // name "execute_tool {tool}"
	KindAttempt SpanKind = "attempt" // name "attempt {deployment}"
)

// Status is how a span ended.
type Status string

const (
	StatusUnset Status = ""
	StatusOK    Status = "ok"
	StatusError Status = "error"
)

// Span is one unit of work in a run. TraceID is the run's trace (one per
// run); ParentID is empty for the run span. Attrs holds OpenTelemetry
// attribute names and JSON-representable values (string, bool, int64,
// float64, []string); belay's own attributes are prefixed "belay.".
//
// A Span is a plain value; it is not safe to mutate from several goroutines.
type Span struct {
	TraceID  string         `json:"trace_id"`
	SpanID   string         `json:"span_id"`
	ParentID string         `json:"parent_id,omitempty"`
	RunID    string         `json:"run_id"`
	Kind     SpanKind       `json:"kind"`
	Name     string         `json:"name"`
	Start    time.Time      `json:"start"`
	End      time.Time      `json:"end"`
	Status   Status         `json:"status"`
	Attrs    map[string]any `json:"attrs,omitempty"`
	Events   []Event        `json:"events,omitempty"`
}

// Event is a point in time inside a span, or a run-level event (a span of
// kind run carries breaker transitions, budget alerts, kills, approvals).
type Event struct {
	Name  string         `json:"name"`
	Time  time.Time      `json:"time"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

// Attribute names used by belay. The gen_ai.* and error.type names are the
// OpenTelemetry GenAI semantic conventions.
const (
	AttrOperationName     = "gen_ai.operation.name"
	AttrProviderName      = "gen_ai.provider.name"
	AttrRequestModel      = "gen_ai.request.model"
	AttrResponseModel     = "gen_ai.response.model"
	AttrInputTokens       = "gen_ai.usage.input_tokens"
	AttrOutputTokens      = "gen_ai.usage.output_tokens"
	AttrCachedInputTokens = "gen_ai.usage.cache_read.input_tokens"
	AttrCacheWriteTokens  = "gen_ai.usage.cache_creation.input_tokens"
	AttrReasoningTokens   = "gen_ai.usage.reasoning.output_tokens"
	AttrFinishReasons     = "gen_ai.response.finish_reasons"
	AttrAgentName         = "gen_ai.agent.name"
	AttrConversationID    = "gen_ai.conversation.id"
	AttrToolName          = "gen_ai.tool.name"
	AttrToolCallID        = "gen_ai.tool.call.id"
	AttrToolArguments     = "gen_ai.tool.call.arguments"
	AttrToolResult        = "gen_ai.tool.call.result"
	AttrInputMessages     = "gen_ai.input.messages"
	AttrOutputMessages    = "gen_ai.output.messages"
	AttrErrorType         = "error.type"
	AttrResponseID        = "gen_ai.response.id"
	// AttrOpenAIAPIType is the OpenAI API a model call used:
	// "chat_completions" or "responses" (the GenAI conventions for
	// OpenAI, openai.api.type).
	AttrOpenAIAPIType = "openai.api.type"

	AttrFailureKind    = "belay.failure.kind"
	AttrFailureReason  = "belay.failure.reason"
	AttrFailureMessage = "belay.failure.message"     // the failure's text, with its cause
	AttrHTTPStatus     = "http.response.status_code" // OpenTelemetry HTTP semantic conventions
	AttrDeployment     = "belay.deployment"
	AttrAlias          = "belay.model_alias" // the model alias the caller asked for (gen_ai.request.model is the provider's model)
	AttrAttempt        = "belay.attempt"
	AttrWaitMS         = "belay.wait_ms"
	AttrRetryRefused   = "belay.retry.refused" // the retry budget refused the retry after this attempt
	// AttrCacheWrite1hTokens is the part of
	// gen_ai.usage.cache_creation.input_tokens written into a 1-hour cache
	// (Anthropic's cache_creation.ephemeral_1h_input_tokens, billed 2×
	// input); the GenAI conventions have no name for it.
	AttrCacheWrite1hTokens = "belay.usage.cache_creation_1h.input_tokens"
	AttrCostUSD            = "belay.cost_usd"
	AttrCostEstimated      = "belay.cost_estimated"
	AttrBreakerState       = "belay.breaker.state"
	AttrDegraded           = "belay.degraded"
	AttrTenant             = "belay.tenant"
	AttrRunStatus          = "belay.run.status"
	AttrStopReason         = "belay.run.stop_reason"
	AttrIdempotency        = "belay.idempotency_key"
	AttrApproval           = "belay.approval"       // the approval request's id
	AttrApprovalState      = "belay.approval.state" // approved, denied, expired
	AttrRequestID          = "belay.request_id"     // the provider's request id (x-request-id)
	AttrLatencyMS          = "belay.latency_ms"
)

// Sink receives finished (or updated) spans. Implementations must be safe for
// concurrent use and must not block the caller for long: the run layer calls
// Record on the request path.
type Sink interface {
	Record(s Span)
}

// Tool span outcomes (attribute AttrToolOutcome) and approval states
// (attribute AttrApprovalState).
const (
	AttrToolOutcome = "belay.tool.outcome"

	ToolExecuted = "executed" // the effect ran (successfully or not)
	ToolReplayed = "replayed" // a stored result was returned; the effect did not run again
	ToolDenied   = "denied"   // approval denied or timed out
	ToolDisabled = "disabled" // the tool is disabled by the kill switch
	ToolUnknown  = "unknown"  // an earlier owner died holding the key: outcome unknown, not re-run
	ToolRefused  = "refused"  // the run was not admitted (killed, deadline)

	ApprovalApproved    = "approved"
	ApprovalDenied      = "denied"
	ApprovalNotRequired = "not_required"
)
