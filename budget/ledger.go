package budget

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrExceeded is returned (wrapped in a *failure.Error with reason
// budget_exceeded by the run layer) when a reservation does not fit in one of
// its scopes.
var ErrExceeded = errors.New("budget: reservation exceeds the limit")

// ExceededError is the refusal of one reservation by one scope; it wraps
// ErrExceeded. The SQL stores return it (errors.As) from Reserve and
// BatchLedger.ReserveAll, so that a caller holding several reservations
// learns which one did not fit.
type ExceededError struct {
	ID     string // the reservation refused; "" for a Spend kept under no id
	Scope  Scope
	Amount USD
	Limit  USD
}

// Error names the reservation (when it has an id), its amount, the scope
// and the scope's limit.
func (e *ExceededError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("%v: %v does not fit in scope %q (limit %v)", ErrExceeded, e.Amount, e.Scope, e.Limit)
	}
	return fmt.Sprintf("%v: reservation %q of %v in scope %q (limit %v)", ErrExceeded, e.ID, e.Amount, e.Scope, e.Limit)
}

func (e *ExceededError) Unwrap() error { return ErrExceeded }

// BatchLedger is a Ledger that holds several reservations in one atomic
// write (one transaction, one round trip): a caller that needs a turn and
// the money for it reserves both at once.
type BatchLedger interface {
	Ledger
	// ReserveAll holds every reservation of rs, or none of them: a refusal
	// by any scope changes nothing and returns an error wrapping
	// ErrExceeded (a *ExceededError naming the reservation and scope).
	// Other errors are as for Reserve.
	ReserveAll(ctx context.Context, rs []Reservation) error
}

// ErrUnknownReservation is returned by Settle and Release for an id that was
// never reserved, or was already settled, released or expired.
var ErrUnknownReservation = errors.New("budget: unknown reservation")

// Scope names one pool of money: "run:<run id>" or
// "tenant:<name>:<period>" where period is "2026-11" (month) or "2026-11-29"
// (day), UTC. Use RunScope and TenantScope to build them.
type Scope string

// Kind returns what the scope counts: the part before its first colon,
// "run" or "tenant" for the scopes RunScope and TenantScope build; "" when
// there is no colon.
func (s Scope) Kind() string {
	kind, _, ok := strings.Cut(string(s), ":")
	if !ok {
		return ""
	}
	return kind
}

// ScopeLimit is a scope and the most that may be spent in it. A Limit of 0
// or less means unlimited: the spend is still recorded.
type ScopeLimit struct {
	Scope Scope
	Limit USD
}

// Reservation holds money back before a spend. ID is chosen by the caller
// and must be unique; Owner names the process (so an operator can see whose
// reservations expired); ExpiresAt is when an unsettled reservation is
// released by ExpireReservations (a process that died leaves none behind).
type Reservation struct {
	ID        string
	Owner     string
	Scopes    []ScopeLimit
	Amount    USD
	ExpiresAt time.Time
	// Spend (honoured by Reserve and ReserveAll of MemLedger and of the
	// stores belay ships) takes Amount as spent at once (into Settled)
	// under the same limits, and leaves no reservation to settle or
	// release. A Spend with an ID records the ID as used, so that the
	// same spend repeated (a retry after an answer was lost) is a
	// conflict and changes nothing; with an empty ID nothing is kept (a
	// count used as soon as it is admitted, such as a run's turns: one
	// statement and no row per use).
	Spend bool
}

// Balance is the state of one scope: Settled is money spent, Reserved is
// money held by open reservations.
type Balance struct {
	Scope    Scope
	Settled  USD
	Reserved USD
}

// Ledger is the store-side half of the budget: atomic reserve, settle and
// release across several scopes. Implementations (store/sqlite,
// store/postgres) guarantee that concurrent Reserve calls from any number of
// goroutines and processes never let Settled+Reserved of a scope pass its
// limit; they are safe for concurrent use.
type Ledger interface {
	// Reserve holds r.Amount in every scope of r, or in none: when any
	// scope's Settled+Reserved+Amount would pass its limit it returns an
	// error wrapping ErrExceeded and changes nothing.
	Reserve(ctx context.Context, r Reservation) error
	// Settle replaces the reservation id by the actual spend in all of its
	// scopes. actual may be above the reserved amount (the spend happened);
	// it is recorded as is.
	Settle(ctx context.Context, id string, actual USD) error
	// Release drops the reservation id without spending.
	Release(ctx context.Context, id string) error
	// ExpireReservations releases every reservation whose ExpiresAt is
	// before now, returning how many it released.
	ExpireReservations(ctx context.Context, now time.Time) (int, error)
	// Renew moves the ExpiresAt of each open reservation in ids to
	// expiresAt, in one write; ids no longer open (settled, released,
	// expired) are skipped. The process holding a reservation renews it
	// while its call runs, so that ExpireReservations releases only what
	// a process that stopped left behind, not the money of a long call.
	Renew(ctx context.Context, ids []string, expiresAt time.Time) error
	// Balance returns the state of a scope (zero for an unknown scope).
	Balance(ctx context.Context, s Scope) (Balance, error)
	// MarkAlert records that threshold (a fraction such as 0.8) was crossed
	// in scope s and reports whether this is the first time, so each alert
	// fires once per scope (and so once per period).
	MarkAlert(ctx context.Context, s Scope, threshold float64) (first bool, err error)
}
