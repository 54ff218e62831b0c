package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrDuplicateReservation is returned by MemLedger.Reserve for an id that
// was used before (held, settled, released or expired): a reservation id
// is used once.
var ErrDuplicateReservation = errors.New("budget: reservation id already used")

// MemLedger is a Ledger kept in memory, for tests and for library users who
// need no store. It holds nothing across restarts and is not shared between
// processes. The zero value is not usable; call NewMemLedger. Safe for
// concurrent use: every method holds one mutex for its whole (short, I/O
// free) work, so reservations are atomic across their scopes.
type MemLedger struct {
	mu       sync.Mutex
	balances map[Scope]*Balance
	open     map[string]Reservation
	used     map[string]bool // every id ever reserved
	alerts   map[alertKey]bool
}

type alertKey struct {
	scope     Scope
	threshold float64
}

var _ BatchLedger = (*MemLedger)(nil)

// NewMemLedger returns an empty in-memory ledger.
func NewMemLedger() *MemLedger {
	return &MemLedger{
		balances: map[Scope]*Balance{},
		open:     map[string]Reservation{},
		used:     map[string]bool{},
		alerts:   map[alertKey]bool{},
	}
}

func (l *MemLedger) balance(s Scope) *Balance {
	b := l.balances[s]
	if b == nil {
		b = &Balance{Scope: s}
		l.balances[s] = b
	}
	return b
}

// Reserve holds r.Amount in every scope of r, or in none (see Ledger). A
// negative amount, an empty id, an empty or repeated scope is an argument
// error; an id used before is ErrDuplicateReservation.
func (l *MemLedger) Reserve(ctx context.Context, r Reservation) error {
	return l.ReserveAll(ctx, []Reservation{r})
}

// ReserveAll holds every reservation of rs, or none (see BatchLedger).
func (l *MemLedger) ReserveAll(_ context.Context, rs []Reservation) error {
	for _, r := range rs {
		if err := checkReservation(r); err != nil {
			return err
		}
	}
	seen := make(map[string]bool, len(rs))
	for _, r := range rs {
		if seen[r.ID] && r.ID != "" {
			return fmt.Errorf("%w: %q twice in one batch", ErrDuplicateReservation, r.ID)
		}
		seen[r.ID] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		if r.ID != "" && l.used[r.ID] {
			return fmt.Errorf("%w: %q", ErrDuplicateReservation, r.ID)
		}
	}
	// Each amount must fit with what the scope holds and what the batch's
	// earlier reservations take in it.
	taken := map[Scope]USD{}
	for _, r := range rs {
		for _, sl := range r.Scopes {
			taken[sl.Scope] = taken[sl.Scope].Add(r.Amount)
			b := l.balance(sl.Scope)
			if sl.Limit > 0 && b.Settled.Add(b.Reserved).Add(taken[sl.Scope]) > sl.Limit {
				return fmt.Errorf("%w: %s needs %s, %s spent and %s reserved of %s",
					&ExceededError{ID: r.ID, Scope: sl.Scope, Amount: r.Amount, Limit: sl.Limit},
					sl.Scope, taken[sl.Scope], b.Settled, b.Reserved, sl.Limit)
			}
		}
	}
	for _, r := range rs {
		for _, sl := range r.Scopes {
			b := l.balance(sl.Scope)
			if r.Spend {
				b.Settled = b.Settled.Add(r.Amount)
			} else {
				b.Reserved = b.Reserved.Add(r.Amount)
			}
		}
		if !r.Spend {
			r.Scopes = append([]ScopeLimit(nil), r.Scopes...)
			l.open[r.ID] = r
		}
		if r.ID != "" {
			l.used[r.ID] = true
		}
	}
	return nil
}

func checkReservation(r Reservation) error {
	if r.ID == "" && !r.Spend {
		return errors.New("budget: reservation without an id")
	}
	if r.Amount < 0 {
		return fmt.Errorf("budget: reservation %q of a negative amount %s", r.ID, r.Amount)
	}
	seen := map[Scope]bool{}
	for _, sl := range r.Scopes {
		if sl.Scope == "" {
			return fmt.Errorf("budget: reservation %q has an empty scope", r.ID)
		}
		if seen[sl.Scope] {
			return fmt.Errorf("budget: reservation %q names scope %q twice", r.ID, sl.Scope)
		}
		seen[sl.Scope] = true
	}
	return nil
}

// Settle replaces reservation id by actual in all of its scopes; a
// negative actual is an error.
func (l *MemLedger) Settle(_ context.Context, id string, actual USD) error {
	if actual < 0 {
		return fmt.Errorf("budget: settle %q with a negative amount %s", id, actual)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.open[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownReservation, id)
	}
	delete(l.open, id)
	for _, sl := range r.Scopes {
		b := l.balance(sl.Scope)
		b.Reserved = b.Reserved.Sub(r.Amount)
		b.Settled = b.Settled.Add(actual)
	}
	return nil
}

// Release drops reservation id without spending.
func (l *MemLedger) Release(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.drop(id) {
		return fmt.Errorf("%w: %q", ErrUnknownReservation, id)
	}
	return nil
}

func (l *MemLedger) drop(id string) bool {
	r, ok := l.open[id]
	if !ok {
		return false
	}
	delete(l.open, id)
	for _, sl := range r.Scopes {
		b := l.balance(sl.Scope)
		b.Reserved = b.Reserved.Sub(r.Amount)
	}
	return true
}

// ExpireReservations releases every reservation whose ExpiresAt is before
// now. A zero ExpiresAt never expires.
func (l *MemLedger) ExpireReservations(_ context.Context, now time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for id, r := range l.open {
		if !r.ExpiresAt.IsZero() && r.ExpiresAt.Before(now) {
			l.drop(id)
			n++
		}
	}
	return n, nil
}

// Renew moves the expiry of the open reservations in ids to expiresAt.
func (l *MemLedger) Renew(_ context.Context, ids []string, expiresAt time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if r, ok := l.open[id]; ok {
			r.ExpiresAt = expiresAt
			l.open[id] = r
		}
	}
	return nil
}

// Forget deletes the balances and alert marks of scopes (a pruned run's);
// reservations are kept.
func (l *MemLedger) Forget(scopes ...Scope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range scopes {
		delete(l.balances, s)
		for k := range l.alerts {
			if k.scope == s {
				delete(l.alerts, k)
			}
		}
	}
}

// Balance returns the state of s (zero for an unknown scope).
func (l *MemLedger) Balance(_ context.Context, s Scope) (Balance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.balances[s]; ok {
		return *b, nil
	}
	return Balance{Scope: s}, nil
}

// MarkAlert records threshold for s and reports whether it is the first time.
func (l *MemLedger) MarkAlert(_ context.Context, s Scope, threshold float64) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := alertKey{s, threshold}
	if l.alerts[k] {
		return false, nil
	}
	l.alerts[k] = true
	return true, nil
}
