package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/route"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
)

// DefaultReserveOutputTokens is the output size reserved for a call that
// sets no output limit (OpenAI max_tokens / max_completion_tokens unset):
// the reservation needs a bound, and the settle charges the real usage.
const DefaultReserveOutputTokens = 4096

// RunTurns adapts a *run.Manager to Turns. pricing must be the table the
// Manager prices with (nil: budget.DefaultPricing()); it prices each
// deployment of a call's chain so the reservation covers the costliest.
//
// A run is started on its first request (with the tenant and the
// request's effective limits, which later requests of the run cannot
// change) and resumed on the next ones. A run id that belongs to another
// tenant is refused with permission_denied. A refusal by the run itself
// (its limits, a kill, its end) carries the run's limits, for
// X-Belay-Limits-Overridden.
func RunTurns(m *run.Manager, pricing *budget.Pricing) Turns {
	if pricing == nil {
		pricing = budget.DefaultPricing()
	}
	return &runTurns{m: m, pricing: pricing}
}

type runTurns struct {
	m       *run.Manager
	pricing *budget.Pricing
}

// Killer is implemented by a Turns that applies kill flags itself (at once
// in this process, before the admin call returns). The admin API uses it
// when present, and writes the store directly otherwise.
type Killer interface {
	SetKill(ctx context.Context, k store.Kill) error
	Unkill(ctx context.Context, target store.KillTarget, name string) error
}

// Disabler is implemented by a Turns that knows which deployments an
// operator disabled (kill flags on a deployment, or on the model it
// serves); the router passes over them, and a call none can serve is
// refused naming the flags.
type Disabler interface {
	// Disabled returns the kill flag that disables d (its deployment's
	// first, else its model's) and true; false when none does.
	Disabled(d route.Deployment) (store.Kill, bool)
	// AliasDisabled returns the kill flag on the model alias clients
	// name, and true; false when there is none.
	AliasDisabled(alias string) (store.Kill, bool)
	// TenantDisabled returns the kill flag that stops every call of
	// tenant (the all flag first, else the tenant's), and true; false
	// when there is none. For calls that are in no run (count_tokens).
	TenantDisabled(tenant string) (store.Kill, bool)
}

// noter is implemented by a Turns that can record an event on a run it
// holds (run.Manager.Note): the gateway notes a named run's requests that
// it refused before they counted in the run.
type noter interface {
	Note(runID, tenant, name string, attrs map[string]any) bool
}

// Note records an event on run id's span if this process holds the run
// and it is tenant's.
func (t *runTurns) Note(runID, tenant, name string, attrs map[string]any) bool {
	return t.m.Note(runID, tenant, name, attrs)
}

// runStats is implemented by a Turns that reports its run manager's
// counters (runs in memory, store writes retried and given up).
type runStats interface {
	Stats() run.Stats
}

// Stats returns the run manager's counters.
func (t *runTurns) Stats() run.Stats { return t.m.Stats() }

// Holds reports whether this process holds run id (see run.Manager.Holds).
func (t *runTurns) Holds(id string) bool { return t.m.Holds(id) }

// AliasDisabled returns the kill flag on model alias alias.
func (t *runTurns) AliasDisabled(alias string) (store.Kill, bool) {
	return t.m.Killed(store.KillModel, alias)
}

// TenantDisabled returns the all flag, else the flag on tenant.
func (t *runTurns) TenantDisabled(tenant string) (store.Kill, bool) {
	if k, ok := t.m.Killed(store.KillAll, ""); ok {
		return k, true
	}
	return t.m.Killed(store.KillTenant, tenant)
}

// Disabled returns the kill flag on d, else the one on its model.
func (t *runTurns) Disabled(d route.Deployment) (store.Kill, bool) {
	if k, ok := t.m.Killed(store.KillDeployment, d.Name); ok {
		return k, true
	}
	return t.m.Killed(store.KillModel, d.Model)
}

func (t *runTurns) SetKill(ctx context.Context, k store.Kill) error { return t.m.SetKill(ctx, k) }

func (t *runTurns) Unkill(ctx context.Context, target store.KillTarget, name string) error {
	return t.m.Unkill(ctx, target, name)
}

// gatewayLabels label the runs the gateway starts (run.Manager.Start
// copies them).
var gatewayLabels = map[string]string{"source": "gateway"}

