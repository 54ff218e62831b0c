package failure

import (
	"strconv"
	"strings"
)

// The rules below turn what a provider said into a Reason, by meaning first
// and status code second:
//
//  1. a specific provider error type or code (providerNames) wins over the
//     status: a 429 "insufficient_quota" is QuotaExhausted, not RateLimited;
//  2. then Gemini's google.rpc status name (grpcStatuses);
//  3. then the HTTP status, or the code embedded in an error object that
//     arrived inside an HTTP 200 or a stream (statusReason);
//  4. then a generic provider type ("server_error", "invalid_request_error");
//  5. else Unknown (permanent: an unrecognised failure is never retried
//     blindly).
//
// refine then reads the few meanings a provider only puts in its details or
// message (see refine).

// providerNames maps specific provider error types and codes, lower-cased,
// to reasons. Sources: OpenAI "Error codes" guide and "API error code
// guidance" help article; Anthropic "Errors" page (docs.claude.com/en/api/errors);
// Azure OpenAI content filtering and REST error docs; Gemini API
// troubleshooting guide (ErrorInfo reasons).
var providerNames = map[string]Reason{
	"insufficient_quota":         QuotaExhausted, // OpenAI 429: no credit left
	"billing_not_active":         QuotaExhausted, // OpenAI
	"billing_hard_limit_reached": QuotaExhausted, // OpenAI
	"billing_error":              QuotaExhausted, // Anthropic 402

	"context_length_exceeded": ContextLengthExceeded, // OpenAI 400

	"content_policy_violation":     ContentFiltered, // OpenAI 400
	"content_filter":               ContentFiltered, // Azure OpenAI 400
	"responsibleaipolicyviolation": ContentFiltered, // Azure OpenAI innererror.code

	"model_not_found":    ModelNotFound, // OpenAI 404
	"deploymentnotfound": ModelNotFound, // Azure OpenAI 404
	"not_found_error":    ModelNotFound, // Anthropic 404

	"invalid_api_key":      Authentication, // OpenAI 401
	"authentication_error": Authentication, // Anthropic 401
	"api_key_invalid":      Authentication, // Gemini ErrorInfo, sent with 400 INVALID_ARGUMENT

	"permission_error":                     PermissionDenied, // Anthropic 403
	"unsupported_country_region_territory": PermissionDenied, // OpenAI 403
	"service_disabled":                     PermissionDenied, // Gemini ErrorInfo, 403
	"api_key_service_blocked":              PermissionDenied, // Gemini ErrorInfo, 403

	"rate_limit_exceeded": RateLimited, // OpenAI 429
	"rate_limit_error":    RateLimited, // Anthropic 429
	"overloaded_error":    Overloaded,  // Anthropic 529
	"timeout_error":       Timeout,     // Anthropic 504
	"request_too_large":   RequestTooLarge,
}

// genericNames are provider types that only say which side is at fault; the
// status, when there is one, says more.
var genericNames = map[string]Reason{
	"server_error":          ServerError,    // OpenAI 500/503, routers
	"api_error":             ServerError,    // Anthropic 500
	"internal_error":        ServerError,    // compatible servers
	"invalid_request_error": InvalidRequest, // OpenAI and Anthropic 4xx
	"badrequesterror":       InvalidRequest, // vLLM
	"requests":              RateLimited,    // OpenAI 429 type: request-rate limit
	"tokens":                RateLimited,    // OpenAI 429 type: token-rate limit
}

// grpcStatuses maps Gemini's error.status (google.rpc.Code names) to reasons.
// Source: Gemini API troubleshooting guide; google.rpc.Code documentation.
var grpcStatuses = map[string]Reason{
	"RESOURCE_EXHAUSTED":  RateLimited, // refined to QuotaExhausted by QuotaFailure
	"UNAVAILABLE":         Overloaded,
	"INTERNAL":            ServerError,
	"UNKNOWN":             ServerError,
	"DATA_LOSS":           ServerError,
	"ABORTED":             ServerError, // concurrency conflict: retry
	"DEADLINE_EXCEEDED":   Timeout,
	"CANCELLED":           ConnectionError,
	"INVALID_ARGUMENT":    InvalidRequest,
	"FAILED_PRECONDITION": InvalidRequest, // e.g. region not supported, billing not enabled
	"OUT_OF_RANGE":        InvalidRequest,
	"ALREADY_EXISTS":      InvalidRequest,
	"UNIMPLEMENTED":       InvalidRequest,
	"PERMISSION_DENIED":   PermissionDenied,
	"UNAUTHENTICATED":     Authentication,
	"NOT_FOUND":           ModelNotFound,
}

// decide returns the reason for an error body w received with status (the
// HTTP status, or the code embedded in the error object when the HTTP status
// was 2xx or there was none).
func decide(status int, w *wireError) Reason {
	return refine(baseReason(status, w), w)
}

