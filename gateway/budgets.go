package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/run"
)

// BudgetStatus is one tenant's spend in its current budget period, as the
// ledger holds it (every gateway sharing the store counts there).
// Amounts are decimal dollars, exact, as X-Belay-Cost-Usd gives them.
type BudgetStatus struct {
	Tenant string `json:"tenant"`
	// Period is "day" or "month" (UTC); Scope the period's ledger scope
	// ("tenant:acme:2026-12").
	Period string `json:"period"`
	Scope  string `json:"scope"`
	// LimitUSD is the budget per period, "none" when it has none;
	// LeftUSD what it leaves after the spent and the held, "none" then too
	// (and "0" once used up).
	LimitUSD string `json:"limit_usd"`
	SpentUSD string `json:"spent_usd"`
	// HeldUSD is reserved by calls in flight (or settles not yet written).
	HeldUSD string    `json:"held_usd"`
	LeftUSD string    `json:"left_usd"`
	Ends    time.Time `json:"ends"`
}

// Budgets returns, for each of cfg's tenants (the open gateway's
// "default" when it has none), its spend in the budget period holding now,
// read from ledger. An error reading a scope is returned with the
// tenant's name. Safe for concurrent use as the ledger is.
func Budgets(ctx context.Context, cfg *config.Config, ledger budget.Ledger, now time.Time) ([]BudgetStatus, error) {
	names := tenantNames(cfg)
	if len(names) == 0 {
		names = []string{run.DefaultTenant} // the open gateway's one tenant
	}
	budgets := tenantBudgets(cfg) // as the runs are bounded
	out := make([]BudgetStatus, 0, len(names))
	for _, name := range names {
		tb, _ := budgets(name)
		p := tb.Period
		if p != budget.Day {
			p = budget.Month // as TenantScope counts any other
		}
		scope := budget.TenantScope(name, p, now)
		b, err := ledger.Balance(ctx, scope)
		if err != nil {
			return nil, fmt.Errorf("gateway: budget of tenant %s: %w", name, err)
		}
		st := BudgetStatus{Tenant: name, Period: string(p), Scope: string(scope), LimitUSD: "none",
			SpentUSD: b.Settled.Decimal(), HeldUSD: b.Reserved.Decimal(), LeftUSD: "none", Ends: p.End(now)}
		if tb.Limit > 0 {
			left := max(tb.Limit.Sub(b.Settled).Sub(b.Reserved), 0)
			st.LimitUSD, st.LeftUSD = tb.Limit.Decimal(), left.Decimal()
		}
		out = append(out, st)
	}
	return out, nil
}