func (t *runTurns) Admit(ctx context.Context, a Admission) (Turn, error) {
	var r *run.Run
	err := store.ErrNotFound
	if !a.Named { // a run id the gateway just made is new: no lookup
		r, err = t.m.Get(ctx, a.RunID)
	}
	if errors.Is(err, store.ErrNotFound) {
		spec := run.Spec{ID: a.RunID, Tenant: a.Tenant, Agent: a.Agent, Limits: storeLimits(a.Limits), Labels: gatewayLabels}
		if a.Named {
			// A run the gateway named: a client groups calls into a run by
			// sending X-Belay-Run-Id, so this one is this call. It ends
			// with it, and its record (a new UUID's) is written once, in
			// the background, already ended.
			spec.Fresh, spec.Single = true, true
		}
		r, err = t.m.Start(ctx, spec)
		if errors.Is(err, store.ErrConflict) { // started by a concurrent request
			r, err = t.m.Get(ctx, a.RunID)
		}
	}
	if err != nil {
		return nil, err
	}
	if r.Tenant() != a.Tenant {
		return nil, refusal(failure.PermissionDenied, "run "+a.RunID+" belongs to another tenant")
	}
	out := cmp.Or(a.MaxOutputTokens, DefaultReserveOutputTokens)
	first := a.Chain[0]
	field := cmp.Or(a.OutputLimitField, "max_tokens")
	named := field // the refusal's own advice; a call that set no output limit gets the hint below instead
	if a.MaxOutputTokens == 0 {
		named = ""
	}
	adm, err := r.Admit(ctx, run.Step{Kind: run.KindModel, Provider: first.Provider, Model: first.Model,
		Alias: a.Alias, API: a.API, PromptTokens: a.PromptTokens, MaxOutputTokens: out, OutputLimitField: named,
		EstimatedCost: t.reserve(a.Chain, a.PromptTokens, out, a.CacheWrites, a.calls())})
	if fe := failure.As(err); fe != nil {
		switch {
		case fe.Reason == failure.BudgetExceeded && a.MaxOutputTokens == 0:
			// Most of such an estimate is the default output reservation.
			// The refusal stops the run: the advice is for the next one
			// (newcomer finding: the same run, retried with max_tokens,
			// was refused as stopped).
			fe = withHint(fe, fmt.Sprintf(" (a call without %s reserves %d output tokens; set %s to reserve less, in a new run: this refusal stops the run)",
				field, DefaultReserveOutputTokens, field))
		case fe.Reason == failure.RunEnded && r.Single():
			// A client that sent back the run id the gateway made for
			// one call.
			fe = withHint(fe, fmt.Sprintf(": an ended run takes no more calls, and a run whose id the gateway made (no %s sent) ends with its one call; to group calls in a run, send the same id of your own on each", HeaderRunID))
		case fe.Reason == failure.RunEnded:
			fe = withHint(fe, fmt.Sprintf(": an ended run takes no more calls (a run ends when its client ends it, POST %s{id}/end, or after its idle time without calls); send a new %s to start another", RunsAPIPath, HeaderRunID))
		}
		return nil, &runRefusal{fe: fe, limits: configLimits(r.Limits())}
	}
	if errors.Is(err, run.ErrNoEstimate) {
		// A run with a money limit (Stack.StartRun's spec) on a model
		// without a price: the config's own limits would have refused
		// it at load. Not the store's fault, and no retry helps.
		fe := &failure.Error{Kind: failure.Permanent, Reason: failure.InvalidRequest, NoRetry: true,
			Message: fmt.Sprintf("%s model %q has no price, so the run's money limit cannot hold for its calls: "+
				"add the model to the config's pricing, or run without a money limit", first.Provider, first.Model)}
		return nil, &runRefusal{fe: fe, limits: configLimits(r.Limits())}
	}
	if err != nil {
		return nil, err
	}
	deadline, _ := r.Deadline()
	return &runTurn{t: t, r: r, adm: adm, deadline: deadline, chain: a.Chain, prompt: a.PromptTokens, output: out, writes: a.CacheWrites,
		calls: a.calls()}, nil
}

// withHint returns a copy of fe with hint added to its message (the run
// layer's failure is not changed).
func withHint(fe *failure.Error, hint string) *failure.Error {
	c := *fe
	c.Message += hint
	return &c
}

// runRefusal is a refusal by an existing run (its limits, a kill, its
// end), with the run's limits. It unwraps to the *failure.Error.
type runRefusal struct {
	fe     *failure.Error
	limits config.Limits
}

