package failure

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/belay-run/belay/internal/readall"
)

// Dialect names a provider's wire format. It decides the stream terminator
// and the usage fields; error bodies are read in all three shapes whatever
// the dialect, because OpenAI-compatible routers front every provider.
type Dialect string

// The dialects belay speaks.
const (
	DialectOpenAI    Dialect = "openai"
	DialectAnthropic Dialect = "anthropic"
	DialectGemini    Dialect = "gemini"
)

// MaxHeadBytes is how much of a response body ClassifyHTTP reads: 1 MiB.
// Error bodies are small; a larger body is classified from its head.
const MaxHeadBytes = 1 << 20

// ClassifyResponse is ClassifyResponseAt at time.Now().
func ClassifyResponse(d Dialect, status int, h http.Header, body []byte) *Error {
	return ClassifyResponseAt(time.Now(), d, status, h, body)
}

// ClassifyResponseAt classifies a received HTTP response: status, headers
// (lower-case or canonical names) and body (or its head). It returns nil when
// the response is not a failure: a 2xx whose body carries no error object.
//
// Otherwise the *Error has a Kind and Reason decided by meaning first (the
// provider's error type and code, Gemini's status and details), then by
// status; see rules.go for the table and its sources. It also carries:
//
//   - Status, ProviderType (OpenAI/Anthropic error.type, Gemini
//     error.status), ProviderCode (error.code as text), Message (the
//     provider's message, an HTML page's title, or the start of a text body);
//   - RequestID from x-request-id or request-id, else the body's request_id;
//   - RetryAfter from retry-after-ms, retry-after (an HTTP-date relative to
//     now), Gemini RetryInfo.retryDelay, and for a rate limit only, the
//     rate-limit reset headers (see ParseRetryAfter, ParseRateLimitReset);
//   - NoRetry when x-should-retry is "false". Such a failure is never retried
//     on the same deployment, so a Transient kind becomes Degraded (fall
//     back) while the Reason is kept. "true" changes nothing: a request the
//     provider calls wrong stays wrong.
//
// Special bodies: an error object inside a 2xx is classified by its embedded
// code (a router's {"error": {"code": 502}} is ServerError); a Gemini 2xx
// whose promptFeedback has a blockReason is ContentFiltered; an HTML page in
// a 2xx is a proxy's, not the API's, and is ServerError; a 2xx
// text/event-stream body is classified as a stream (see ClassifyStream).
// 1xx and 3xx responses are Unknown; a 3xx's message names where it
// pointed (Location), since belay does not follow a provider's redirect.
func ClassifyResponseAt(now time.Time, d Dialect, status int, h http.Header, body []byte) *Error {
	success := status >= 200 && status < 300
	if success && IsEventStream(h) {
		return classifyStreamResponse(now, d, status, h, body)
	}
	var w wireError
	if !success || mayHoldError(body) {
		w = parseWireError(body)
	}
	htmlPage := !w.found && isHTML(h, body)
	var e *Error
	switch {
	case w.found:
		e = wireFailure(d, status, &w)
	case w.BlockReason != "":
		e = New(ContentFiltered, "prompt blocked: "+w.BlockReason)
		e.ProviderType = w.BlockReason
	case success && !htmlPage:
		return nil
	case success:
		e = New(ServerError, plainMessage(body, true))
	case status >= 300 && status < 400:
		e = New(Unknown, redirectMessage(status, headerValue(h, "location")))
	default:
		r, ok := statusReason(status)
		if !ok {
			r = Unknown
		}
		e = New(r, plainMessage(body, htmlPage))
	}
	e.Status = status
	applyHeaders(e, h, now)
	return e
}

// redirectMessage says what a 3xx answer was: a caller of an API gets
// its answer or an error, and a redirect is usually a base URL that is
// not the API's (http:// for https://, a missing path).
func redirectMessage(status int, location string) string {
	if location == "" {
		return fmt.Sprintf("redirect (%d) without a Location; check the deployment's base_url", status)
	}
	return fmt.Sprintf("redirect (%d) to %s, not followed; check the deployment's base_url", status, plainMessage([]byte(location), false))
}

// mayHoldError reports whether a 2xx body can carry an error object or a
// block reason: only when the quoted key "error" or "promptFeedback" occurs
// in it (inside a JSON string such a word would be escaped, \"error\").
// A body without either is a success without decoding it.
func mayHoldError(body []byte) bool {
	return bytes.Contains(body, []byte(`"error"`)) || bytes.Contains(body, []byte(`"promptFeedback"`))
}

