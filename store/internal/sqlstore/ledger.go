package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/codec"
)

// Reservation outcomes kept in budget_closed.
const (
	closedSettled  = "settled"
	closedReleased = "released"
	closedExpired  = "expired"
	closedSpent    = "spent" // a Spend with an ID
)

// reserveScope adds amount to a scope's reserved money if it fits; a scope
// seen for the first time is created (the caller has checked that amount
// fits an empty scope). It changes no row when the amount does not fit.
const reserveScope = `INSERT INTO budget_scopes (scope, settled, reserved) VALUES ($1, 0, $2)
	ON CONFLICT (scope) DO UPDATE SET reserved = budget_scopes.reserved + excluded.reserved
	WHERE CAST($3 AS BIGINT) <= 0
		OR budget_scopes.settled + budget_scopes.reserved + excluded.reserved <= CAST($3 AS BIGINT)`

// Reserve holds r.Amount in every scope of r, or in none (an error wrapping
// budget.ErrExceeded names the first scope that refused). Scopes are locked
// in name order. An id reserved before (even if since settled, released or
// expired) is store.ErrConflict; a negative amount, an empty id or scope and
// a repeated scope are errors. A zero ExpiresAt never expires.
func (c *Core) Reserve(ctx context.Context, r budget.Reservation) error {
	return c.ReserveAll(ctx, []budget.Reservation{r})
}