func (e *runRefusal) Error() string { return e.fe.Error() }
func (e *runRefusal) Unwrap() error { return e.fe }

// reserve returns the amount to reserve for a call that may be served by
// any deployment of chain: the largest list-price estimate
// (budget.Pricing.EstimateWrites of the prompt, what it may write into
// the prompt cache and the output limit, plus the per-call fees of the
// built-in tool calls in calls) over the chain, since a fallback may land
// on the most expensive one. Deployments without a price count as
// 0; when none has one, it returns 0 and the run layer prices the first
// deployment itself.
func (t *runTurns) reserve(chain []route.Deployment, prompt, output int64, w budget.CacheWrites, calls budget.Usage) budget.USD {
	var most budget.USD
	for _, d := range chain {
		c, err := t.pricing.EstimateAsk(d.Provider, d.Model,
			budget.Ask{PromptTokens: prompt, MaxOutputTokens: output, Writes: w, Priority: calls.Priority})
		if err != nil {
			continue
		}
		if !calls.Empty() {
			if pr, _, err := t.pricing.Lookup(d.Provider, d.Model); err == nil {
				c = c.Add(pr.Cost(calls))
			}
		}
		most = max(most, c)
	}
	return most
}

// calls is the usage of the built-in tool calls a reserves the fees of:
// no tokens, only the counts, and the tier they are priced at.
func (a Admission) calls() budget.Usage {
	return budget.Usage{WebSearchCalls: max(a.WebSearches, 0), FileSearchCalls: max(a.FileSearches, 0), Priority: a.Priority}
}

// tierPricer is implemented by a Turns that prices calls (runTurns).
type tierPricer interface {
	// PricesPriority reports whether d's model has a priority price.
	PricesPriority(d route.Deployment) bool
}

// priorityPriced refuses a request for priority processing when a
// deployment of chain has no priority price: its calls would be billed
// above the price belay charges them at, and a run's money limits would
// not hold (an adversarial review: a priority answer charged at the
// standard price let a client spend 1.7× its limit). A Turns that does
// not price calls refuses nothing here.
func (s *Server) priorityPriced(chain []route.Deployment) *failure.Error {
	tp, ok := s.runs.(tierPricer)
	if !ok {
		return nil
	}
	for _, d := range chain {
		if !tp.PricesPriority(d) {
			return invalid(dialect.Field("service_tier", "%s", fmt.Sprintf("asks for priority processing, which OpenAI bills above its standard prices, "+
				"and belay has no priority price for model %q (deployment %s), so a money limit would not hold; send the request "+
				`without it, or with "default" or "flex", or price the model's priority tier in the gateway's config `+
				"(pricing: {%q: {priority: {input: …, cached_input: …, output: …}}})", d.Model, d.Name, d.Model)))
		}
	}
	return nil
}

// PricesPriority reports whether d's model has a priority price (see
// Server.priorityPriced).
func (t *runTurns) PricesPriority(d route.Deployment) bool {
	pr, _, err := t.pricing.Lookup(d.Provider, d.Model)
	return err == nil && pr.Priority != nil
}

type runTurn struct {
	t        *runTurns
	r        *run.Run
	adm      *run.Admitted
	deadline time.Time
	// What the admission reserved for: an attempt on any deployment of
	// chain, with prompt and output tokens (see Cover).
	chain          []route.Deployment
	prompt, output int64
	writes         budget.CacheWrites
	calls          budget.Usage // the built-in tool calls reserved for (Admission.calls)
}

// Cover prices the charges as Settle will charge them (run.Admitted.Price)
// and holds that plus the estimate of one more attempt on the costliest
// deployment of the chain. The next attempt's prompt is the larger of the admission's
// estimate and the largest prompt charged for an earlier attempt (a
// provider's count of a prompt in Chinese is above belay's estimate from
// its length; a charge whose output is estimated still has the prompt the
// provider stated, or the admission's estimate).
//
// It holds the tokens likewise against the run's token limit (the
// charges' tokens and the next attempt's prompt and output estimate),
// before the money.
func (t *runTurn) Cover(ctx context.Context, charges []Charge) error {
	prompt := t.prompt
	var tokens int64
	for _, c := range charges {
		prompt = max(prompt, c.Usage.Prompt())
		tokens += c.Usage.Total()
	}
	if err := t.adm.HoldTokens(ctx, run.AddTokens(run.AddTokens(tokens, prompt), t.output)); err != nil {
		return err
	}
	used, _ := t.adm.Price(runOutcome(Outcome{Charges: charges}, false))
	return t.adm.Cover(ctx, used.Add(t.t.reserve(t.chain, prompt, t.output, t.writes, t.calls)))
}

