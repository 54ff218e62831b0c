package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Fault is one way the simulator can misbehave, rendered in the wire format
// of the request's dialect. The zero value means no fault.
type Fault string

// Faults. "openai:" and "anthropic:" name what each dialect gets.
const (
	NoFault Fault = ""
	// RateLimit: 429 with retry-after (and retry-after-ms for OpenAI), a
	// delay drawn from [100ms, Profile.MaxRetryAfter]; openai: type
	// "requests", code rate_limit_exceeded; anthropic: rate_limit_error.
	RateLimit Fault = "rate_limit"
	// Overloaded: openai: 503 server_error "The engine is currently
	// overloaded"; anthropic: 529 overloaded_error with x-should-retry: true.
	Overloaded Fault = "overloaded"
	// ServerError: 500; openai: server_error; anthropic: api_error.
	ServerError Fault = "server_error"
	// Unavailable: 503 in both dialects (openai server_error, anthropic
	// api_error): the deployment is down.
	Unavailable Fault = "unavailable"
	// BadGatewayHTML: 502 with a CDN's HTML page (content-type text/html).
	BadGatewayHTML Fault = "bad_gateway_html"
	// ErrorIn200: HTTP 200 whose JSON body is an error object, as some
	// OpenAI-compatible routers send.
	ErrorIn200 Fault = "error_in_200"
	// Hang: no answer until the request's context ends.
	Hang Fault = "hang"
	// Reset: the connection is closed (RST where possible) before any
	// response byte.
	Reset Fault = "reset"
	// StreamError: streams send some content, then the dialect's in-stream
	// error event (openai server_error data line; anthropic "event: error"
	// overloaded_error). A non-streamed request gets its body cut instead.
	StreamError Fault = "stream_error"
	// StreamCut: streams send some content and end without their
	// terminator ([DONE] / message_stop); a non-streamed response is cut
	// mid-body and the connection aborted.
	StreamCut Fault = "stream_cut"
	// TruncatedToolArgs: the reply is cut at the output limit: openai tool
	// call arguments are cut mid-JSON with finish_reason "length";
	// anthropic tool_use input is incomplete with stop_reason "max_tokens".
	TruncatedToolArgs Fault = "truncated_tool_args"
	// SlowFirstToken: headers are sent at once, the first stream event
	// after Profile.FirstTokenDelay; a non-streamed response waits that long.
	SlowFirstToken Fault = "slow_first_token"
	// QuotaExhausted: openai: 429 insufficient_quota; anthropic: 402
	// billing_error.
	QuotaExhausted Fault = "quota_exhausted"
	// AuthError: 401; openai: invalid_api_key; anthropic: authentication_error.
	AuthError Fault = "auth_error"
	// ContextLength: 400; openai: context_length_exceeded; anthropic:
	// invalid_request_error "prompt is too long".
	ContextLength Fault = "context_length"
)

// AllFaults lists every fault.
var AllFaults = []Fault{
	RateLimit, Overloaded, ServerError, Unavailable, BadGatewayHTML, ErrorIn200, Hang, Reset,
	StreamError, StreamCut, TruncatedToolArgs, SlowFirstToken, QuotaExhausted, AuthError, ContextLength,
}

// ParseFault returns the fault named s (case-insensitive); "timeout" is an
// alias for hang and "none" or "" for NoFault.
func ParseFault(s string) (Fault, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "", "none":
		return NoFault, nil
	case "timeout":
		return Hang, nil
	}
	if slices.Contains(AllFaults, Fault(s)) {
		return Fault(s), nil
	}
	names := make([]string, len(AllFaults))
	for i, f := range AllFaults {
		names[i] = string(f)
	}
	return NoFault, fmt.Errorf("sim: unknown fault %q (want one of %s, timeout, none)", s, strings.Join(names, ", "))
}

// Weighted is a fault and the probability, in [0, 1], that a request gets it.
type Weighted struct {
	Fault Fault   `yaml:"fault" json:"fault"`
	P     float64 `yaml:"p" json:"p"`
}

// Latency is a lognormal delay before each response's first byte, given by
// its median and 99th percentile. The zero value means no delay; P99 below
// Median means a fixed delay of Median.
type Latency struct {
	Median time.Duration `yaml:"median" json:"median"`
	P99    time.Duration `yaml:"p99" json:"p99"`
}

// z99 is the standard normal 99th percentile.
const z99 = 2.3263478740408408

// Draw returns one delay: exp(ln(Median) + sigma*N(0,1)) with
// sigma = ln(P99/Median)/z99, using one draw from r.
func (l Latency) Draw(r *rand.Rand) time.Duration {
	z := r.NormFloat64()
	if l.Median <= 0 {
		return 0
	}
	if l.P99 <= l.Median {
		return l.Median
	}
	sigma := math.Log(float64(l.P99)/float64(l.Median)) / z99
	return time.Duration(float64(l.Median) * math.Exp(sigma*z))
}

// Profile is a named mix of faults and timings. The zero value serves
// every request promptly and correctly.
type Profile struct {
	Name string `yaml:"name" json:"name"`
	// Faults are tried in order against one uniform draw; their P values
	// should sum to at most 1, and the rest of the mass is success.
	Faults []Weighted `yaml:"faults" json:"faults"`
	// Latency delays the first byte of every answer.
	Latency Latency `yaml:"latency" json:"latency"`
	// MaxRetryAfter bounds the Retry-After of RateLimit; default 2s.
	MaxRetryAfter time.Duration `yaml:"max_retry_after" json:"max_retry_after"`
	// FirstTokenDelay is SlowFirstToken's delay; default 10s.
	FirstTokenDelay time.Duration `yaml:"first_token_delay" json:"first_token_delay"`
	// ChunkDelay is the pause between stream events; default 0.
	ChunkDelay time.Duration `yaml:"chunk_delay" json:"chunk_delay"`
}

