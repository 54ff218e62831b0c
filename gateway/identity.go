package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"github.com/belay-run/belay/internal/suggest"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/ids"
)

// Request headers belay reads.
const (
	HeaderRunID      = "X-Belay-Run-Id"
	HeaderMaxTurns   = "X-Belay-Max-Turns"
	HeaderDeadline   = "X-Belay-Deadline"
	HeaderMaxCostUSD = "X-Belay-Max-Cost-Usd"
	// HeaderMaxTokens lowers the run's token limit (limits.max_tokens:
	// input and output tokens of all its calls), as the other limit
	// headers lower theirs.
	HeaderMaxTokens = "X-Belay-Max-Tokens"
	// HeaderAgent names the agent making the call: the run's agent
	// (store.Run.Agent, the AGENT column of belay runs, the run span's
	// gen_ai.agent.name) when the call starts its run; a run's agent is
	// fixed when it starts.
	HeaderAgent = "X-Belay-Agent"
)

// Response headers belay writes.
const (
	HeaderAttempts    = "X-Belay-Attempts"
	HeaderDeployment  = "X-Belay-Deployment"
	HeaderDegraded    = "X-Belay-Degraded"
	HeaderCostUSD     = "X-Belay-Cost-Usd"
	HeaderShouldRetry = "X-Should-Retry"

	// HeaderLimitsOverridden names each limit the request asked for
	// (X-Belay-Max-Turns, X-Belay-Deadline, X-Belay-Max-Cost-Usd,
	// X-Belay-Max-Tokens) that does not apply as asked, with the value
	// that applies instead: comma-separated name=value pairs, in this
	// order,
	//
	//	X-Belay-Limits-Overridden: max-turns=50, deadline=300, max-cost-usd=1.00, max-tokens=100000
	//
	// Names are the request headers' without "X-Belay-"; values are in
	// their units (turns, seconds, USD, tokens), or "none" for no limit.
	//
	// A request can only lower its tenant's limits: a value above one is
	// capped at it. And a run's limits are fixed by its first request: on
	// a later request of the run, the run's limits apply whatever its
	// headers ask, and the header compares with them (it may then name a
	// limit above the one asked for). When the run's limits are not known
	// — a request refused before it reaches its run (malformed body,
	// unknown model, a run of another tenant, the store unavailable) — it
	// compares with the tenant's limits, which a new run would get.
	//
	// It is set on every response of such a request, success or refusal,
	// in both dialects (for a stream, with the response header). It is
	// absent when every limit asked for applies, when none was asked, and
	// on a request refused before its tenant is known (401) or for a
	// malformed limit header (400).
	HeaderLimitsOverridden = "X-Belay-Limits-Overridden"

	// HeaderAgentOverridden is set when a request's X-Belay-Agent is not
	// its run's agent, which the run's first call fixed: its value is the
	// run's agent ("none" when that call sent none). The request is
	// served as the run's (the run keeps one agent in its record and
	// trace).
	HeaderAgentOverridden = "X-Belay-Agent-Overridden"
)

// DefaultTenant is the tenant of every request when no tenants are
// configured.
const DefaultTenant = "default"

// tenants maps virtual keys to tenants. Keys are compared by their SHA-256
// in constant time, so lookups leak neither keys nor their prefixes
// through timing.
type tenants struct {
	open bool
	list []tenantKey
}

type tenantKey struct {
	sum    [32]byte
	tenant config.Tenant
}

func newTenants(cfg *config.Config) tenants {
	t := tenants{open: len(cfg.Tenants) == 0}
	for _, tn := range cfg.Tenants {
		t.list = append(t.list, tenantKey{sha256.Sum256([]byte(tn.Key.Value)), tn})
	}
	return t
}

