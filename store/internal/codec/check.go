package codec

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
)

// ErrInvalid marks an argument a backend refuses before touching the
// database (a negative amount, an unknown kill target, ...).
var ErrInvalid = errors.New("invalid argument")

// NS returns t as Unix nanoseconds, or nil for the zero time (stored as
// NULL). Times must lie between the years 1678 and 2262.
func NS(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.UnixNano()
	return &n
}

// Time is the inverse of NS: nil gives the zero time, others a UTC time.
func Time(ns *int64) time.Time {
	if ns == nil {
		return time.Time{}
	}
	return time.Unix(0, *ns).UTC()
}

// Scopes checks r and returns its scopes sorted by name, the order in which
// every backend locks them (so concurrent reservations cannot deadlock).
func Scopes(r budget.Reservation) ([]budget.ScopeLimit, error) {
	if r.ID == "" && !r.Spend {
		return nil, fmt.Errorf("%w: reservation id is empty", ErrInvalid)
	}
	if r.Amount < 0 {
		return nil, fmt.Errorf("%w: reservation %q amount %v is negative", ErrInvalid, r.ID, r.Amount)
	}
	s := slices.Clone(r.Scopes)
	slices.SortFunc(s, func(a, b budget.ScopeLimit) int { return strings.Compare(string(a.Scope), string(b.Scope)) })
	for i := range s {
		if s[i].Scope == "" {
			return nil, fmt.Errorf("%w: reservation %q has an empty scope", ErrInvalid, r.ID)
		}
		if i > 0 && s[i].Scope == s[i-1].Scope {
			return nil, fmt.Errorf("%w: reservation %q names scope %q twice", ErrInvalid, r.ID, s[i].Scope)
		}
	}
	return s, nil
}

// Fits reports whether amount fits in a fresh scope with limit (a limit of
// 0 or less is unlimited).
func Fits(limit, amount budget.USD) bool { return limit <= 0 || amount <= limit }

// Exceeded is the error for a reservation that does not fit in scope.
func Exceeded(id string, s budget.ScopeLimit, amount budget.USD) error {
	return &budget.ExceededError{ID: id, Scope: s.Scope, Amount: amount, Limit: s.Limit}
}

// ScopeNames returns the names of sorted scopes as a JSON array text.
func ScopeNames(s []budget.ScopeLimit) string {
	names := make([]string, len(s))
	for i, l := range s {
		names[i] = string(l.Scope)
	}
	b, _ := json.Marshal(names) // a []string always marshals
	return string(b)
}

// ParseScopeNames parses text written by ScopeNames.
func ParseScopeNames(text string) ([]string, error) {
	var names []string
	if err := json.Unmarshal([]byte(text), &names); err != nil {
		return nil, fmt.Errorf("decode reservation scopes: %w", err)
	}
	return names, nil
}

// KillTarget checks a kill flag's target and name: a known target, a name
// for every target but KillAll, no name for KillAll.
func KillTarget(target store.KillTarget, name string) error {
	switch target {
	case store.KillAll:
		if name != "" {
			return fmt.Errorf("%w: kill target %q takes no name (got %q)", ErrInvalid, target, name)
		}
		return nil
	case store.KillRun, store.KillTenant, store.KillTool, store.KillModel, store.KillDeployment:
		if name == "" {
			return fmt.Errorf("%w: kill target %q needs a name", ErrInvalid, target)
		}
		return nil
	}
	return fmt.Errorf("%w: kill target %q (want all, run, tenant, tool, model or deployment)", ErrInvalid, target)
}

// Decision checks the state an approval is decided to.
func Decision(state store.ApprovalState) error {
	switch state {
	case store.ApprovalApproved, store.ApprovalDenied, store.ApprovalExpired:
		return nil
	}
	return fmt.Errorf("%w: approval decision %q (want approved, denied or expired)", ErrInvalid, state)
}

// Labels encodes run labels as JSON text (nil for none).
func Labels(l map[string]string) *string {
	if len(l) == 0 {
		return nil
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the order json.Marshal gives
	b := append(make([]byte, 0, 64), '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var ok1, ok2 bool
		b, ok1 = appendString(b, k)
		b = append(b, ':')
		if b, ok2 = appendString(b, l[k]); !ok1 || !ok2 {
			// Invalid UTF-8: json.Marshal's replacement characters.
			j, _ := json.Marshal(l) // a map[string]string always marshals
			s := string(j)
			return &s
		}
	}
	s := string(append(b, '}'))
	return &s
}

// ParseLabels is the inverse of Labels.
func ParseLabels(text *string) (map[string]string, error) {
	if text == nil || *text == "" {
		return nil, nil
	}
	var l map[string]string
	if err := json.Unmarshal([]byte(*text), &l); err != nil {
		return nil, fmt.Errorf("decode run labels: %w", err)
	}
	return l, nil
}

// Lease returns now+lease as Unix nanoseconds.
func Lease(now time.Time, lease time.Duration) int64 { return now.Add(lease).UnixNano() }