// Draw picks the fault for one request from one uniform draw of r.
func (p Profile) Draw(r *rand.Rand) Fault {
	u := r.Float64()
	acc := 0.0
	for _, w := range p.Faults {
		acc += w.P
		if u < acc {
			return w.Fault
		}
	}
	return NoFault
}

func (p Profile) maxRetryAfter() time.Duration {
	if p.MaxRetryAfter > 0 {
		return p.MaxRetryAfter
	}
	return 2 * time.Second
}

func (p Profile) firstTokenDelay() time.Duration {
	if p.FirstTokenDelay > 0 {
		return p.FirstTokenDelay
	}
	return 10 * time.Second
}

// fast is the default latency: a few milliseconds, so evaluations run fast.
var fast = Latency{Median: 2 * time.Millisecond, P99: 8 * time.Millisecond}

// Named profiles. Probabilities are per request.
var profiles = map[string]Profile{
	// none: no faults.
	"none": {Name: "none", Latency: fast},
	// storm: 30% rate limits (Retry-After <= 2s), 10% overloaded (529 /
	// 503), 5% 500, 3% hangs, 2% resets, 2% HTML 502, 1% 200-with-error,
	// 1% mid-stream errors; 46% succeed (54% of attempts fail).
	"storm": {Name: "storm", Latency: fast, Faults: []Weighted{
		{RateLimit, 0.30}, {Overloaded, 0.10}, {ServerError, 0.05}, {Hang, 0.03},
		{Reset, 0.02}, {BadGatewayHTML, 0.02}, {ErrorIn200, 0.01}, {StreamError, 0.01},
	}},
	// flaky: 5% rate limits, 3% overloaded, 2% 500, 1% resets, 1% stream
	// cuts; 88% succeed.
	"flaky": {Name: "flaky", Latency: fast, Faults: []Weighted{
		{RateLimit, 0.05}, {Overloaded, 0.03}, {ServerError, 0.02}, {Reset, 0.01}, {StreamCut, 0.01},
	}},
	// down: every request gets 503.
	"down": {Name: "down", Faults: []Weighted{{Unavailable, 1}}},
	// unreachable: every connection is reset before an answer.
	"unreachable": {Name: "unreachable", Faults: []Weighted{{Reset, 1}}},
	// hang: no request is ever answered.
	"hang": {Name: "hang", Faults: []Weighted{{Hang, 1}}},
	// slow: lognormal latency, median 400ms, p99 4s; 10% slow first tokens
	// (5s).
	"slow": {Name: "slow", Latency: Latency{Median: 400 * time.Millisecond, P99: 4 * time.Second},
		FirstTokenDelay: 5 * time.Second, Faults: []Weighted{{SlowFirstToken, 0.10}}},
	// rate_limited: every request gets 429.
	"rate_limited": {Name: "rate_limited", Faults: []Weighted{{RateLimit, 1}}},
	// no_quota: every request gets the dialect's quota error.
	"no_quota": {Name: "no_quota", Faults: []Weighted{{QuotaExhausted, 1}}},
	// bad_key: every request gets 401.
	"bad_key": {Name: "bad_key", Faults: []Weighted{{AuthError, 1}}},
}

// profileDocs say in one line what each named profile does, for help
// texts.
var profileDocs = map[string]string{
	"none":         "no faults; fast answers",
	"storm":        "30% 429 (Retry-After ≤ 2s), 10% overloaded (529/503), 5% 500, 3% hangs, 2% resets, 2% HTML 502, 1% error in a 200, 1% mid-stream errors; 46% succeed",
	"flaky":        "5% 429, 3% overloaded, 2% 500, 1% resets, 1% streams cut without their terminator; 88% succeed",
	"down":         "every request gets 503",
	"unreachable":  "every connection is reset before an answer",
	"hang":         "no request is ever answered",
	"slow":         "latency drawn lognormal, median 400ms, p99 4s; 10% of streams wait 5s for their first token",
	"rate_limited": "every request gets 429",
	"no_quota":     "every request gets the dialect's quota error (not retryable)",
	"bad_key":      "every request gets 401",
}

// ProfileDoc says in one line what the named profile does ("" for a name
// that is not a profile).
func ProfileDoc(name string) string { return profileDocs[name] }

// LookupProfile returns the named profile: none, storm, flaky, down,
// unreachable, hang, slow, rate_limited, no_quota, bad_key.
func LookupProfile(name string) (Profile, bool) {
	p, ok := profiles[name]
	p.Faults = slices.Clone(p.Faults)
	return p, ok
}

// ProfileNames returns the names of the built-in profiles, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ParseProfile returns the named profile or an error listing the names.
func ParseProfile(name string) (Profile, error) {
	if name == "" {
		name = "none"
	}
	if p, ok := LookupProfile(name); ok {
		return p, nil
	}
	return Profile{}, fmt.Errorf("sim: unknown profile %q (want one of %s)", name, strings.Join(ProfileNames(), ", "))
}
