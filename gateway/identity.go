package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

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
)

// Response headers belay writes.
const (
	HeaderAttempts    = "X-Belay-Attempts"
	HeaderDeployment  = "X-Belay-Deployment"
	HeaderDegraded    = "X-Belay-Degraded"
	HeaderCostUSD     = "X-Belay-Cost-Usd"
	HeaderShouldRetry = "X-Should-Retry"
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
// is a Degraded Authentication failure (written as 401).
func (t tenants) identify(r *http.Request) (config.Tenant, *failure.Error) {
	if t.open {
		return config.Tenant{Name: DefaultTenant, Budget: config.TenantBudget{Period: config.PeriodMonth}}, nil
	}
	key := requestKey(r)
	if key == "" {
		return config.Tenant{}, refusal(failure.Authentication, "missing API key: send the belay virtual key as Authorization: Bearer KEY or x-api-key: KEY")
	}
	sum := sha256.Sum256([]byte(key))
	found := -1
	for i, k := range t.list {
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return config.Tenant{}, refusal(failure.Authentication, "invalid API key: not a belay virtual key")
	}
	return t.list[found].tenant, nil
}

func requestKey(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if k, ok := strings.CutPrefix(a, "Bearer "); ok {
			return strings.TrimSpace(k)
		}
	}
	return strings.TrimSpace(r.Header.Get("X-Api-Key"))
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:\-]{1,128}$`)

// runID returns the run id from X-Belay-Run-Id, or a new UUIDv7 when absent.
// An id must be 1-128 characters of letters, digits and . _ : -.
func runID(r *http.Request) (string, *failure.Error) {
	id := strings.TrimSpace(r.Header.Get(HeaderRunID))
	if id == "" {
		return ids.New(), nil
	}
	if !runIDPattern.MatchString(id) {
		return "", refusal(failure.InvalidRequest, HeaderRunID+": want 1-128 characters of letters, digits and . _ : -")
	}
	return id, nil
}

// requestLimits returns base lowered by the request's X-Belay-Max-Turns,
// X-Belay-Deadline (a Go duration or seconds) and X-Belay-Max-Cost-Usd
// headers. A request can only lower a limit: a value above the tenant's
// limit is capped at it. A malformed value is an InvalidRequest failure.
func requestLimits(r *http.Request, base config.Limits) (config.Limits, *failure.Error) {
	l := base
	if v := r.Header.Get(HeaderMaxTurns); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return l, refusal(failure.InvalidRequest, fmt.Sprintf("%s: %q is not a positive integer", HeaderMaxTurns, v))
		}
		if l.MaxTurns == 0 || n < l.MaxTurns {
			l.MaxTurns = n
		}
	}
	if v := r.Header.Get(HeaderDeadline); v != "" {
		d, err := config.ParseDuration(v)
		if err != nil || d == 0 {
			return l, refusal(failure.InvalidRequest, fmt.Sprintf("%s: %q is not a positive duration (e.g. 90s, 5m or 90)", HeaderDeadline, v))
		}
		if l.Deadline == 0 || config.Duration(d) < l.Deadline {
			l.Deadline = config.Duration(d)
		}
	}
	if v := r.Header.Get(HeaderMaxCostUSD); v != "" {
		c, err := budget.ParseUSD(v)
		if err != nil || c <= 0 {
			return l, refusal(failure.InvalidRequest, fmt.Sprintf("%s: %q is not a positive dollar amount", HeaderMaxCostUSD, v))
		}
		if l.MaxCostUSD == 0 || config.USD(c) < l.MaxCostUSD {
			l.MaxCostUSD = config.USD(c)
		}
	}
	return l, nil
}

// refusal is a failure belay decides itself.
func refusal(r failure.Reason, msg string) *failure.Error {
	return &failure.Error{Kind: r.Kind(), Reason: r, Message: msg, NoRetry: true}
}
