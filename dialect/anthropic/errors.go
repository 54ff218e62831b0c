package anthropic

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/failure"
)

// ErrorResponse is Anthropic's error body:
// {"type":"error","error":{"type","message"},"request_id"}.
type ErrorResponse struct {
	Type      string      `json:"type"` // "error"
	Error     ErrorObject `json:"error"`
	RequestID *string     `json:"request_id,omitempty"`
}

// ErrorObject is Anthropic's error object. Type is one of the documented
// error types (https://docs.claude.com/en/api/errors): invalid_request_error
// (400), authentication_error (401), billing_error (402), permission_error
// (403), not_found_error (404), request_too_large (413), rate_limit_error
// (429), api_error (500), timeout_error (504), overloaded_error (529).
type ErrorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// WriteError writes an Anthropic error response: status, content-type
// application/json, and {"type":"error","error":{"type","message"}}. When
// w already carries a request-id header, the body repeats it as request_id,
// as Anthropic does. Other headers already set on w are kept.
func WriteError(w http.ResponseWriter, status int, errType, message string) {
	resp := ErrorResponse{Type: "error", Error: ErrorObject{Type: errType, Message: message}}
	if id := w.Header().Get("Request-Id"); id != "" {
		resp.RequestID = &id
	}
	body, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ErrorEvent returns the in-stream error event:
// "event: error\ndata: {"type":"error","error":{"type","message"}}\n\n".
// Anthropic sends overloaded_error this way after a 200.
func ErrorEvent(errType, message string) []byte {
	body, _ := json.Marshal(ErrorResponse{Type: "error", Error: ErrorObject{Type: errType, Message: message}})
	return sse.Format(EventError, body)
}

// ErrorSpec is how one failure reason is written in the Anthropic dialect.
type ErrorSpec struct {
	Status int
	Type   string
}

// ErrorFor returns the status and error type belay uses to tell an
// Anthropic client about a failure with reason r, following Anthropic's
// error table (see ErrorObject): rate_limited → 429 rate_limit_error,
// overloaded and circuit_open → 529 overloaded_error, server_error → 500
// api_error, timeout → 504 timeout_error, authentication → 401,
// permission_denied → 403, model_not_found → 404 not_found_error,
// quota_exhausted → 402 billing_error, request_too_large → 413, other
// request errors → 400 invalid_request_error. belay's own stops:
// budget_exceeded → 402 billing_error (not 429, which SDKs retry and read as
// a rate limit); killed, max_turns_exceeded, approval_denied, tool_disabled
// → 403 permission_error; deadline_exceeded → 504 timeout_error; canceled →
// 499 invalid_request_error; outcome_unknown → 409 invalid_request_error.
// Unlisted reasons map to 500 api_error.
func ErrorFor(r failure.Reason) ErrorSpec {
	if s, ok := errorSpecs[r]; ok {
		return s
	}
	return ErrorSpec{500, "api_error"}
}

var errorSpecs = map[failure.Reason]ErrorSpec{
	failure.RateLimited:       {429, "rate_limit_error"},
	failure.RetryAfterTooLong: {429, "rate_limit_error"},
	failure.Overloaded:        {529, "overloaded_error"},
	failure.CircuitOpen:       {529, "overloaded_error"},
	failure.ServerError:       {500, "api_error"},
	failure.Timeout:           {504, "timeout_error"},
	failure.ConnectionError:   {502, "api_error"},
	failure.StreamInterrupted: {502, "api_error"},

	failure.QuotaExhausted:   {402, "billing_error"},
	failure.Authentication:   {401, "authentication_error"},
	failure.PermissionDenied: {403, "permission_error"},
	failure.ModelNotFound:    {404, "not_found_error"},

	failure.InvalidRequest:        {400, "invalid_request_error"},
	failure.ContextLengthExceeded: {400, "invalid_request_error"},
	failure.ContentFiltered:       {400, "invalid_request_error"},
	failure.RequestTooLarge:       {413, "request_too_large"},
	failure.Unknown:               {500, "api_error"},

	failure.BudgetExceeded:   {402, "billing_error"},
	failure.MaxTurnsExceeded: {403, "permission_error"},
	failure.DeadlineExceeded: {504, "timeout_error"},
	failure.Killed:           {403, "permission_error"},
	failure.ApprovalDenied:   {403, "permission_error"},
	failure.ToolDisabled:     {403, "permission_error"},
	failure.Canceled:         {499, "invalid_request_error"},
	failure.OutcomeUnknown:   {409, "invalid_request_error"},
	failure.RunEnded:         {409, "invalid_request_error"},
}

// WriteFailure writes err in the Anthropic dialect using ErrorFor(err.Reason)
// and err.Message. A 429 or 529 with err.HasRetryAfter also gets a
// retry-after header in whole seconds, rounded up.
func WriteFailure(w http.ResponseWriter, err *failure.Error) {
	s := ErrorFor(err.Reason)
	if err.HasRetryAfter && (s.Status == 429 || s.Status == 529) {
		// Rounded up: a client that waits exactly this long is not early.
		SetRetryAfter(w.Header(), (err.RetryAfter + time.Millisecond - 1).Milliseconds())
	}
	msg := err.Message
	if msg == "" {
		msg = string(err.Reason)
	}
	WriteError(w, s.Status, s.Type, msg)
}

// SetRetryAfter sets retry-after to ms milliseconds in whole seconds,
// rounded up (RFC 9110 §10.2.3); Anthropic sends no millisecond header.
func SetRetryAfter(h http.Header, ms int64) {
	h.Set("Retry-After", strconv.FormatInt((max(ms, 0)+999)/1000, 10))
}