// identify returns the tenant of r from its virtual key
// (Authorization: Bearer KEY, or x-api-key: KEY). With no tenants
// configured every request is tenant "default". An unknown or missing key
// is a Permanent Authentication failure (written as 401).
func (t tenants) identify(r *http.Request) (config.Tenant, *failure.Error) {
	if t.open {
		return config.Tenant{Name: DefaultTenant, Budget: config.TenantBudget{Period: config.PeriodMonth}}, nil
	}
	key := requestKey(r)
	if key == "" {
		if r.Header.Get("Authorization") != "" || r.Header.Get("Api-Key") != "" {
			return config.Tenant{}, refusal(failure.Authentication, "API key in an unsupported form: send the belay virtual key as Authorization: Bearer KEY or x-api-key: KEY")
		}
		return config.Tenant{}, refusal(failure.Authentication, "missing API key: send the belay virtual key as Authorization: Bearer KEY or x-api-key: KEY")
	}
	found := t.find(key)
	if found < 0 {
		return config.Tenant{}, refusal(failure.Authentication, "invalid API key: not a belay virtual key (one of the tenants[].key values of the gateway's config, not a provider's key)")
	}
	// A request carrying two tenants' keys (Authorization and x-api-key)
	// is refused rather than billed to one of them.
	if other := strings.Trim(r.Header.Get("X-Api-Key"), " \t"); other != "" && other != key {
		if j := t.find(other); j >= 0 && t.list[j].tenant.Name != t.list[found].tenant.Name {
			return config.Tenant{}, refusal(failure.Authentication, "two tenants' virtual keys: Authorization and x-api-key name different tenants; send one key")
		}
	}
	return t.list[found].tenant, nil
}

// find returns the index in t.list of the tenant whose key is key, -1
// when none: every key is compared, in constant time.
func (t tenants) find(key string) int {
	sum := sha256.Sum256([]byte(key))
	found := -1
	for i, k := range t.list {
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			found = i
		}
	}
	return found
}