// classifyStreamResponse classifies a 2xx response whose body is a stream,
// adding what the headers say to a failure.
func classifyStreamResponse(now time.Time, d Dialect, status int, h http.Header, body []byte) *Error {
	e, _ := ClassifyStream(d, body)
	if e != nil {
		e.Status = status
		applyHeaders(e, h, now)
	}
	return e
}

// wireFailure builds the *Error for an error object received with status
// (0 in a stream).
func wireFailure(d Dialect, status int, w *wireError) *Error {
	effective := status
	if (status < 400 || status > 599) && w.CodeNum >= 400 && w.CodeNum <= 599 {
		effective = w.CodeNum
	}
	r := decide(effective, w)
	e := &Error{
		Kind:          r.Kind(),
		Reason:        r,
		ProviderType:  w.Type,
		ProviderCode:  w.Code,
		Message:       w.Message,
		Param:         w.Param,
		ProviderError: w.Object,
		RequestID:     w.RequestID,
	}
	if w.Status != "" && (d == DialectGemini || e.ProviderType == "") {
		e.ProviderType = w.Status
	}
	if w.HasRetryDelay {
		e.RetryAfter, e.HasRetryAfter = w.RetryDelay, true
	}
	return e
}

// applyHeaders adds what the headers say: request id, retry delay and
// x-should-retry.
func applyHeaders(e *Error, h http.Header, now time.Time) {
	for _, name := range []string{"x-request-id", "request-id"} {
		if v := strings.TrimSpace(headerValue(h, name)); v != "" {
			e.RequestID = v
			break
		}
	}
	if d, ok := ParseRetryAfter(h, now); ok {
		e.RetryAfter, e.HasRetryAfter = d, true
	} else if !e.HasRetryAfter && e.Reason == RateLimited {
		if d, ok := ParseRateLimitReset(h, now); ok {
			e.RetryAfter, e.HasRetryAfter = d, true
		}
	}
	if strings.EqualFold(strings.TrimSpace(headerValue(h, "x-should-retry")), "false") {
		e.NoRetry = true
		if e.Kind == Transient {
			e.Kind = Degraded
		}
	}
}

// IsEventStream reports whether h's Content-Type is an event stream
// (text/event-stream, in any case, with or without parameters).
func IsEventStream(h http.Header) bool {
	ct := strings.ToLower(strings.TrimSpace(headerValue(h, "content-type")))
	return strings.HasPrefix(ct, "text/event-stream")
}

var errNilResponse = errors.New("failure: nil *http.Response")

// ClassifyHTTP is ClassifyHTTPAt at time.Now().
func ClassifyHTTP(d Dialect, resp *http.Response) (*Error, []byte, error) {
	return ClassifyHTTPAt(time.Now(), d, resp)
}

// ClassifyHTTPAt reads at most MaxHeadBytes of resp.Body, classifies the
// response with ClassifyResponseAt, and returns the failure (nil when the
// response is OK), the bytes read, and the error from reading.
//
// It neither closes resp.Body nor reads past the head: a caller that needs
// the whole body reads io.MultiReader(bytes.NewReader(head), resp.Body) and
// closes resp.Body. A 2xx text/event-stream response is left unread (nil,
// nil, nil): watch it event by event with a StreamWatcher instead.
//
// When reading fails, a non-2xx response is still classified from its status
// and whatever was read; a 2xx response is the read error's classification
// (see ClassifyError) with Status set. A nil resp is an error.
func ClassifyHTTPAt(now time.Time, d Dialect, resp *http.Response) (*Error, []byte, error) {
	if resp == nil {
		return nil, nil, errNilResponse
	}
	success := resp.StatusCode >= 200 && resp.StatusCode < 300
	if success && IsEventStream(resp.Header) {
		return nil, nil, nil
	}
	var head []byte
	var err error
	if resp.Body != nil {
		head, err = readall.Sized(io.LimitReader(resp.Body, MaxHeadBytes), min(resp.ContentLength, MaxHeadBytes))
	}
	if err != nil && success {
		c := *ClassifyError(err)
		c.Status = resp.StatusCode
		return &c, head, err
	}
	return ClassifyResponseAt(now, d, resp.StatusCode, resp.Header, head), head, err
}
