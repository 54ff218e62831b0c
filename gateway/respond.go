package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/ids"
	"github.com/belay-run/belay/route"
)

// refuse writes a failure belay decided before routing (bad key, malformed
// body, unknown model, a run limit) in the client's dialect, with
// x-should-retry: false, and returns the status written. A call the
// shutdown canceled, wherever it was, is answered by shuttingDown instead.
func (c *call) refuse(fe *failure.Error) (int, error) {
	if errors.Is(fe, errShutdown) { // canceled by the shutdown: the client still waits, and may retry
		return c.shuttingDown(fe)
	}
	c.w.Header().Set(HeaderShouldRetry, "false")
	c.setRequestID()
	writeFailure(c.w, c.f, fe)
	c.refused = fe.Reason
	return statusOf(c.f, fe), fe
}

// writeFailure writes fe in f's dialect, with its failure headers
// (failure.SetHeader).
func writeFailure(w http.ResponseWriter, f front, fe *failure.Error) {
	failure.SetHeader(w.Header(), fe)
	f.writeFailure(w, fe)
}

// setRequestID gives an answer that carries no provider's request id one
// of belay's ("req_belay_" and a UUIDv7), under its dialect's header name
// (X-Request-Id; Anthropic's Request-Id, which its error body repeats):
// the SDKs expose it (err.requestID) as they do a provider's, and belay's
// log lines of a refused call can be found by it (an adversarial review
// found belay's own refusals without one).
func (c *call) setRequestID() { setRequestID(c.w.Header(), c.f.dialect()) }

func setRequestID(h http.Header, d failure.Dialect) {
	name := "X-Request-Id"
	if d == failure.DialectAnthropic {
		name = "Request-Id"
	}
	if h.Get(name) == "" {
		h.Set(name, "req_belay_"+ids.New())
	}
}

// refuseUpstream writes the failure belay gave up on after routing. It
// also carries x-should-retry: false: belay already retried and fell back
// as far as the policy allows, and a client retry on top would multiply
// the load on a failing provider. A refusal by every breaker of the chain
// before any attempt (a breaker opened after serve's check) also says when
// one lets a call through (see allOpenFailure); the call was counted in
// its run, so x-should-retry: false stays.
//
// A call that the router stopped on a deployment a kill flag disabled
// (refused: the router passed over some deployment), when a flag now
// disables every deployment of its model, is answered as killed, naming
// the flags and its last failure: the kill, set while the call ran, is
// why no fallback was tried.
func (c *call) refuseUpstream(fe *failure.Error, refused bool) (int, error) {
	if fe.Reason == failure.CircuitOpen || refused {
		if flags, killed, _ := c.s.unservable(c.alias, c.chain); killed {
			kf := c.killedFailure(flags)
			switch {
			case c.attempts == 0:
			case fe.Reason == failure.CircuitOpen: // the kill refused the next attempt
				kf.Message += fmt.Sprintf(" (set while the call was being retried; attempts made: %d)", c.attempts)
			default:
				kf.Message += fmt.Sprintf(" (set while the call ran; attempts made: %d, the last failed with %s: %s)", c.attempts, fe.Reason, message(fe))
			}
			return c.refuse(kf)
		}
	}
	switch {
	case upstreamRejectedCredentials(fe):
		// The provider refused belay's credentials for the deployment,
		// not the client's key to belay: the message says so, so that
		// the client's operator does not go looking at their own key.
		what, fix := "rejected the gateway's credentials for it", "api_key"
		if fe.Reason == failure.PermissionDenied {
			what, fix = "denied the gateway's credentials for it access", "api_key or its account's access"
		}
		cp := *fe
		cp.Message = fmt.Sprintf("upstream deployment %s %s (HTTP %d from the provider: %s); "+
			"your key to belay was accepted: the gateway's config must fix that deployment's %s", fe.Deployment, what, fe.Status, message(fe), fix)
		fe = &cp
	case fe.Reason == failure.CircuitOpen && c.attempts == 0:
		if wait, ok := c.s.reopenIn(c.chain, time.Now()); ok {
			fe = c.allOpenFailure(wait)
		}
	}
	if fe.Deployment != "" && fe.RequestID != "" {
		// The provider's id of the failed request, under its dialect's
		// name (Anthropic's error body repeats it), for its support.
		name := "X-Request-Id"
		if c.f.dialect() == failure.DialectAnthropic {
			name = "Request-Id"
		}
		c.w.Header().Set(name, fe.RequestID)
	}
	if relayable(fe) {
		return c.relayProviderError(fe)
	}
	return c.refuse(fe)
}

// relayable reports whether the upstream failure fe is answered as the
// provider gave it (see relayProviderError): a 4xx refusal of the request
// itself, whose error object the provider sent in its dialect's shape.
// Not a rate limit (429) or a refusal of the gateway's credentials (401,
// 403), which belay words for the client, nor a 5xx or a failure without
// a response, which are belay's giving up.
func relayable(fe *failure.Error) bool {
	return fe.Deployment != "" && fe.ProviderError != "" && fe.Status >= 400 && fe.Status < 500 &&
		fe.Status != http.StatusTooManyRequests && !rejectsCredentials(fe.Reason)
}

