// Package run bounds and records one execution of an agent task: limits on
// turns, wall time, tokens and money; a kill switch; tool calls with
// approval and idempotency; and a trace of every step.
//
// A Manager owns the live runs of one process. Start creates a run; Get
// finds it again (the gateway sees one run across many HTTP requests). Each
// model call or tool call is a step: Admit checks the run's limits in a
// fixed order and reserves its estimated cost before any spend, Settle
// charges what the step actually used, Fail releases the reservation. Call
// and Tool wrap that sequence for library users.
//
// A refusal is a *failure.Error of kind Fatal raised before any money is
// spent; a refusal for one of the run's limits (killed, max turns,
// deadline, budget) stops the run with that reason, keeping its counters and
// trace. A kill or the deadline also cancels the steps in flight; a turn
// or money refusal lets them finish, and they are charged. Other fatal errors (approval denied, tool disabled, outcome
// unknown) are returned to the agent, which ends the run with Finish.
package run

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// Store is what the run layer keeps: the budget ledger, run records,
// idempotency keys, approvals and kill flags. Every store.Store is one;
// store/memstore is one in memory. A Store that also implements
// store.KillWatcher pushes kill flags to the Manager at once; one that
// implements store.Spans receives the spans when Config.Sink is nil.
type Store interface {
	budget.Ledger
	store.Runs
	store.Idempotency
	store.Approvals
	store.Kills
}

// Defaults of Config fields left zero.
const (
	DefaultReservationTTL   = 15 * time.Minute
	DefaultIdempotencyLease = 5 * time.Minute
	DefaultKillPoll         = 50 * time.Millisecond
	DefaultExpireEvery      = time.Minute
	DefaultIdleTTL          = 10 * time.Minute
	DefaultStoreRetryFor    = time.Minute
)

// TenantBudget is a tenant's spending limit per period (UTC day or month).
type TenantBudget struct {
	// Limit is the most the tenant may spend per period; 0 means unlimited
	// (the spend is still recorded in the period's scope).
	Limit budget.USD
	// Period is budget.Day or budget.Month; "" means Month.
	Period budget.Period
	// AlertAt are fractions of Limit in (0, 1] at which an alert fires
	// once per period (for example 0.5, 0.8, 0.95).
	AlertAt []float64
}

// Policy says which tools need approval.
type Policy struct {
	// Irreversible are tool-name glob patterns (path.Match syntax, such as
	// "delete_*" or "issue_refund") whose calls wait for an approval. With
	// no Approver configured such a call is denied (default deny).
	Irreversible []string
	// ReadOnly are tool-name glob patterns of tools without side effects
	// (MCP's readOnlyHint): their calls are not deduplicated (see
	// ToolCall.ReadOnly). A tool that also matches Irreversible is not
	// read-only.
	ReadOnly []string
}

// NeedsApproval reports whether tool matches one of the Irreversible
// patterns. Malformed patterns match nothing (NewManager rejects them).
func (p Policy) NeedsApproval(tool string) bool { return matchTool(p.Irreversible, tool) }

// IsReadOnly reports whether tool matches one of the ReadOnly patterns
// and none of the Irreversible ones.
func (p Policy) IsReadOnly(tool string) bool {
	return matchTool(p.ReadOnly, tool) && !p.NeedsApproval(tool)
}

func matchTool(patterns []string, tool string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, tool); ok {
			return true
		}
	}
	return false
}

