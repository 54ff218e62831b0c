package openai

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/failure"
)

// ErrorResponse is OpenAI's error body: {"error": {...}}.
type ErrorResponse struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is OpenAI's error object. Param and Code are null when unset,
// as OpenAI sends them. Decoding accepts a numeric code (some compatible
// routers send one) and keeps it as its decimal text.
type ErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// UnmarshalJSON decodes an error object leniently: fields of an unexpected
// type are left empty instead of failing the decode.
func (e *ErrorObject) UnmarshalJSON(b []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	*e = *looseError(b)
	return nil
}

// NewError returns an ErrorObject; empty code means null.
func NewError(errType, code, message string) ErrorObject {
	e := ErrorObject{Message: message, Type: errType}
	if code != "" {
		e.Code = &code
	}
	return e
}

// WriteError writes an OpenAI error response: status, content-type
// application/json, and the body {"error":{"message","type","param":null,
// "code"}} (code null when empty). Other headers already set on w are kept.
func WriteError(w http.ResponseWriter, status int, errType, code, message string) {
	WriteErrorObject(w, status, NewError(errType, code, message))
}

// WriteErrorObject writes e as an OpenAI error response with status, like
// WriteError; use it to set param ("messages", "model") for request errors.
func WriteErrorObject(w http.ResponseWriter, status int, e ErrorObject) {
	body, _ := json.Marshal(ErrorResponse{Error: e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ErrorEvent returns the in-stream error event OpenAI sends after a 200:
// "data: {"error":{...}}\n\n". The stream is not terminated with [DONE]
// after it.
func ErrorEvent(errType, code, message string) []byte {
	body, _ := json.Marshal(ErrorResponse{Error: NewError(errType, code, message)})
	return sse.Format("", body)
}

// ErrorSpec is how one failure reason is written in the OpenAI dialect.
type ErrorSpec struct {
	Status int
	Type   string
	Code   string // "" is written as null
}

// ErrorFor returns the status, error type and code belay uses to tell an
// OpenAI client about a failure with reason r. Provider-side reasons copy
// what OpenAI sends (https://platform.openai.com/docs/guides/error-codes and
// the samples in cases/wire): rate_limited → 429 requests/rate_limit_exceeded,
// quota_exhausted → 429 insufficient_quota, overloaded → 503 server_error,
// authentication → 401 invalid_request_error/invalid_api_key,
// model_not_found → 404 invalid_request_error/model_not_found,
// request_too_large → 413. belay's own stops have no OpenAI equivalent and
// are chosen so that no official SDK retries them: budget_exceeded → 402
// (Payment Required; Anthropic uses 402 for billing errors too; 429 would
// read as a rate limit), killed, max_turns_exceeded, approval_denied and
// tool_disabled → 403, deadline_exceeded → 504, canceled → 499 (the client
// went away). The code is always the reason name for belay's own stops.
// Unlisted reasons map to 500 server_error.
func ErrorFor(r failure.Reason) ErrorSpec {
	if s, ok := errorSpecs[r]; ok {
		return s
	}
	return ErrorSpec{http.StatusInternalServerError, "server_error", ""}
}

var errorSpecs = map[failure.Reason]ErrorSpec{
	failure.RateLimited:       {429, "requests", "rate_limit_exceeded"},
	failure.RetryAfterTooLong: {429, "requests", "rate_limit_exceeded"},
	failure.Overloaded:        {503, "server_error", ""},
	failure.CircuitOpen:       {503, "server_error", "circuit_open"},
	failure.ServerError:       {500, "server_error", ""},
	failure.Timeout:           {504, "server_error", "timeout"},
	failure.ConnectionError:   {502, "server_error", "connection_error"},
	failure.StreamInterrupted: {502, "server_error", "stream_interrupted"},

	failure.QuotaExhausted:   {429, "insufficient_quota", "insufficient_quota"},
	failure.Authentication:   {401, "invalid_request_error", "invalid_api_key"},
	failure.PermissionDenied: {403, "invalid_request_error", "permission_denied"},
	failure.ModelNotFound:    {404, "invalid_request_error", "model_not_found"},

	failure.InvalidRequest:        {400, "invalid_request_error", ""},
	failure.ContextLengthExceeded: {400, "invalid_request_error", "context_length_exceeded"},
	failure.ContentFiltered:       {400, "invalid_request_error", "content_policy_violation"},
	failure.RequestTooLarge:       {413, "invalid_request_error", "request_too_large"},
	failure.Unknown:               {500, "server_error", ""},

	failure.BudgetExceeded:   {402, "budget_exceeded", "budget_exceeded"},
	failure.MaxTurnsExceeded: {403, "run_stopped", "max_turns_exceeded"},
	failure.DeadlineExceeded: {504, "run_stopped", "deadline_exceeded"},
	failure.Killed:           {403, "run_stopped", "killed"},
	failure.ApprovalDenied:   {403, "run_stopped", "approval_denied"},
	failure.ToolDisabled:     {403, "run_stopped", "tool_disabled"},
	failure.Canceled:         {499, "run_stopped", "canceled"},
	failure.OutcomeUnknown:   {409, "run_stopped", "outcome_unknown"},
	failure.RunEnded:         {409, "run_stopped", "run_ended"},
}

// WriteFailure writes err in the OpenAI dialect using ErrorFor(err.Reason),
// err.Message and, as the error's param, err.Param. A 429 or 503 with err.HasRetryAfter also gets
// retry-after-ms and retry-after (seconds, rounded up) headers.
func WriteFailure(w http.ResponseWriter, err *failure.Error) {
	s := ErrorFor(err.Reason)
	if err.HasRetryAfter && (s.Status == 429 || s.Status == 503) {
		// Rounded up: a client that waits exactly this long is not early.
		SetRetryAfter(w.Header(), (err.RetryAfter + time.Millisecond - 1).Milliseconds())
	}
	msg := err.Message
	if msg == "" {
		msg = string(err.Reason)
	}
	e := NewError(s.Type, s.Code, msg)
	if err.Param != "" { // the provider's, passed on
		e.Param = &err.Param
	}
	WriteErrorObject(w, s.Status, e)
}

// SetRetryAfter sets retry-after-ms (OpenAI's precise header, which its SDKs
// read first) and retry-after in whole seconds, rounded up (RFC 9110
// §10.2.3), for a delay of ms milliseconds.
func SetRetryAfter(h http.Header, ms int64) {
	ms = max(ms, 0)
	h.Set("Retry-After-Ms", strconv.FormatInt(ms, 10))
	h.Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
}