// relayProviderError answers with the provider's status and error object
// as received, in its dialect's body (OpenAI {"error": …}; Anthropic
// {"type":"error","error": …,"request_id"}), and x-should-retry: false: a
// client's SDK then sees what the provider said, its status class (409
// ConflictError, 422 UnprocessableEntityError), code and members belay
// does not read (Anthropic's details.error_code, which the SDK's thread
// recovery reads). An adversarial review with the official SDKs found 409
// answered as 500, 422 as 400, OpenAI's code nulled and details dropped.
// Fallback goes across deployments of the caller's dialect, so the object
// is in the client's.
func (c *call) relayProviderError(fe *failure.Error) (int, error) {
	c.setRequestID() // the provider's, set by refuseUpstream, or belay's when it sent none
	var body []byte
	if c.f.dialect() == failure.DialectAnthropic {
		id, _ := json.Marshal(c.w.Header().Get("Request-Id"))
		body = fmt.Appendf(nil, `{"type":"error","error":%s,"request_id":%s}`, fe.ProviderError, id)
	} else {
		body = fmt.Appendf(nil, `{"error":%s}`, fe.ProviderError)
	}
	h := c.w.Header()
	h.Set(HeaderShouldRetry, "false")
	h.Set("Content-Type", "application/json")
	failure.SetHeader(h, fe)
	c.w.WriteHeader(fe.Status)
	_, _ = c.w.Write(body)
	return fe.Status, fe
}

// refuseAllOpen answers a call whose every deployment's breaker refuses
// calls now (open, or half-open with its probes in flight), before the
// call is counted in a run: nothing was sent upstream and no turn was
// used. The answer (503 circuit_open in OpenAI's dialect, 529
// overloaded_error in Anthropic's) carries Retry-After (and OpenAI's
// retry-after-ms) for when the first breaker lets a call through, says it
// in the message, and has no x-should-retry: false, so the client's SDK
// retries per its own policy (the OpenAI and Anthropic SDKs wait a
// Retry-After of up to 60 s); a retry refused again costs no upstream
// attempt and no turn.
func (c *call) refuseAllOpen(wait time.Duration) (int, error) {
	fe := c.allOpenFailure(wait)
	c.setRequestID()
	writeFailure(c.w, c.f, fe)
	return statusOf(c.f, fe), fe
}

// allOpenFailure is the CircuitOpen failure of a call whose chain's
// breakers all refuse it, naming the deployments, with wait (how long
// until the first lets a call through) as its Retry-After and, in whole
// seconds rounded up, in its message. Deployments a kill flag disables
// are named apart, with their flags: their breakers may be closed (a
// newcomer finding: a killed deployment was named among the open
// breakers, while GET /admin/breakers said it was closed).
func (c *call) allOpenFailure(wait time.Duration) *failure.Error {
	open := make([]string, 0, len(c.chain))
	var killed []string
	for _, d := range c.chain {
		if c.s.disabled != nil {
			if k, off := c.s.disabled(d); off {
				killed = append(killed, fmt.Sprintf("%s (%s)", d.Name, killFlag(k)))
				continue
			}
		}
		open = append(open, d.Name)
	}
	after := (wait + time.Second - 1).Truncate(time.Second)
	var msg string
	switch {
	case len(killed) == 0:
		msg = fmt.Sprintf("every deployment of model %q has its circuit breaker open (%s); a call may get through again in %s (Retry-After)",
			c.alias, strings.Join(open, ", "), after)
	case len(open) == 0: // every one killed since the breakers were read
		msg = fmt.Sprintf("no deployment of model %q can take a call now: %s %s killed; a call may get through again in %s (Retry-After)",
			c.alias, strings.Join(killed, ", "), pluralIs(len(killed)), after)
	default:
		breakers := "the circuit breaker of " + open[0] + " is"
		if len(open) > 1 {
			breakers = "the circuit breakers of " + strings.Join(open, ", ") + " are"
		}
		msg = fmt.Sprintf("no deployment of model %q can take a call now: %s open, and %s %s killed; "+
			"a call may get through again in %s (Retry-After)",
			c.alias, breakers, strings.Join(killed, ", "), pluralIs(len(killed)), after)
	}
	return &failure.Error{Kind: failure.Degraded, Reason: failure.CircuitOpen, Cause: breaker.ErrOpen,
		RetryAfter: wait, HasRetryAfter: true, Message: msg}
}