// Config configures a Manager. Only Store is required; the zero value of
// every other field means its default.
type Config struct {
	// Store keeps runs, the ledger, idempotency keys, approvals and kill
	// flags. Required.
	Store Store
	// Pricing prices usage; nil means budget.DefaultPricing(). A model
	// without a price is charged its reserved estimate and the cost is
	// marked estimated; it is never charged $0.
	Pricing *budget.Pricing
	// Sink receives spans. When nil, spans are written synchronously to
	// Store if it implements store.Spans, and dropped otherwise; production
	// use wants the batching recorder of package trace.
	Sink trace.Sink
	// Now is the clock; nil means time.Now. Deadlines are measured with it.
	Now func() time.Time
	// Owner names this process in reservations and idempotency claims;
	// default "belay-" and 8 random hex digits.
	Owner string
	// ReservationTTL is how long a step's reservation lives unsettled
	// before a janitor releases it (a stopped process leaves nothing
	// reserved for long). Default 15 minutes. The process holding the
	// step renews its reservation every ExpireEvery (Ledger.Renew), so a
	// call that runs longer keeps its money held.
	ReservationTTL time.Duration
	// IdempotencyLease is how long a tool call holds its idempotency key
	// before another process may see it as expired. Default 5 minutes.
	IdempotencyLease time.Duration
	// KillPoll is the interval at which kill flags are read from Store;
	// default 50ms, negative disables polling (Kill and a KillWatcher still
	// work).
	KillPoll time.Duration
	// ExpireEvery is the interval of the reservation janitor; default 1
	// minute, negative disables it.
	ExpireEvery time.Duration
	// TenantBudgets are per-tenant limits by tenant name; TenantBudget,
	// when set, is asked instead.
	TenantBudgets map[string]TenantBudget
	TenantBudget  func(tenant string) (TenantBudget, bool)
	// RunAlertAt are fractions of a run's MaxCost at which an alert fires
	// once per run.
	RunAlertAt []float64
	// Approver decides approvals for irreversible tools; nil denies them.
	Approver Approver
	// Policy names the irreversible tools.
	Policy Policy
	// OnAlert is called once per crossed threshold, after the settle that
	// crossed it, outside any lock, on a background goroutine of the
	// Manager (Run.Flush and Manager.Flush wait for it, so it must not
	// call them).
	OnAlert func(budget.Alert)
	// Rand returns uniform draws in [0, 1) for tool retry jitter; default
	// math/rand/v2.Float64.
	Rand func() float64
	// IdleTTL is how long a running run may go without a step admitted or
	// open before the Manager drops it from memory (it stays in the store
	// and Get reloads it). Default 10 minutes; negative keeps idle runs
	// until they end. Ended runs are dropped once their record is written.
	IdleTTL time.Duration
	// EndIdle ends a running run when it is dropped for being idle, instead
	// of leaving it running in the store: succeeded when its last model
	// step succeeded, failed otherwise, with the error "idle for IdleTTL".
	// The gateway sets it: its clients never say that a run is over.
	EndIdle bool
	// FirstStepInMemory admits the first model step of a Spec.Fresh run
	// in memory (see Spec.Fresh). Set it only when no other process serves
	// runs from this store: the id goes out in the first response, and a
	// process that received it before the first step's ledger entries
	// landed would start the run anew. The gateway sets it for SQLite and
	// memory stores, not for PostgreSQL (shared by replicas).
	FirstStepInMemory bool
	// StoreRetryFor bounds the background retries of a store write that
	// failed (a run record), with backoff from 100ms to
	// 5s. Default 1 minute; negative disables retries (the error is
	// returned). A ledger settle of money or tokens already used is
	// retried until Close instead, its reservation renewed meanwhile:
	// given up, the spend would be lost from the ledger.
	StoreRetryFor time.Duration
	// Logger receives store write failures (WARN per failed try, ERROR
	// when one is given up); nil means slog.Default().
	Logger *slog.Logger
}

func (c Config) validate() error {
	if c.Store == nil {
		return errors.New("run: config.store is required")
	}
	for i, p := range c.Policy.Irreversible {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("run: policy.irreversible[%d] %q: %w", i, p, err)
		}
	}
	for i, p := range c.Policy.ReadOnly {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("run: policy.read_only[%d] %q: %w", i, p, err)
		}
	}
	check := func(field string, ths []float64) error {
		for i, th := range ths {
			if th <= 0 || th > 1 {
				return fmt.Errorf("run: %s[%d] = %v is outside (0, 1]", field, i, th)
			}
		}
		return nil
	}
	if err := check("run_alert_at", c.RunAlertAt); err != nil {
		return err
	}
	for name, tb := range c.TenantBudgets {
		if _, err := budget.ParsePeriod(string(tb.Period)); err != nil {
			return fmt.Errorf("run: tenant %q: %w", name, err)
		}
		if err := check("tenant "+name+" alert_at", tb.AlertAt); err != nil {
			return err
		}
		if tb.Limit < 0 {
			return fmt.Errorf("run: tenant %q: negative limit %s", name, tb.Limit)
		}
	}
	for _, d := range []time.Duration{c.ReservationTTL, c.IdempotencyLease} {
		if d < 0 {
			return fmt.Errorf("run: negative duration %v in config", d)
		}
	}
	return nil
}

func (c Config) tenantBudget(tenant string) (TenantBudget, bool) {
	if c.TenantBudget != nil {
		return c.TenantBudget(tenant)
	}
	tb, ok := c.TenantBudgets[tenant]
	return tb, ok
}
