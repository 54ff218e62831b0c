package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/codec"
)

// Stored states of an idempotency key; expiry is computed from lease_end_ns.
const (
	keyInFlight  = "in_flight"
	keyCompleted = "completed"
)

// Claim takes key for owner with a lease until now+lease when no record
// holds it (store.ClaimNew). Otherwise it reports the record: completed
// (with the stored result), in flight while its lease ends after now, or
// expired once the lease has ended (lease end ≤ now) without completion.
// Concurrent claims of one key give exactly one ClaimNew (the key is the
// table's primary key). A claim by the owner already holding the key is
// reported like any other (ClaimInFlight with Owner == owner).
func (c *Core) Claim(ctx context.Context, key, owner string, lease time.Duration, now time.Time) (store.Claim, error) {
	op := "claim " + key
	if key == "" || owner == "" {
		return store.Claim{}, fmt.Errorf("%s: %s: %w: empty key or owner", c.name, op, codec.ErrInvalid)
	}
	var cl store.Claim
	err := c.write(ctx, op, func(tx Tx) error {
		// A record can vanish between the insert and the read (Abandon by
		// its owner); then the insert is tried again.
		for range 3 {
			n, err := tx.Exec(ctx, `INSERT INTO idempotency (key, owner, state, lease_end_ns, is_error, claimed_ns)
				VALUES ($1, $2, $3, $4, FALSE, $5) ON CONFLICT (key) DO NOTHING`,
				key, owner, keyInFlight, codec.Lease(now, lease), now.UnixNano())
			if err != nil {
				return err
			}
			if n == 1 {
				cl = store.Claim{Key: key, State: store.ClaimNew, Owner: owner, LeaseEnd: now.Add(lease).UTC()}
				return nil
			}
			cl, err = readClaim(ctx, tx, key, now)
			if !errors.Is(err, ErrNoRows) {
				return err
			}
		}
		return fmt.Errorf("%w: key %q keeps changing", store.ErrConflict, key)
	})
	return cl, err
}

// Lookup reports key's state at now without taking it (see Claim);
// store.ErrNotFound when no record holds it.
func (c *Core) Lookup(ctx context.Context, key string, now time.Time) (store.Claim, error) {
	op := "look up " + key
	db, err := c.read(op)
	if err != nil {
		return store.Claim{}, err
	}
	cl, err := readClaim(ctx, db, key, now)
	if errors.Is(err, ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Claim{}, c.fail(op, err)
	}
	return cl, nil
}

func readClaim(ctx context.Context, tx Tx, key string, now time.Time) (store.Claim, error) {
	var (
		state   string
		leaseNS int64
		cl      = store.Claim{Key: key}
	)
	err := tx.QueryRow(ctx, `SELECT owner, state, lease_end_ns, result, is_error FROM idempotency WHERE key = $1`, key).
		Scan(&cl.Owner, &state, &leaseNS, &cl.Result, &cl.IsError)
	if err != nil {
		return store.Claim{}, err
	}
	cl.LeaseEnd = codec.Time(&leaseNS)
	switch {
	case state == keyCompleted:
		cl.State = store.ClaimCompleted
	case leaseNS > now.UnixNano():
		cl.State = store.ClaimInFlight
	default:
		cl.State = store.ClaimExpired
	}
	if cl.State != store.ClaimCompleted {
		cl.Result = nil
	}
	return cl, nil
}

// TakeOver gives an expired key (in flight, lease end ≤ now) to owner with a
// new lease; any other key, absent ones included, is store.ErrConflict.
func (c *Core) TakeOver(ctx context.Context, key, owner string, lease time.Duration, now time.Time) (store.Claim, error) {
	op := "take over " + key
	if owner == "" {
		return store.Claim{}, fmt.Errorf("%s: %s: %w: empty owner", c.name, op, codec.ErrInvalid)
	}
	err := c.write(ctx, op, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE idempotency SET owner = $2, lease_end_ns = $3, claimed_ns = $4
			WHERE key = $1 AND state = $5 AND lease_end_ns <= $4`,
			key, owner, codec.Lease(now, lease), now.UnixNano(), keyInFlight)
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: key %q is not expired", store.ErrConflict, key)
		}
		return err
	})
	if err != nil {
		return store.Claim{}, err
	}
	return store.Claim{Key: key, State: store.ClaimNew, Owner: owner, LeaseEnd: now.Add(lease).UTC()}, nil
}

// Complete stores the effect's result. Only the owner of an in-flight key
// may complete it, even after its lease ended if nobody took it over;
// anything else is store.ErrConflict.
func (c *Core) Complete(ctx context.Context, key, owner string, result []byte, isError bool) error {
	if result == nil {
		result = []byte{}
	}
	return c.write(ctx, "complete "+key, func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE idempotency SET state = $3, result = $4, is_error = $5
			WHERE key = $1 AND owner = $2 AND state = $6`, key, owner, keyCompleted, result, isError, keyInFlight)
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: key %q is not in flight for owner %q", store.ErrConflict, key, owner)
		}
		return err
	})
}

// Abandon deletes an in-flight key held by owner (store.ErrConflict
// otherwise), so a later Claim is ClaimNew.
func (c *Core) Abandon(ctx context.Context, key, owner string) error {
	return c.write(ctx, "abandon "+key, func(tx Tx) error {
		n, err := tx.Exec(ctx, `DELETE FROM idempotency WHERE key = $1 AND owner = $2 AND state = $3`,
			key, owner, keyInFlight)
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: key %q is not in flight for owner %q", store.ErrConflict, key, owner)
		}
		return err
	})
}