// requestKey returns the key of r: the credentials of Authorization when
// its scheme is Bearer, in any case ("bearer KEY", "BEARER KEY": an auth
// scheme is case-insensitive, RFC 9110 §11.1), otherwise x-api-key. The
// tenants' virtual keys and the admin key are both read so.
func requestKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if scheme, k, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.Trim(k, " \t")
		}
	}
	// Only HTTP's own blanks are trimmed (RFC 9110 §5.6.3): a key may end
	// in another space, as config's keys may (an adversarial review: a
	// tenant key ending in U+00A0 loaded and never matched).
	return strings.Trim(r.Header.Get("X-Api-Key"), " \t")
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:\-]{1,128}$`)

// validRunID reports whether id is a run id a client may send: 1-128
// characters of letters, digits and . _ : -, not only dots ("." and ".."
// are path segments a URL client resolves away, so the run API could not
// name them).
func validRunID(id string) bool {
	return runIDPattern.MatchString(id) && strings.Trim(id, ".") != ""
}

// RunKeySep separates the tenant from the client's run id in the id a
// run has in the store when tenants are configured ("acme~run-42"): each
// tenant's run ids are its own. A client's id cannot hold it, so the key
// splits at its last RunKeySep whatever the tenant's name.
const RunKeySep = "~"

// runKey is the id in the store (and in the admin API, the CLI, traces
// and logs) of the run a request of tenant names id: with tenants
// configured, "TENANT~ID", so that one tenant's run ids never reach
// another's runs (two tenants naming "run-1" each have a run of their
// own); on an open gateway (one tenant, "default") the id itself.
func (t tenants) runKey(tenant, id string) string {
	if t.open {
		return id
	}
	return tenant + RunKeySep + id
}

// runID returns the run id from X-Belay-Run-Id, or a new UUIDv7 when absent,
// and whether the client named it. An id must be 1-128 characters of
// letters, digits and . _ : -; with tenants configured, the refusal of one
// holding RunKeySep says to drop its TENANT~ prefix. A header sent empty
// (blank, once trimmed) is refused, as limit headers are: taken for absent,
// it made each call a run of its own, so that a run's limits never added
// up (an adversarial review: an SDK's custom-header setting with an unset
// variable sends it so).
func runID(r *http.Request, tenants bool) (string, bool, *failure.Error) {
	id, sent, fe := oneHeader(r, HeaderRunID)
	switch {
	case fe != nil:
		return "", false, fe
	case !sent:
		return ids.New(), false, nil
	case id == "":
		return "", false, refusal(failure.InvalidRequest, HeaderRunID+": empty; send a run id, or leave the header out for a run of its own")
	}
	if !validRunID(id) {
		msg := HeaderRunID + ": want 1-128 characters of letters, digits and . _ : -, not only dots"
		if tenants && strings.Contains(id, RunKeySep) {
			// An id as belay names it in its refusals and records
			// (TENANT~ID), sent back (newcomer finding).
			msg += "; " + RunKeySep + " separates a tenant from a run id in the ids belay stores: send the id without its TENANT" + RunKeySep + " prefix"
		}
		return "", false, refusal(failure.InvalidRequest, msg)
	}
	return id, true, nil
}

// maxAgentName bounds X-Belay-Agent, in bytes.
const maxAgentName = 128

// agentName returns the request's X-Belay-Agent, trimmed ("" when absent):
// at most maxAgentName bytes of UTF-8 without control characters, else an
// InvalidRequest failure.
func agentName(r *http.Request) (string, *failure.Error) {
	v, _, fe := oneHeader(r, HeaderAgent)
	if fe != nil {
		return "", fe
	}
	if len(v) > maxAgentName || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return "", refusal(failure.InvalidRequest, fmt.Sprintf("%s: want at most %d bytes of text without control characters", HeaderAgent, maxAgentName))
	}
	return v, nil
}

// requestLimits returns base lowered by the request's X-Belay-Max-Turns
// (a whole number), X-Belay-Deadline (a Go duration or seconds) and
// X-Belay-Max-Cost-Usd (dollars) headers, their numbers plain decimals (no
// exponent, digit separators or base prefix; see config.ParseDuration and
// budget.ParseUSD), and the limits those headers asked for (a zero field was not
// asked). A request can only lower a limit: a value above the tenant's
// limit is capped at it (and named in X-Belay-Limits-Overridden, see
// limitsOverridden). A malformed value, or a header sent twice or empty,
// is an InvalidRequest failure.
func requestLimits(r *http.Request, base config.Limits) (l, asked config.Limits, fe *failure.Error) {
	l = base
	if v, ok, fe := limitHeader(r, HeaderMaxTurns); fe != nil {
		return l, asked, fe
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return l, asked, refusal(failure.InvalidRequest, fmt.Sprintf("%s: %q is not a positive integer%s", HeaderMaxTurns, v, outOfRange(err)))
		}
		asked.MaxTurns = n
		if l.MaxTurns == 0 || n < l.MaxTurns {
			l.MaxTurns = n
		}
	}
	if v, ok, fe := limitHeader(r, HeaderMaxTokens); fe != nil {
		return l, asked, fe
	} else if ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return l, asked, refusal(failure.InvalidRequest, fmt.Sprintf("%s: %q is not a positive integer%s", HeaderMaxTokens, v, outOfRange(err)))
		}
		asked.MaxTokens = n
		if l.MaxTokens == 0 || n < l.MaxTokens {
			l.MaxTokens = n
		}
	}
	if v, ok, fe := limitHeader(r, HeaderDeadline); fe != nil {
		return l, asked, fe
	} else if ok {
		d, err := config.ParseDuration(v)
		if err != nil || d == 0 {
			return l, asked, refusal(failure.InvalidRequest, fmt.Sprintf("%s: %q is not a positive duration (e.g. 90s, 5m or 90)%s", HeaderDeadline, v, outOfRange(err)))
		}
		asked.Deadline = config.Duration(d)
		if l.Deadline == 0 || config.Duration(d) < l.Deadline {
			l.Deadline = config.Duration(d)
		}
	}
	if v, ok, fe := limitHeader(r, HeaderMaxCostUSD); fe != nil {
		return l, asked, fe
	} else if ok {
		c, err := budget.ParseUSD(v)
		if err != nil || c <= 0 {
			return l, asked, refusal(failure.InvalidRequest, fmt.Sprintf("%s: %q is not a positive dollar amount (a plain decimal, e.g. 0.25 or $0.25)%s", HeaderMaxCostUSD, v, outOfRange(err)))
		}
		asked.MaxCostUSD = config.USD(c)
		if l.MaxCostUSD == 0 || config.USD(c) < l.MaxCostUSD {
			l.MaxCostUSD = config.USD(c)
		}
	}
	return l, asked, nil
}

// limitHeader returns the value of the limit header name, trimmed, and
// whether the request sent it. A header sent twice (only one value would
// apply) or sent empty (no limit would apply, silently) is refused (a
// newcomer's finding: the second of two X-Belay-Max-Turns was dropped, and
// an empty one left the run at its default).
func limitHeader(r *http.Request, name string) (string, bool, *failure.Error) {
	v, ok, fe := oneHeader(r, name)
	if fe != nil || !ok {
		return "", false, fe
	}
	if v == "" {
		return "", false, refusal(failure.InvalidRequest, fmt.Sprintf("%s: empty; send a value, or leave the header out for the run's own limit", name))
	}
	return v, true, nil
}

// oneHeader returns the value of header name, trimmed, and whether the
// request sent it; a header sent more than once is refused, as only one of
// its values could apply.
func oneHeader(r *http.Request, name string) (string, bool, *failure.Error) {
	vs := r.Header.Values(name)
	switch {
	case len(vs) == 0:
		return "", false, nil
	case len(vs) > 1:
		return "", false, refusal(failure.InvalidRequest, fmt.Sprintf("%s: sent %d times; send it once", name, len(vs)))
	}
	return strings.TrimSpace(vs[0]), true, nil
}

// outOfRange explains, in a limit header's refusal, an error that says the
// value is too large to hold (strconv's, config.ParseDuration's or
// budget.ParseUSD's range error); "" for any other error.
func outOfRange(err error) string {
	if errors.Is(err, strconv.ErrRange) || errors.Is(err, config.ErrDurationRange) || errors.Is(err, budget.ErrMoneyRange) {
		return " (too large to hold: a request can only lower the run's limit; leave the header out to keep it)"
	}
	if errors.Is(err, budget.ErrMoneyPrecision) {
		return " (finer than belay counts money: at most 12 decimals, a picodollar)"
	}
	return ""
}

// limitsOverridden returns the X-Belay-Limits-Overridden value for the
// limits asked (a zero field was not asked) against those that apply: each
// asked limit that differs, with the value that applies; "" when there is
// none.
func limitsOverridden(asked, apply config.Limits) string {
	var b strings.Builder
	add := func(name string, set bool, value string) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if !set {
			value = "none"
		}
		b.WriteString(name + "=" + value)
	}
	if asked.MaxTurns != 0 && asked.MaxTurns != apply.MaxTurns {
		add("max-turns", apply.MaxTurns != 0, strconv.Itoa(apply.MaxTurns))
	}
	if asked.Deadline != 0 && asked.Deadline != apply.Deadline {
		add("deadline", apply.Deadline != 0, strconv.FormatFloat(apply.Deadline.D().Seconds(), 'f', -1, 64))
	}
	if asked.MaxCostUSD != 0 && asked.MaxCostUSD != apply.MaxCostUSD {
		add("max-cost-usd", apply.MaxCostUSD != 0, apply.MaxCostUSD.V().Decimal())
	}
	if asked.MaxTokens != 0 && asked.MaxTokens != apply.MaxTokens {
		add("max-tokens", apply.MaxTokens != 0, strconv.FormatInt(apply.MaxTokens, 10))
	}
	return b.String()
}

// requestHeaders are the X-Belay-* request headers belay reads.
var requestHeaders = []string{HeaderRunID, HeaderAgent, HeaderMaxTurns, HeaderDeadline, HeaderMaxCostUSD, HeaderMaxTokens}

// responseOnly are the X-Belay-* headers belay writes on its answers and
// does not read: a request carrying them (a proxy or a replay tool that
// echoes an answer's headers) is not refused for them.
var responseOnly = []string{HeaderAttempts, HeaderDeployment, HeaderDegraded, HeaderCostUSD, HeaderLimitsOverridden,
	HeaderAgentOverridden, failure.HeaderKind, failure.HeaderReason}

// unknownHeader refuses a request that sends an X-Belay-* header belay
// does not read: a misspelt limit (X-Belay-Max-Turn) would otherwise not
// apply, without a word (a newcomer's X-Belay-Max-Tokens, before belay
// read it, was ignored so). belay's own response headers (responseOnly)
// are let through: they ask for nothing.
func unknownHeader(r *http.Request) *failure.Error {
	for k := range r.Header {
		if len(k) > len("X-Belay-") && strings.EqualFold(k[:len("X-Belay-")], "X-Belay-") {
			known := false
			for _, h := range requestHeaders {
				known = known || strings.EqualFold(k, h)
			}
			for _, h := range responseOnly {
				known = known || strings.EqualFold(k, h)
			}
			if !known {
				hint := ""
				if near := suggest.Closest(k, requestHeaders); near != "" {
					hint = fmt.Sprintf(" (did you mean %s?)", near)
				}
				return refusal(failure.InvalidRequest, fmt.Sprintf("unknown header %s%s: belay reads %s", k, hint, strings.Join(requestHeaders, ", ")))
			}
		}
	}
	return nil
}

// refusal is a failure belay decides itself. Its kind is the reason's,
// except that a reason that would move a call to another deployment
// (degraded: authentication, permission_denied) is permanent here: belay
// refused the client's own request, and no deployment is at fault (logs
// said "degraded: authentication: missing API key").
func refusal(r failure.Reason, msg string) *failure.Error {
	k := r.Kind()
	if k == failure.Degraded {
		k = failure.Permanent
	}
	return &failure.Error{Kind: k, Reason: r, Message: msg, NoRetry: true}
}
