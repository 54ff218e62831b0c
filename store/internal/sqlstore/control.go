package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/codec"
)

const approvalColumns = `id, run_id, tenant, tool, arguments, state, requested_ns, decided_ns, decided_by, note`

func scanApproval(s interface{ Scan(...any) error }) (store.Approval, error) {
	var (
		a                  store.Approval
		state              string
		requested, decided *int64
	)
	if err := s.Scan(&a.ID, &a.RunID, &a.Tenant, &a.Tool, &a.Arguments, &state, &requested, &decided,
		&a.DecidedBy, &a.Note); err != nil {
		return store.Approval{}, err
	}
	a.State, a.Requested, a.Decided = store.ApprovalState(state), codec.Time(requested), codec.Time(decided)
	return a, nil
}

// CreateApproval stores a; an empty State is stored as pending, an existing
// id is store.ErrConflict.
func (c *Core) CreateApproval(ctx context.Context, a store.Approval) error {
	if a.ID == "" {
		return fmt.Errorf("%s: create approval: %w: empty id", c.name, codec.ErrInvalid)
	}
	if a.State == "" {
		a.State = store.ApprovalPending
	}
	if a.Arguments == nil {
		a.Arguments = []byte{}
	}
	return c.write(ctx, "create approval "+a.ID, func(tx Tx) error {
		n, err := tx.Exec(ctx, `INSERT INTO approvals (`+approvalColumns+`) VALUES (`+placeholders(10)+`)
			ON CONFLICT (id) DO NOTHING`, a.ID, a.RunID, a.Tenant, a.Tool, a.Arguments, string(a.State),
			codec.NS(a.Requested), codec.NS(a.Decided), a.DecidedBy, a.Note)
		if err == nil && n == 0 {
			err = store.ErrConflict
		}
		return err
	})
}

// GetApproval returns the approval id (store.ErrNotFound if absent).
func (c *Core) GetApproval(ctx context.Context, id string) (store.Approval, error) {
	op := "get approval " + id
	db, err := c.read(op)
	if err != nil {
		return store.Approval{}, err
	}
	a, err := scanApproval(db.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
	if errors.Is(err, ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Approval{}, c.fail(op, err)
	}
	return a, nil
}

// ListApprovals returns approvals in state (all when empty), oldest
// request first, then by id.
func (c *Core) ListApprovals(ctx context.Context, state store.ApprovalState) ([]store.Approval, error) {
	const op = "list approvals"
	db, err := c.read(op)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE $1 = '' OR state = $1
		ORDER BY requested_ns ASC NULLS FIRST, id ASC`, string(state))
	if err != nil {
		return nil, c.fail(op, err)
	}
	defer rows.Close()
	var out []store.Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, c.fail(op, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail(op, err)
	}
	return out, nil
}

// DecideApproval moves a pending approval to state once: an absent id is
// store.ErrNotFound, a decided one store.ErrConflict.
func (c *Core) DecideApproval(ctx context.Context, id string, state store.ApprovalState, by, note string, at time.Time) (store.Approval, error) {
	op := "decide approval " + id
	if err := codec.Decision(state); err != nil {
		return store.Approval{}, fmt.Errorf("%s: %s: %w", c.name, op, err)
	}
	var a store.Approval
	err := c.write(ctx, op, func(tx Tx) error {
		var err error
		a, err = scanApproval(tx.QueryRow(ctx, `UPDATE approvals SET state = $2, decided_ns = $3, decided_by = $4, note = $5
			WHERE id = $1 AND state = $6 RETURNING `+approvalColumns,
			id, string(state), codec.NS(at), by, note, string(store.ApprovalPending)))
		if !errors.Is(err, ErrNoRows) {
			return err
		}
		// Decided before: the approval as stored goes back with the
		// conflict, so that the caller can say by whom.
		a, err = scanApproval(tx.QueryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = $1`, id))
		if errors.Is(err, ErrNoRows) {
			return store.ErrNotFound
		}
		if err == nil {
			err = fmt.Errorf("%w: approval %s is already %s", store.ErrConflict, id, a.State)
		}
		return err
	})
	return a, err
}

// SetKill stores k, replacing a flag with the same target and name.
func (c *Core) SetKill(ctx context.Context, k store.Kill) error {
	return c.SetKillNotify(ctx, k, nil)
}