// pluralIs is "is" for one, "are" for more.
func pluralIs(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// reopenIn returns how long after now the first breaker of chain lets a
// call through again: the earliest end of an open breaker's open period,
// or minProbeWait for a half-open breaker whose probes are in flight (or
// a breaker closed since the refusal). Deployments disabled by a kill
// flag do not reopen with time and are passed over; false when every
// deployment is.
func (s *Server) reopenIn(chain []route.Deployment, now time.Time) (time.Duration, bool) {
	var wait time.Duration
	found := false
	for _, d := range chain {
		if s.disabled != nil {
			if _, off := s.disabled(d); off {
				continue
			}
		}
		b := s.router.Breaker(d.Name)
		if b == nil {
			continue
		}
		w := minProbeWait
		if st := b.Stats(); st.State == breaker.Open && st.OpenUntil.After(now) {
			w = st.OpenUntil.Sub(now)
		}
		if !found || w < wait {
			wait, found = w, true
		}
	}
	return wait, found
}

// minProbeWait is the Retry-After of a refusal while a breaker's half-open
// probes are in flight: their outcome decides within the attempt's
// timeouts, and a client that comes back sooner is refused again.
const minProbeWait = time.Second

func statusOf(f front, fe *failure.Error) int {
	if f.dialect() == failure.DialectAnthropic {
		return anthropic.ErrorFor(fe.Reason).Status
	}
	return openai.ErrorFor(fe.Reason).Status
}

// setRouteHeaders sets x-belay-attempts, x-belay-deployment and
// x-belay-degraded from the router's result.
func (c *call) setRouteHeaders(res *route.Result) {
	h := c.w.Header()
	atts := res.Attempts()
	h.Set(HeaderAttempts, strconv.Itoa(len(atts)))
	dep := ""
	if res.Deployment != nil {
		dep = res.Deployment.Name
	} else if len(atts) > 0 {
		dep = atts[len(atts)-1].Deployment
	}
	if dep != "" {
		h.Set(HeaderDeployment, dep)
	}
	h.Set(HeaderDegraded, strconv.FormatBool(res.Degraded))
}

// progressHeaders sets the x-belay-* headers of a stream at commit, from
// the attempts made so far.
func (c *call) progressHeaders(dep string) {
	h := c.w.Header()
	h.Set(HeaderAttempts, strconv.Itoa(c.attempts))
	h.Set(HeaderDeployment, dep)
	h.Set(HeaderDegraded, strconv.FormatBool(dep != c.firstDep))
}

// upstreamHeaders are the response headers copied from the provider.
var upstreamHeaders = []string{"Content-Type", "X-Request-Id", "Request-Id", "Openai-Processing-Ms", "Openai-Version"}

// rateLimitPrefixes begin the canonical names of the providers' rate-limit
// headers: OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// (https://platform.openai.com/docs/guides/rate-limits) and Anthropic's
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
// remaining,reset} (https://docs.anthropic.com/en/api/rate-limits).
var rateLimitPrefixes = []string{"X-Ratelimit-", "Anthropic-Ratelimit-"}

// copyUpstream copies into dst the headers of an answer that reach the
// client: upstreamHeaders, and the rate-limit headers of the deployment
// that answered (x-belay-deployment names it; a fallback's answer carries
// its own account's limits).
func copyUpstream(dst, src http.Header) {
	for _, k := range upstreamHeaders {
		if v := src.Values(k); len(v) > 0 {
			dst[k] = v
		}
	}
	copyRateLimits(dst, src)
}

// copyRateLimits copies into dst the rate-limit headers of src.
func copyRateLimits(dst, src http.Header) {
	for k, v := range src {
		for _, p := range rateLimitPrefixes {
			if strings.HasPrefix(k, p) {
				dst[k] = v
			}
		}
	}
}

// writeAnswer writes the non-streamed upstream answer.
func (c *call) writeAnswer() (int, error) {
	a := c.answer
	h := c.w.Header()
	copyUpstream(h, a.header)
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	if len(a.body) > settleAfterAnswerMax {
		c.guardWrite() // a small answer fits the socket's buffers
	}
	c.w.WriteHeader(a.status)
	_, _ = c.w.Write(a.body)
	return a.status, nil
}

// levelFor is the log level of a failed call: info for belay's own
// refusals and the caller's bad requests, warn for the rest.
func levelFor(err error) slog.Level {
	if fe := failure.As(err); fe != nil && fe.Reason == failure.PermissionDenied && fe.Deployment == "" {
		// A key that reached another tenant's run: worth an operator's
		// eye, though it is belay's permanent refusal.
		return slog.LevelWarn
	}
	switch failure.KindOf(err) {
	case failure.Fatal, failure.Permanent:
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

func slogString(k, v string) slog.Attr { return slog.String(k, v) }
func slogErr(err error) slog.Attr      { return slog.String("error", err.Error()) }

// slogDetail is the "detail" attribute of a failure (see detail); none
// (an empty Attr, which handlers leave out) when it has none.
func slogDetail(err error) slog.Attr {
	if d := detail(err); d != "" {
		return slog.String("detail", d)
	}
	return slog.Attr{}
}