func (t *runTurn) Context() context.Context { return t.adm.Context() }
func (t *runTurn) Deadline() time.Time      { return t.deadline }
func (t *runTurn) Limits() config.Limits    { return configLimits(t.r.Limits()) }
func (t *runTurn) Agent() string            { return t.r.Agent() }

func (t *runTurn) Quote(o Outcome) (budget.USD, bool) {
	if failOnly(o) {
		// Settle fails the step: it charges nothing.
		t.adm.Quote(budget.Usage{}, run.Outcome{Err: o.Err})
		return 0, true
	}
	u, out := runOutcome(o, false)
	q := t.adm.Quote(u, out)
	return q.Cost, q.Covered
}

func (t *runTurn) Settle(ctx context.Context, o Outcome) (budget.USD, error) {
	if failOnly(o) {
		return 0, t.adm.FailWith(ctx, run.Outcome{Err: o.Err, InputMessages: o.InputMessages})
	}
	u, out := runOutcome(o, true)
	err := t.adm.Settle(ctx, u, out)
	// What the run charged (an estimate for an unpriced model), not a
	// second pricing of the usage here.
	cost, _ := t.adm.Cost()
	return cost, err
}

// failOnly reports whether o is settled by failing the step: no attempt
// was made and nothing is charged.
func failOnly(o Outcome) bool { return len(o.Charges) == 0 && len(o.Result.Attempts()) == 0 }

// runOutcome converts o to the run layer's usage and outcome; the
// attempts and payload, which only the record needs, with records set.
func runOutcome(o Outcome, records bool) (budget.Usage, run.Outcome) {
	out := run.Outcome{Degraded: o.Result.Degraded, Err: o.Err}
	if records {
		out.InputMessages, out.OutputMessages = o.InputMessages, o.OutputMessages
		out.ResponseID, out.ResponseModel, out.FinishReasons = o.ResponseID, o.ResponseModel, o.FinishReasons
		for _, a := range o.Result.Attempts() {
			out.Attempts = append(out.Attempts, run.AttemptRecord{Deployment: a.Deployment, Start: a.Start,
				Duration: a.Duration, Wait: a.Wait, Failure: a.Failure, RetryRefused: a.RetryRefused})
		}
	}
	var u budget.Usage
	for _, c := range o.Charges {
		cu := budgetUsage(c.Usage)
		u = u.Add(cu)
		out.Provider, out.Model, out.Deployment = c.Deployment.Provider, c.Deployment.Model, c.Deployment.Name
		out.Estimated = out.Estimated || c.Estimated
		// Each attempt priced at the deployment that used its tokens.
		out.Parts = append(out.Parts, run.UsagePart{Provider: c.Deployment.Provider, Model: c.Deployment.Model, Usage: cu, Estimated: c.Estimated})
	}
	if d := o.Result.Deployment; d != nil {
		out.Provider, out.Model, out.Deployment = d.Provider, d.Model, d.Name
	}
	return u, out
}

// budgetUsage converts the dialect-neutral usage (non-overlapping fields)
// to budget.Usage (totals that include their parts).
func budgetUsage(u dialect.Usage) budget.Usage {
	return budget.Usage{
		InputTokens:        u.Prompt(),
		OutputTokens:       u.Output,
		CachedInputTokens:  u.CachedInput,
		CacheWriteTokens:   u.CacheWrite,
		CacheWrite1hTokens: u.CacheWrite1h,
		ReasoningTokens:    u.Reasoning,
		WebSearchCalls:     u.WebSearches,
		FileSearchCalls:    u.FileSearches,
		Priority:           openai.PriorityTier(u.Tier),
	}
}

func storeLimits(l config.Limits) store.Limits {
	return store.Limits{MaxTurns: l.MaxTurns, Deadline: l.Deadline.D(), MaxTokens: l.MaxTokens, MaxCost: l.MaxCostUSD.V()}
}

func configLimits(l store.Limits) config.Limits {
	return config.Limits{MaxTurns: l.MaxTurns, Deadline: config.Duration(l.Deadline), MaxTokens: l.MaxTokens, MaxCostUSD: config.USD(l.MaxCost)}
}
