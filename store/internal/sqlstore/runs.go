package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/codec"
)

const runColumns = `id, tenant, agent, agent_version, prompt_version, labels,
	max_turns, deadline_ns, max_tokens, max_cost, status, stop_reason, error,
	started_ns, ended_ns, turns, tool_calls, input_tokens, output_tokens, cost, cost_estimated`

func runArgs(r store.Run) []any {
	return []any{r.ID, r.Tenant, r.Agent, r.AgentVersion, r.PromptVersion, codec.Labels(r.Labels),
		int64(r.Limits.MaxTurns), int64(r.Limits.Deadline), r.Limits.MaxTokens, int64(r.Limits.MaxCost),
		string(r.Status), r.StopReason, r.Error, codec.NS(r.Started), codec.NS(r.Ended),
		int64(r.Turns), int64(r.ToolCalls), r.InputTokens, r.OutputTokens, int64(r.Cost), boolInt(r.CostEstimated)}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func scanRun(s interface{ Scan(...any) error }) (store.Run, error) {
	var (
		r                                                  store.Run
		labels                                             *string
		maxTurns, deadline, maxCost, turns, tools, co, est int64
		status                                             string
		started, ended                                     *int64
	)
	err := s.Scan(&r.ID, &r.Tenant, &r.Agent, &r.AgentVersion, &r.PromptVersion, &labels,
		&maxTurns, &deadline, &r.Limits.MaxTokens, &maxCost, &status, &r.StopReason, &r.Error,
		&started, &ended, &turns, &tools, &r.InputTokens, &r.OutputTokens, &co, &est)
	if err != nil {
		return store.Run{}, err
	}
	if r.Labels, err = codec.ParseLabels(labels); err != nil {
		return store.Run{}, err
	}
	r.Limits.MaxTurns, r.Limits.MaxCost = int(maxTurns), budget.USD(maxCost)
	r.Limits.Deadline = timeDuration(deadline)
	r.Status, r.Started, r.Ended = store.RunStatus(status), codec.Time(started), codec.Time(ended)
	r.Turns, r.ToolCalls, r.Cost, r.CostEstimated = int(turns), int(tools), budget.USD(co), est != 0
	return r, nil
}

var createRunQuery = `INSERT INTO runs (` + runColumns + `) VALUES (` + placeholders(21) + `) ON CONFLICT (id) DO NOTHING`

// CreateRun inserts r; an existing id is store.ErrConflict.
func (c *Core) CreateRun(ctx context.Context, r store.Run) error {
	if r.ID == "" {
		return fmt.Errorf("%s: create run: %w: empty id", c.name, codec.ErrInvalid)
	}
	return c.write(ctx, "create run "+r.ID, func(tx Tx) error {
		n, err := tx.Exec(ctx, createRunQuery, runArgs(r)...)
		if err == nil && n == 0 {
			err = store.ErrConflict
		}
		return err
	})
}

// CreateRunSpent creates r and applies spends in one transaction (see
// store.RunSpender).
func (c *Core) CreateRunSpent(ctx context.Context, r store.Run, spends []budget.Reservation) error {
	if r.ID == "" {
		return fmt.Errorf("%s: create run: %w: empty id", c.name, codec.ErrInvalid)
	}
	all := make([][]budget.ScopeLimit, len(spends))
	for i, sp := range spends {
		if !sp.Spend {
			return fmt.Errorf("%s: create run %s: %w: reservation %q is not a spend", c.name, r.ID, codec.ErrInvalid, sp.ID)
		}
		scopes, err := codec.Scopes(sp)
		if err != nil {
			return fmt.Errorf("%s: create run %s: %w", c.name, r.ID, err)
		}
		all[i] = scopes
	}
	return c.write(ctx, "create run "+r.ID, func(tx Tx) error {
		n, err := tx.Exec(ctx, createRunQuery, runArgs(r)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return store.ErrConflict
		}
		for i, sp := range spends {
			sp.ID = "" // applied to its scopes only: the record makes the write safe to repeat
			if err := c.reserve(ctx, tx, sp, all[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// saveRunQuery is UpdateRun's statement with the turn count and cost raised
// to the ledger's, the token counts never lowered, the tenant and start
// kept, and no write of a running record over an ended one. saveRunArgs are the indexes in runArgs of its
// parameters $1..$N; $N+1 is the turn scope, $N+2 the cost scope.
var saveRunQuery, saveRunArgs = func() (string, []int) {
	cols := strings.Split(runColumns, ",")
	args := []int{0} // $1: id
	param := func(i int) string {
		args = append(args, i)
		return fmt.Sprintf("$%d", len(args))
	}
	var sets []string
	var status, turns, cost string
	for i, col := range cols {
		switch col = strings.TrimSpace(col); col {
		case "id", "tenant", "started_ns":
			// A run keeps its tenant and start from its creation; each is
			// in an index, and SQLite rewrites an index entry for every
			// column SET.
		case "turns":
			turns = param(i)
		case "cost":
			cost = param(i)
		case "input_tokens", "output_tokens", "cost_estimated":
			// Never lowered: each process raises the token counts to the
			// ledger's before it writes (see store.RunSaver), and one that
			// read the ledger earlier must not write over a later count;
			// a cost estimated by one process stays so.
			v := param(i)
			sets = append(sets, col+" = CASE WHEN "+col+" > CAST("+v+" AS BIGINT) THEN "+col+" ELSE CAST("+v+" AS BIGINT) END")
		case "status":
			status = param(i)
			sets = append(sets, "status = "+status)
		default:
			sets = append(sets, col+" = "+param(i))
		}
	}
	turnScope, costScope := fmt.Sprintf("$%d", len(args)+1), fmt.Sprintf("$%d", len(args)+2)
	sets = append(sets, `turns = CASE
				WHEN COALESCE((SELECT settled + reserved FROM budget_scopes WHERE scope = `+turnScope+`), 0) > CAST(`+turns+` AS BIGINT)
				THEN COALESCE((SELECT settled + reserved FROM budget_scopes WHERE scope = `+turnScope+`), 0)
				ELSE CAST(`+turns+` AS BIGINT) END`,
		`cost = CASE
				WHEN COALESCE((SELECT settled FROM budget_scopes WHERE scope = `+costScope+`), 0) > CAST(`+cost+` AS BIGINT)
				THEN COALESCE((SELECT settled FROM budget_scopes WHERE scope = `+costScope+`), 0)
				ELSE CAST(`+cost+` AS BIGINT) END`)
	return `UPDATE runs SET ` + strings.Join(sets, ", ") +
		` WHERE id = $1 AND (CAST(` + status + ` AS TEXT) <> 'running' OR status = 'running')`, args
}()

// SaveRun writes r raised to the ledger's counts, unless it would write a
// running record over an ended one (see store.RunSaver).
func (c *Core) SaveRun(ctx context.Context, r store.Run, turns, cost budget.Scope) error {
	all := runArgs(r)
	args := make([]any, 0, len(saveRunArgs)+2)
	for _, i := range saveRunArgs {
		args = append(args, all[i])
	}
	args = append(args, string(turns), string(cost))
	return c.write(ctx, "save run "+r.ID, func(tx Tx) error {
		n, err := tx.Exec(ctx, saveRunQuery, args...)
		if err != nil || n > 0 {
			return err
		}
		var status string
		err = tx.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, r.ID).Scan(&status)
		if errors.Is(err, ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%w (%s)", store.ErrRunEnded, status)
	})
}

// UpdateRun replaces the stored record of r.ID (store.ErrNotFound if absent).
func (c *Core) UpdateRun(ctx context.Context, r store.Run) error {
	cols := strings.Split(runColumns, ",")
	sets := make([]string, 0, len(cols)-1)
	for i, col := range cols[1:] {
		sets = append(sets, fmt.Sprintf("%s = $%d", strings.TrimSpace(col), i+2))
	}
	q := `UPDATE runs SET ` + strings.Join(sets, ", ") + ` WHERE id = $1`
	return c.write(ctx, "update run "+r.ID, func(tx Tx) error {
		n, err := tx.Exec(ctx, q, runArgs(r)...)
		if err == nil && n == 0 {
			err = store.ErrNotFound
		}
		return err
	})
}

// GetRun returns the run id (store.ErrNotFound if absent).
func (c *Core) GetRun(ctx context.Context, id string) (store.Run, error) {
	op := "get run " + id
	db, err := c.read(op)
	if err != nil {
		return store.Run{}, err
	}
	r, err := scanRun(db.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1`, id))
	if errors.Is(err, ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Run{}, c.fail(op, err)
	}
	return r, nil
}

// ListRuns returns the runs f selects, newest first (by start time, then id
// descending); f.Limit 0 means 100.
func (c *Core) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	db, err := c.read("list runs")
	if err != nil {
		return nil, err
	}
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Tenant != "" {
		add("tenant = $%d", f.Tenant)
	}
	if f.Agent != "" {
		add("agent = $%d", f.Agent)
	}
	if f.Status != "" {
		add("status = $%d", string(f.Status))
	}
	if !f.Since.IsZero() {
		add("started_ns >= $%d", f.Since.UnixNano())
	}
	if !f.Before.IsZero() {
		add("started_ns < $%d", f.Before.UnixNano())
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + runColumns + ` FROM runs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, int64(limit))
	q += fmt.Sprintf(` ORDER BY started_ns DESC, id DESC LIMIT $%d`, len(args))
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, c.fail("list runs", err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, c.fail("list runs", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail("list runs", err)
	}
	return out, nil
}

func placeholders(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", i)
	}
	return b.String()
}

func timeDuration(ns int64) time.Duration { return time.Duration(ns) }

// PruneRuns deletes up to max runs that ended before before, oldest
// first, with their spans and the ledger scopes scopes names (see
// store.RunPruner), in one transaction.
func (c *Core) PruneRuns(ctx context.Context, before time.Time, max int, scopes func(runID string) []budget.Scope) (int, error) {
	op := "prune runs"
	if max < 1 {
		return 0, fmt.Errorf("%s: %s: %w: max %d: want at least 1", c.name, op, codec.ErrInvalid, max)
	}
	n := 0
	err := c.write(ctx, op, func(tx Tx) error {
		n = 0
		cut := codec.NS(before)
		// started_ns < cut: a run that ended before the cut started
		// before it, and runs_by_started reads them oldest first.
		ids, err := queryIDs(ctx, tx, `SELECT id FROM runs WHERE started_ns < $1 AND status <> $2 AND ended_ns IS NOT NULL AND ended_ns < $1
			ORDER BY started_ns, id LIMIT $3`, cut, string(store.RunRunning), int64(max))
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.Exec(ctx, `DELETE FROM spans WHERE run_id = $1`, id); err != nil {
				return err
			}
			if scopes != nil {
				for _, s := range scopes(id) {
					if _, err := tx.Exec(ctx, `DELETE FROM budget_scopes WHERE scope = $1`, string(s)); err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, `DELETE FROM budget_alerts WHERE scope = $1`, string(s)); err != nil {
						return err
					}
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM runs WHERE id = $1`, id); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}