// SetKillNotify is SetKill with an extra statement run in the same
// transaction after the write (PostgreSQL: pg_notify); notify may be nil.
func (c *Core) SetKillNotify(ctx context.Context, k store.Kill, notify func(context.Context, Tx) error) error {
	op := fmt.Sprintf("set kill %s %s", k.Target, k.Name)
	if err := codec.KillTarget(k.Target, k.Name); err != nil {
		return fmt.Errorf("%s: %s: %w", c.name, op, err)
	}
	return c.write(ctx, op, func(tx Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO kills (target, name, reason, set_by, at_ns) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (target, name) DO UPDATE SET reason = excluded.reason, set_by = excluded.set_by,
			at_ns = excluded.at_ns`, string(k.Target), k.Name, k.Reason, k.By, codec.NS(k.At))
		if err == nil && notify != nil {
			err = notify(ctx, tx)
		}
		return err
	})
}

// ClearKill removes a flag; clearing an absent flag does nothing.
func (c *Core) ClearKill(ctx context.Context, target store.KillTarget, name string) error {
	return c.ClearKillNotify(ctx, target, name, nil)
}

// ClearKillNotify is ClearKill with an extra statement in the same
// transaction, run only when a flag was removed; notify may be nil.
func (c *Core) ClearKillNotify(ctx context.Context, target store.KillTarget, name string, notify func(context.Context, Tx) error) error {
	op := fmt.Sprintf("clear kill %s %s", target, name)
	if err := codec.KillTarget(target, name); err != nil {
		return fmt.Errorf("%s: %s: %w", c.name, op, err)
	}
	return c.write(ctx, op, func(tx Tx) error {
		n, err := tx.Exec(ctx, `DELETE FROM kills WHERE target = $1 AND name = $2`, string(target), name)
		if err == nil && n > 0 && notify != nil {
			err = notify(ctx, tx)
		}
		return err
	})
}

// ListKills returns every flag, oldest first, then by target and name.
func (c *Core) ListKills(ctx context.Context) ([]store.Kill, error) {
	const op = "list kills"
	db, err := c.read(op)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT target, name, reason, set_by, at_ns FROM kills
		ORDER BY at_ns ASC NULLS FIRST, target ASC, name ASC`)
	if err != nil {
		return nil, c.fail(op, err)
	}
	defer rows.Close()
	var out []store.Kill
	for rows.Next() {
		var (
			k      store.Kill
			target string
			at     *int64
		)
		if err := rows.Scan(&target, &k.Name, &k.Reason, &k.By, &at); err != nil {
			return nil, c.fail(op, err)
		}
		k.Target, k.At = store.KillTarget(target), codec.Time(at)
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail(op, err)
	}
	return out, nil
}

// SaveGolden stores (or replaces) the golden trace name.
func (c *Core) SaveGolden(ctx context.Context, name, runID string, canonical []byte) error {
	if name == "" {
		return fmt.Errorf("%s: save golden: %w: empty name", c.name, codec.ErrInvalid)
	}
	if canonical == nil {
		canonical = []byte{}
	}
	return c.write(ctx, "save golden "+name, func(tx Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO goldens (name, run_id, canonical) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET run_id = excluded.run_id, canonical = excluded.canonical`,
			name, runID, canonical)
		return err
	})
}

// ListGoldens returns every stored golden, by name ascending.
func (c *Core) ListGoldens(ctx context.Context) ([]store.GoldenInfo, error) {
	const op = "list goldens"
	db, err := c.read(op)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT name, run_id, length(canonical) FROM goldens ORDER BY name ASC`)
	if err != nil {
		return nil, c.fail(op, err)
	}
	defer rows.Close()
	var out []store.GoldenInfo
	for rows.Next() {
		var g store.GoldenInfo
		if err := rows.Scan(&g.Name, &g.RunID, &g.Bytes); err != nil {
			return nil, c.fail(op, err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail(op, err)
	}
	return out, nil
}

// DeleteGolden removes golden name (store.ErrNotFound if absent).
func (c *Core) DeleteGolden(ctx context.Context, name string) error {
	return c.write(ctx, "delete golden "+name, func(tx Tx) error {
		n, err := tx.Exec(ctx, `DELETE FROM goldens WHERE name = $1`, name)
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: golden %q", store.ErrNotFound, name)
		}
		return err
	})
}

// Golden returns the golden trace name (store.ErrNotFound if absent).
func (c *Core) Golden(ctx context.Context, name string) ([]byte, string, error) {
	op := "golden " + name
	db, err := c.read(op)
	if err != nil {
		return nil, "", err
	}
	var (
		canonical []byte
		runID     string
	)
	err = db.QueryRow(ctx, `SELECT canonical, run_id FROM goldens WHERE name = $1`, name).Scan(&canonical, &runID)
	if errors.Is(err, ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, "", c.fail(op, err)
	}
	return canonical, runID, nil
}