func baseReason(status int, w *wireError) Reason {
	names := []string{w.InnerCode, w.Code, w.Type}
	names = append(names, w.InfoReasons...)
	for _, n := range names {
		if r, ok := providerNames[strings.ToLower(n)]; ok {
			return r
		}
	}
	if r, ok := grpcStatuses[strings.ToUpper(w.Status)]; ok {
		return r
	}
	if r, ok := statusReason(status); ok {
		return r
	}
	for _, n := range names {
		if r, ok := genericNames[strings.ToLower(n)]; ok {
			return r
		}
	}
	return Unknown
}

// statusReason maps an HTTP status to a reason. Sources: RFC 9110 §15;
// OpenAI and Anthropic error pages (529 is Anthropic's "overloaded"; both
// SDKs retry 408, 409 and 5xx). Cloudflare's 52x origin errors are 5xx and
// so ServerError.
func statusReason(status int) (Reason, bool) {
	switch status {
	case 400, 422:
		return InvalidRequest, true
	case 401:
		return Authentication, true
	case 402:
		return QuotaExhausted, true
	case 403:
		return PermissionDenied, true
	case 404:
		return ModelNotFound, true
	case 408:
		return Timeout, true
	case 409:
		return ServerError, true // lock contention on the provider's side
	case 413:
		return RequestTooLarge, true
	case 429:
		return RateLimited, true
	case 503, 529:
		return Overloaded, true
	}
	switch {
	case status >= 400 && status < 500:
		return InvalidRequest, true
	case status >= 500 && status < 600:
		return ServerError, true
	}
	return "", false
}

// refine reads the meanings a provider puts only in details or message text:
//
//   - a rate limit whose Gemini QuotaFailure names a daily or free-tier quota
//     (or a quota of 0) is QuotaExhausted: it will not come back within a
//     retry policy's wait;
//   - a rate limit for a request that by itself exceeds the per-minute limit
//     (OpenAI: "Request too large for gpt-4o ... on tokens per min (TPM):
//     Limit 30000, Requested 36000") is RequestTooLarge: no wait can help;
//   - an invalid request whose message says the prompt exceeds the model's
//     context window is ContextLengthExceeded. Anthropic and Gemini have no
//     code for it; their documented wordings are matched ("prompt is too
//     long", "input token count ... exceeds the maximum number of tokens");
//   - an invalid request whose message says the account is out of credit or
//     over its spend limit is QuotaExhausted: Anthropic sends these as 400
//     invalid_request_error ("Your credit balance is too low", "You have
//     reached your specified API usage limits"), and another deployment may
//     still serve.
//
// Message text is read only in these cases, where the provider gives no
// code; everything else is decided by structure.
func refine(r Reason, w *wireError) Reason {
	switch r {
	case RateLimited:
		if w.QuotaLong {
			return QuotaExhausted
		}
		if requestExceedsLimit(w.Message) {
			return RequestTooLarge
		}
	case InvalidRequest:
		if containsAny(w.Message, contextPhrases) {
			return ContextLengthExceeded
		}
		if containsAny(w.Message, quotaPhrases) {
			return QuotaExhausted
		}
	}
	return r
}

// requestExceedsLimit reports whether a rate-limit message says the request
// alone is over the limit: it starts "Request too large", or it gives
// "Limit N" and "Requested M" with M > N.
func requestExceedsLimit(msg string) bool {
	lower := strings.ToLower(msg)
	if strings.HasPrefix(lower, "request too large") {
		return true
	}
	limit, haveLimit := numberAfter(lower, "limit")
	requested, haveRequested := numberAfter(lower, "requested")
	return haveLimit && haveRequested && requested > limit
}

// numberAfter returns the number that follows the word key (as in
// "limit 30000," "limit: 30,000" or "requested 36000."), looking at each
// occurrence of key.
func numberAfter(s, key string) (float64, bool) {
	words := strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '(' || r == ')' || r == '\n' || r == '\t'
	})
	for i := 0; i+1 < len(words); i++ {
		if strings.TrimRight(words[i], ":,") != key {
			continue
		}
		num := strings.ReplaceAll(strings.TrimRight(words[i+1], ",.;:"), ",", "")
		if v, err := strconv.ParseFloat(num, 64); err == nil && v >= 0 {
			return v, true
		}
	}
	return 0, false
}

// contextPhrases are the providers' wordings for a prompt over the context
// window (OpenAI "maximum context length", Anthropic "prompt is too long" and
// "exceed context limit", Gemini "exceeds the maximum number of tokens",
// vLLM and Mistral "maximum context length").
var contextPhrases = []string{
	"context length", "context_length", "context window", "context limit",
	"prompt is too long", "maximum number of tokens",
}

// quotaPhrases are Anthropic's wordings for an account out of credit or over
// its spend limit, sent as 400 invalid_request_error.
var quotaPhrases = []string{"credit balance", "spend limit", "usage limit"}

func containsAny(msg string, phrases []string) bool {
	lower := strings.ToLower(msg)
	for _, p := range phrases {
		if strings.Contains(lower, p) {
			return true
		}
	}
	return false
}