// ReserveAll holds every reservation of rs in one transaction, or none of
// them (see budget.BatchLedger); each is checked as by Reserve, in order.
func (c *Core) ReserveAll(ctx context.Context, rs []budget.Reservation) error {
	if len(rs) == 0 {
		return nil
	}
	op := reserveOp(rs[0].ID)
	all := make([][]budget.ScopeLimit, len(rs))
	for i, r := range rs {
		op := reserveOp(r.ID)
		scopes, err := codec.Scopes(r)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", c.name, op, err)
		}
		for _, s := range scopes {
			if !codec.Fits(s.Limit, r.Amount) {
				return fmt.Errorf("%s: %s: %w", c.name, op, codec.Exceeded(r.ID, s, r.Amount))
			}
		}
		all[i] = scopes
	}
	return c.write(ctx, op, func(tx Tx) error {
		for i, r := range rs {
			if err := c.reserve(ctx, tx, r, all[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// reserveOp names the reservation id in errors: "reserve ID", or
// "reserve" for a spend kept under no id.
func reserveOp(id string) string {
	if id == "" {
		return "reserve"
	}
	return "reserve " + id
}

// spendScope adds amount to a scope's settled money if it fits (a
// budget.Reservation with Spend), like reserveScope.
const spendScope = `INSERT INTO budget_scopes (scope, settled, reserved) VALUES ($1, $2, 0)
	ON CONFLICT (scope) DO UPDATE SET settled = budget_scopes.settled + excluded.settled
	WHERE CAST($3 AS BIGINT) <= 0
		OR budget_scopes.settled + budget_scopes.reserved + excluded.settled <= CAST($3 AS BIGINT)`

// reserve holds r in its sorted scopes inside tx; a Spend reservation is
// added to the scopes' settled money and leaves no row of its own.
func (c *Core) reserve(ctx context.Context, tx Tx, r budget.Reservation, scopes []budget.ScopeLimit) error {
	if r.Spend {
		for _, s := range scopes {
			n, err := tx.Exec(ctx, spendScope, string(s.Scope), int64(r.Amount), int64(s.Limit))
			if err != nil {
				return err
			}
			if n == 0 {
				return codec.Exceeded(r.ID, s, r.Amount)
			}
		}
		if r.ID == "" {
			return nil
		}
		n, err := tx.Exec(ctx, `INSERT INTO budget_closed (id, owner, scopes, reserved, actual, outcome)
			VALUES ($1, $2, $3, $4, $4, $5) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Owner, codec.ScopeNames(scopes), int64(r.Amount), closedSpent)
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: reservation id %q was used before", store.ErrConflict, r.ID)
		}
		return err
	}
	for _, s := range scopes {
		n, err := tx.Exec(ctx, reserveScope, string(s.Scope), int64(r.Amount), int64(s.Limit))
		if err != nil {
			return err
		}
		if n == 0 {
			return codec.Exceeded(r.ID, s, r.Amount)
		}
	}
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM budget_closed WHERE id = $1`, r.ID).Scan(&one)
	if err == nil {
		return fmt.Errorf("%w: reservation id %q was used before", store.ErrConflict, r.ID)
	}
	if !errors.Is(err, ErrNoRows) {
		return err
	}
	n, err := tx.Exec(ctx, `INSERT INTO budget_reservations (id, owner, scopes, amount, expires_ns)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
		r.ID, r.Owner, codec.ScopeNames(scopes), int64(r.Amount), codec.NS(r.ExpiresAt))
	if err == nil && n == 0 {
		err = fmt.Errorf("%w: reservation id %q is already open", store.ErrConflict, r.ID)
	}
	return err
}

// Settle replaces the reservation id by actual (≥ 0, may exceed the amount
// reserved) in all of its scopes.
func (c *Core) Settle(ctx context.Context, id string, actual budget.USD) error {
	op := "settle " + id
	if actual < 0 {
		return fmt.Errorf("%s: %s: %w: actual spend %v is negative", c.name, op, codec.ErrInvalid, actual)
	}
	return c.write(ctx, op, func(tx Tx) error { return c.close(ctx, tx, id, closedSettled, actual) })
}

// Release drops the reservation id without spending.
func (c *Core) Release(ctx context.Context, id string) error {
	return c.write(ctx, "release "+id, func(tx Tx) error { return c.close(ctx, tx, id, closedReleased, 0) })
}

// close ends one open reservation inside tx: it moves its amount out of
// reserved (and actual into settled) in each scope, in scope order.
func (c *Core) close(ctx context.Context, tx Tx, id, outcome string, actual budget.USD) error {
	var (
		owner, names string
		amount       int64
	)
	err := tx.QueryRow(ctx, `DELETE FROM budget_reservations WHERE id = $1 RETURNING owner, scopes, amount`, id).
		Scan(&owner, &names, &amount)
	if errors.Is(err, ErrNoRows) {
		return fmt.Errorf("%w: %q", budget.ErrUnknownReservation, id)
	}
	if err != nil {
		return err
	}
	scopes, err := codec.ParseScopeNames(names)
	if err != nil {
		return err
	}
	for _, s := range scopes {
		if _, err := tx.Exec(ctx, `UPDATE budget_scopes SET reserved = reserved - $2, settled = settled + $3
			WHERE scope = $1`, s, amount, int64(actual)); err != nil {
			return err
		}
	}
	_, err = tx.Exec(ctx, `INSERT INTO budget_closed (id, owner, scopes, reserved, actual, outcome)
		VALUES ($1, $2, $3, $4, $5, $6)`, id, owner, names, amount, int64(actual), outcome)
	return err
}

// Renew moves the expiry of the open reservations in ids to expiresAt, in
// one transaction; ids not open are skipped.
func (c *Core) Renew(ctx context.Context, ids []string, expiresAt time.Time) error {
	if len(ids) == 0 {
		return c.open("renew reservations")
	}
	return c.write(ctx, fmt.Sprintf("renew %d reservations", len(ids)), func(tx Tx) error {
		for _, id := range ids {
			if _, err := tx.Exec(ctx, `UPDATE budget_reservations SET expires_ns = $2 WHERE id = $1`, id, expiresAt.UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
}

// ExpireReservations releases every reservation whose ExpiresAt is before
// now, in one transaction, and returns how many it released.
func (c *Core) ExpireReservations(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := c.write(ctx, "expire reservations", func(tx Tx) error {
		n = 0
		ids, err := queryIDs(ctx, tx, `SELECT id FROM budget_reservations WHERE expires_ns < $1 ORDER BY id`+c.skip,
			now.UnixNano())
		if err != nil {
			return err
		}
		slices.Sort(ids)
		for _, id := range ids {
			if err := c.close(ctx, tx, id, closedExpired, 0); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// Balance returns the state of s (zero for a scope never reserved in).
func (c *Core) Balance(ctx context.Context, s budget.Scope) (budget.Balance, error) {
	op := fmt.Sprintf("balance %s", s)
	db, err := c.read(op)
	if err != nil {
		return budget.Balance{}, err
	}
	var settled, reserved int64
	err = db.QueryRow(ctx, `SELECT settled, reserved FROM budget_scopes WHERE scope = $1`, string(s)).
		Scan(&settled, &reserved)
	if errors.Is(err, ErrNoRows) {
		return budget.Balance{Scope: s}, nil
	}
	if err != nil {
		return budget.Balance{}, c.fail(op, err)
	}
	return budget.Balance{Scope: s, Settled: budget.USD(settled), Reserved: budget.USD(reserved)}, nil
}

// MarkAlert records threshold for s and reports whether it is the first time.
func (c *Core) MarkAlert(ctx context.Context, s budget.Scope, threshold float64) (bool, error) {
	var first bool
	err := c.write(ctx, fmt.Sprintf("mark alert %s %v", s, threshold), func(tx Tx) error {
		n, err := tx.Exec(ctx, `INSERT INTO budget_alerts (scope, threshold) VALUES ($1, $2)
			ON CONFLICT (scope, threshold) DO NOTHING`, string(s), threshold)
		first = n == 1
		return err
	})
	return first, err
}
