package failure

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestClassifyResponseKinds covers each kind of failure in more shapes than
// the wire cases: the rules must hold for the whole kind, not one file.
func TestClassifyResponseKinds(t *testing.T) {
	tests := []struct {
		name    string
		d       Dialect
		status  int
		h       http.Header
		body    string
		kind    Kind
		reason  Reason
		retryMS int64 // -1: no retry-after expected
	}{
		// Quota vs rate limit by meaning.
		{"openai 429 quota by type only", DialectOpenAI, 429, nil,
			`{"error":{"message":"x","type":"insufficient_quota","code":null}}`, Degraded, QuotaExhausted, -1},
		{"anthropic 402 billing", DialectAnthropic, 402, nil,
			`{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low"}}`, Degraded, QuotaExhausted, -1},
		{"openai 429 TPM request too large", DialectOpenAI, 429, nil,
			`{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 36000. The input or output tokens must be reduced in order to run successfully.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			Permanent, RequestTooLarge, -1},
		{"429 requested over limit without the prefix", DialectOpenAI, 429, nil,
			`{"error":{"message":"Limit: 1000, Requested: 5000","code":"rate_limit_exceeded"}}`, Permanent, RequestTooLarge, -1},
		{"429 thousands separators", DialectOpenAI, 429, nil,
			`{"error":{"message":"Limit 1,000,000, Used 999,000, Requested 9,000.","code":"rate_limit_exceeded"}}`, Transient, RateLimited, -1},
		{"anthropic 400 credit balance", DialectAnthropic, 400, nil,
			`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`, Degraded, QuotaExhausted, -1},
		{"429 requested under limit stays rate limited", DialectOpenAI, 429, hdr("x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s", "x-ratelimit-reset-requests", "20ms"),
			`{"error":{"message":"Limit 200000, Used 199800, Requested 900.","type":"tokens","code":"rate_limit_exceeded"}}`, Transient, RateLimited, 360000},
		{"gemini daily free-tier quota", DialectGemini, 429, nil,
			`{"error":{"code":429,"message":"You exceeded your current quota","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"50"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`,
			Degraded, QuotaExhausted, 1500},
		{"gemini zero quota", DialectGemini, 429, nil,
			`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"InputTokensPerMinute","quotaValue":"0"}]}]}}`,
			Degraded, QuotaExhausted, -1},
		{"anthropic 429 reset header only", DialectAnthropic, 429, hdr("anthropic-ratelimit-tokens-remaining", "0", "anthropic-ratelimit-tokens-reset", "2026-11-29T10:00:05Z"),
			`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, Transient, RateLimited, 5000},

		// Status families.
		{"503 plain text", DialectOpenAI, 503, nil, "upstream connect error or disconnect/reset before headers", Transient, Overloaded, -1},
		{"504 html page", DialectOpenAI, 504, hdr("content-type", "text/html"), "<html><head><title>504 Gateway Time-out</title></head></html>", Transient, ServerError, -1},
		{"520 cloudflare", DialectAnthropic, 520, nil, "", Transient, ServerError, -1},
		{"408", DialectOpenAI, 408, nil, "", Transient, Timeout, -1},
		{"401 empty body", DialectGemini, 401, nil, "", Degraded, Authentication, -1},
		{"403 anthropic", DialectAnthropic, 403, nil,
			`{"type":"error","error":{"type":"permission_error","message":"no"}}`, Degraded, PermissionDenied, -1},
		{"404 anthropic model", DialectAnthropic, 404, nil,
			`{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}`, Degraded, ModelNotFound, -1},
		{"413 html from cdn", DialectAnthropic, 413, hdr("content-type", "text/html"), "<html><title>413 Request Entity Too Large</title></html>", Permanent, RequestTooLarge, -1},
		{"422 other 4xx", DialectOpenAI, 422, nil, `{"detail":"bad"}`, Permanent, InvalidRequest, -1},
		{"302 redirect", DialectOpenAI, 302, nil, "", Permanent, Unknown, -1},

		// Context length by code or message, in each dialect.
		{"openai context by message only", DialectOpenAI, 400, nil,
			`{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":null}}`, Permanent, ContextLengthExceeded, -1},
		{"anthropic prompt too long", DialectAnthropic, 400, nil,
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, Permanent, ContextLengthExceeded, -1},
		{"gemini input token count", DialectGemini, 400, nil,
			`{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`, Permanent, ContextLengthExceeded, -1},

		// Content filter.
		{"azure content filter", DialectOpenAI, 400, nil,
			`{"error":{"message":"filtered","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`, Permanent, ContentFiltered, -1},
		{"gemini blocked prompt in 200", DialectGemini, 200, nil,
			`{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":8}}`, Permanent, ContentFiltered, -1},

		// Gemini statuses.
		{"gemini unavailable", DialectGemini, 503, nil, `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, Transient, Overloaded, -1},
		{"gemini internal", DialectGemini, 500, nil, `{"error":{"code":500,"status":"INTERNAL"}}`, Transient, ServerError, -1},
		{"gemini deadline", DialectGemini, 504, nil, `{"error":{"code":504,"status":"DEADLINE_EXCEEDED"}}`, Transient, Timeout, -1},
		{"gemini failed precondition", DialectGemini, 400, nil, `{"error":{"code":400,"message":"User location is not supported","status":"FAILED_PRECONDITION"}}`, Permanent, InvalidRequest, -1},
		{"gemini bad key under INVALID_ARGUMENT", DialectGemini, 400, nil,
			`{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, Degraded, Authentication, -1},
		{"gemini array-wrapped error", DialectGemini, 404, nil, `[{"error":{"code":404,"status":"NOT_FOUND","message":"models/x is not found"}}]`, Degraded, ModelNotFound, -1},
		{"gemini permission", DialectGemini, 403, nil, `{"error":{"code":403,"status":"PERMISSION_DENIED"}}`, Degraded, PermissionDenied, -1},
		{"gemini unauthenticated", DialectGemini, 401, nil, `{"error":{"code":401,"status":"UNAUTHENTICATED"}}`, Degraded, Authentication, -1},

		// Errors inside HTTP 200, classified by the embedded code.
		{"router 200 with 429", DialectOpenAI, 200, nil, `{"error":{"message":"Rate limit exceeded","code":429}}`, Transient, RateLimited, -1},
		{"router 200 with 401 string code", DialectOpenAI, 200, nil, `{"error":{"message":"No auth","code":"401"}}`, Degraded, Authentication, -1},
		{"router 200 with named code", DialectOpenAI, 200, nil, `{"error":{"message":"x","code":"server_error"}}`, Transient, ServerError, -1},
		{"anthropic error envelope in 200", DialectAnthropic, 200, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, Transient, Overloaded, -1},
		{"vllm object error", DialectOpenAI, 200, nil, `{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}`, Permanent, InvalidRequest, -1},
		{"html in a 200", DialectOpenAI, 200, hdr("content-type", "text/html"), "<html><title>Sign in</title></html>", Transient, ServerError, -1},
		{"200 string error", DialectOpenAI, 200, nil, `{"error":"model 'x' not found"}`, Permanent, Unknown, -1},

		// Server hints.
		{"x-should-retry false on a 500", DialectAnthropic, 500, hdr("x-should-retry", "false"),
			`{"type":"error","error":{"type":"api_error","message":"boom"}}`, Degraded, ServerError, -1},
		{"x-should-retry true leaves a 400 permanent", DialectOpenAI, 400, hdr("x-should-retry", "true"), `{"error":{"type":"invalid_request_error","message":"bad"}}`, Permanent, InvalidRequest, -1},
		{"garbage retry-after-ms falls back to retry-after", DialectOpenAI, 429, hdr("retry-after-ms", "soon", "retry-after", "3"), "", Transient, RateLimited, 3000},
		{"header beats RetryInfo", DialectGemini, 429, hdr("retry-after", "4"),
			`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"19s"}]}}`, Transient, RateLimited, 4000},
		{"reset headers ignored for a 500", DialectOpenAI, 500, hdr("x-ratelimit-reset-requests", "1s"), `{"error":{"type":"server_error"}}`, Transient, ServerError, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ClassifyResponseAt(testNow, tt.d, tt.status, tt.h, []byte(tt.body))
			if e == nil {
				t.Fatalf("nil, want %s/%s", tt.kind, tt.reason)
			}
			if e.Kind != tt.kind || e.Reason != tt.reason {
				t.Errorf("got %s/%s, want %s/%s (%v)", e.Kind, e.Reason, tt.kind, tt.reason, e)
			}
			if e.Status != tt.status {
				t.Errorf("Status = %d, want %d", e.Status, tt.status)
			}
			switch {
			case tt.retryMS < 0 && e.HasRetryAfter:
				t.Errorf("unexpected retry-after %v", e.RetryAfter)
			case tt.retryMS >= 0 && (!e.HasRetryAfter || e.RetryAfter != time.Duration(tt.retryMS)*time.Millisecond):
				t.Errorf("retry-after = %v (has %v), want %dms", e.RetryAfter, e.HasRetryAfter, tt.retryMS)
			}
		})
	}
}

func TestClassifyResponseOK(t *testing.T) {
	for name, body := range map[string]string{
		"empty":            "",
		"chat completion":  `{"id":"c","choices":[{"message":{"content":"hi"}}],"error":null}`,
		"anthropic":        `{"type":"message","content":[{"type":"text","text":"hi"}]}`,
		"plain text":       "hello",
		"empty error obj":  `{"error":{}}`,
		"gemini candidate": `{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}]}`,
	} {
		if e := ClassifyResponseAt(testNow, DialectOpenAI, 200, nil, []byte(body)); e != nil {
			t.Errorf("%s: got %v, want nil", name, e)
		}
	}
}

func TestClassifyResponseFields(t *testing.T) {
	e := ClassifyResponseAt(testNow, DialectOpenAI, 429, hdr("x-request-id", "req_q1"),
		[]byte(`{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	want := Error{Kind: Degraded, Reason: QuotaExhausted, Status: 429, ProviderType: "insufficient_quota",
		ProviderCode: "insufficient_quota", Message: "You exceeded your current quota.", RequestID: "req_q1",
		ProviderError: `{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}`}
	if *e != want {
		t.Errorf("got %+v\nwant %+v", *e, want)
	}

	g := ClassifyResponseAt(testNow, DialectGemini, 429, nil,
		[]byte(`{"error":{"code":429,"message":"m","status":"RESOURCE_EXHAUSTED"}}`))
	if g.ProviderType != "RESOURCE_EXHAUSTED" || g.ProviderCode != "429" {
		t.Errorf("gemini provider fields = %q/%q", g.ProviderType, g.ProviderCode)
	}

	a := ClassifyResponseAt(testNow, DialectAnthropic, 500, nil,
		[]byte(`{"type":"error","error":{"type":"api_error","message":"m"},"request_id":"req_body"}`))
	if a.RequestID != "req_body" || a.ProviderType != "api_error" {
		t.Errorf("anthropic fields = %+v", a)
	}

	p := ClassifyResponseAt(testNow, DialectOpenAI, 502, hdr("content-type", "text/html"),
		[]byte("<!DOCTYPE html><html><head><title>api.example.com | 502: Bad gateway</title></head><body>...</body></html>"))
	if p.Message != "api.example.com | 502: Bad gateway" {
		t.Errorf("html message = %q", p.Message)
	}
}

// Regression: official SDKs retry a 429 insufficient_quota; belay must not
// treat it as transient.
func TestRegression429InsufficientQuotaIsNotTransient(t *testing.T) {
	e := ClassifyResponseAt(testNow, DialectOpenAI, 429, hdr("retry-after", "1"),
		[]byte(`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`))
	if errors.Is(e, Transient) {
		t.Fatalf("insufficient_quota classified transient: %v", e)
	}
	if !errors.Is(e, QuotaExhausted) || !errors.Is(e, Degraded) {
		t.Fatalf("got %v, want degraded quota_exhausted", e)
	}
}

// Regression: x-should-retry: false must keep a failure off the same
// deployment, whatever its reason.
func TestRegressionShouldRetryFalseObeyed(t *testing.T) {
	for _, status := range []int{429, 500, 503, 529} {
		e := ClassifyResponseAt(testNow, DialectAnthropic, status, hdr("x-should-retry", "False"), nil)
		if !e.NoRetry || e.Kind == Transient {
			t.Errorf("%d: got kind %s NoRetry %v, want not transient and NoRetry", status, e.Kind, e.NoRetry)
		}
		if e.Kind != Degraded {
			t.Errorf("%d: kind %s, want degraded", status, e.Kind)
		}
	}
	e := ClassifyResponseAt(testNow, DialectOpenAI, 400, hdr("x-should-retry", "false"), nil)
	if e.Kind != Permanent || !e.NoRetry {
		t.Errorf("400: got %s NoRetry %v, want permanent with NoRetry", e.Kind, e.NoRetry)
	}
}

// A 3xx names where it pointed: belay does not follow a provider's
// redirect, and the usual cause is a base URL that is not the API's.
func TestRedirectMessageNamesLocation(t *testing.T) {
	for _, c := range []struct {
		status int
		h      http.Header
		want   string
	}{
		{301, hdr("location", "https://api.example.com/v1/chat/completions"),
			"redirect (301) to https://api.example.com/v1/chat/completions, not followed; check the deployment's base_url"},
		{308, hdr("Location", "/v2/chat"), "redirect (308) to /v2/chat, not followed; check the deployment's base_url"},
		{307, nil, "redirect (307) without a Location; check the deployment's base_url"},
	} {
		e := ClassifyResponse(DialectOpenAI, c.status, c.h, nil)
		if e == nil || e.Reason != Unknown || e.Kind != Permanent || e.Status != c.status || e.Message != c.want {
			t.Errorf("%d: got %+v, want Unknown/Permanent with message %q", c.status, e, c.want)
		}
	}
}
