package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/ids"
	"github.com/belay-run/belay/store"
)

// AttemptRecord is one try of a step against one deployment, as the router
// reports it (route.Attempt has the same fields).
type AttemptRecord struct {
	Deployment string
	Start      time.Time
	Duration   time.Duration
	// Wait is the backoff slept before this attempt.
	Wait    time.Duration
	Failure *failure.Error // nil for the attempt that succeeded
	// RetryRefused: the retry budget refused the retry after this attempt
	// (route.Attempt.RetryRefused); recorded as belay.retry.refused.
	RetryRefused bool
}

// Outcome is what is known about a finished model step besides its usage.
// Every field is optional.
type Outcome struct {
	// Provider and Model that actually served the call (after a fallback);
	// they price the usage unless Parts does. Empty means the Step's.
	Provider, Model string
	// Parts, when set, is the usage split by the model that used it (one
	// per attempt of a call that retried or fell back), each priced at its
	// own model's price; their usage must add up to Settle's u. A failed
	// attempt on a dear deployment followed by a cheap fallback was
	// charged at the cheap price (an adversarial review).
	Parts []UsagePart
	// ResponseModel is the model name the provider reported; ResponseID
	// the id it gave its answer (gen_ai.response.id).
	ResponseModel, ResponseID string
	// Deployment that served the call.
	Deployment string
	// Estimated is true when the usage is an estimate (a cut stream that
	// reported none): the cost is marked estimated.
	Estimated bool
	// Degraded is true when a fallback deployment served the call.
	Degraded      bool
	FinishReasons []string
	Attempts      []AttemptRecord
	// InputMessages and OutputMessages are the call's payload as JSON (the
	// request's messages, the response's message), recorded as
	// gen_ai.input.messages and gen_ai.output.messages. The trace recorder
	// drops or redacts them by the capture setting (off by default).
	InputMessages, OutputMessages string
	// Err is the failure that ended the step after it consumed tokens (a
	// stream cut after output began, a cancellation): the usage is charged
	// and the span records the failure.
	Err error
}

// UsagePart is usage that one provider's model used.
type UsagePart struct {
	Provider, Model string
	Usage           budget.Usage
	// Estimated: the part's usage is an estimate (the cost is marked so).
	Estimated bool
}

// Settle charges the step's actual cost and closes it: the cost is priced
// from u (Outcome.Provider/Model, else the Step's) and replaces the
// reservation in the ledger; the run's counters (tokens, cost) are updated
// and written; the model span and one span per attempt are recorded; the
// run's and tenant's alert thresholds are checked (Config.OnAlert is called
// for each new one). The alert check and the record write happen in the
// background (Run.Flush waits for them), and so does the ledger settle of
// a cost within the reservation; a store that fails is retried
// (Config.StoreRetryFor). A model without a price is charged the reserved
// estimate and the cost is marked estimated (CostEstimated), unless the call
// failed without using any token (then it costs $0). A step whose
// reservation has expired is charged anyway. Settle after Settle or Fail
// returns ErrSettled.
func (a *Admitted) Settle(ctx context.Context, u budget.Usage, o Outcome) error {
	if !a.close() {
		return ErrSettled
	}
	defer a.settleDone()
	// The step is closed: the run's end below must not cancel it (the
	// callback would run in a goroutine of its own).
	a.unlink()
	defer a.done()
	defer a.unquote()
	ctx = context.WithoutCancel(ctx)
	r := a.r
	cost, estimated := a.Price(u, o)
	// Count the spend in memory before the ledger: a record written in
	// between raises its cost to the ledger's (which counts every
	// process), and the ledger must never be ahead of this process's own
	// count, or the same spend would be counted twice (regression:
	// TestRegression_ConcurrentStartSameRunID's cost).
	r.mu.Lock()
	if a.step.Kind == KindModel {
		r.lastFailed = o.Err != nil
	}
	r.rec.InputTokens += u.InputTokens
	r.rec.OutputTokens += u.OutputTokens
	a.usedIn, a.usedOut = u.InputTokens, u.OutputTokens
	r.rec.Cost = r.rec.Cost.Add(cost)
	r.costEstimated = r.costEstimated || estimated || r.rec.CostEstimated
	r.rec.CostEstimated = r.costEstimated
	a.cost, a.estimated = cost, estimated
	ended := r.ended
	// A step admitted in memory (the first of a Fresh run) is covered
	// too: no other process knows the run, and this process's next
	// admission waits for its entries (Run.waitPrivate).
	covered := a.covers(cost)
	// A run with a token limit settles the step's tokens before Settle
	// returns, so that its next admission, in any process, reserves
	// against what the step used rather than its estimate (prompt and
	// output limit, often many times more); without one they are
	// settled in the background.
	tokensNow := a.tokensFirst()
	r.mu.Unlock()

	// A cost the reservation covers is settled off the request path:
	// until the settle lands, the ledger holds the estimate, which errs
	// on the safe side for every admission that reads it. A cost above
	// the estimate (or with nothing reserved) is settled before Settle
	// returns, so that the next admission, in any process, sees it
	// (regression: TestRegression_CostAboveEstimateSettledFirst). The
	// alert check and the record write follow the settle in the
	// background; Flush waits for them.
	var err error
	if !covered {
		err = a.charge(ctx, cost)
	}
	if tokensNow {
		err = errors.Join(err, a.chargeTokens(ctx))
	}
	fe := failure.As(o.Err)
	stop := fe != nil && fe.Kind == failure.Fatal && stopsRun(fe.Reason)
	// A Single run's step admitted in memory: its spend goes with the
	// record's creation, when the run ends below (one write).
	if !a.spendWithCreate(cost) {
		r.background(ctx, func(ctx context.Context) {
			if covered {
				_ = a.charge(ctx, cost) // a step admitted in memory is marked written by spend
			}
			if a.tokID != "" && !tokensNow {
				_ = a.chargeTokens(ctx)
			}
			if a.scopes != nil {
				r.alerts(ctx, a.scopes, a.tb)
			}
			// A Single run that has not ended writes its record once,
			// when it ends below; one that had ended before its step
			// closed (a kill, a shutdown) has it written already, and
			// this write brings the step's counts.
			if !r.single || stop || ended {
				r.persistHere(ctx)
			}
		})
	}

	r.m.sink.Record(a.modelSpan(u, o, cost, estimated))
	for i, at := range o.Attempts {
		r.m.sink.Record(a.attemptSpan(i+1, at))
	}
	if ended {
		// A late settle changes the ended run's totals (and maybe events).
		r.recordRunSpan()
	}
	if stop {
		_ = r.end(ctx, store.RunStopped, fe, hardStop(fe.Reason))
	} else {
		r.endSingle(o.Err) // a no-op unless Single and still running
	}
	r.stepClosed()
	return err
}

// settleWrite runs fn, one of the closed step's ledger settles, with
// Manager.durably (a store that fails is retried in the background); the
// step's reservations are renewed until every such write is done (see
// Manager.renewOpen).
func (a *Admitted) settleWrite(ctx context.Context, op string, fn func(context.Context) error) error {
	r := a.r
	r.mu.Lock()
	if r.settling == nil {
		r.settling = map[*Admitted]int{}
	}
	r.settling[a]++
	r.mu.Unlock()
	return r.m.durablyMoney(ctx, op, r.id, fn, func(error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.settling[a]--; r.settling[a] <= 0 {
			delete(r.settling, a)
		}
	})
}

// Quote is what Settle charges for a step's usage, known before it
// settles.
type Quote struct {
	// Cost is the amount Settle charges (in the ledger and the run's
	// totals); Estimated as Admitted.Cost reports it.
	Cost      budget.USD
	Estimated bool
	// Covered reports that Settle charges Cost off the request path: the
	// step's reservation covers it (or the step was admitted in memory,
	// where no other admission reads its charge). When false, Settle
	// charges Cost before it returns, so that the next admission, in any
	// process, sees it: a caller that answers its client before settling
	// must settle first in that case. It is false too for a step of a run
	// with a token limit whose tokens are in the ledger (see TokenScope):
	// Settle settles them before it returns.
	Covered bool
}

// Quote prices the step's usage u as Settle(ctx, u, o) will, without
// charging anything, and announces that Settle or Fail follows: from then
// until it returns, Run.Flush, Manager.Flush and the run's next Admit wait
// for it (so settle a quoted step before admitting the run's next step on
// the same goroutine: that Admit would wait until its context ends). A caller may
// so answer its client before it settles (the gateway does: the answer
// carries Quote's cost), and a reader that flushes the run still finds the
// step settled. Quote after Settle or Fail returns the zero Quote and
// announces nothing. Safe for concurrent use with the run's other steps.
func (a *Admitted) Quote(u budget.Usage, o Outcome) Quote {
	cost, estimated := a.Price(u, o)
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.settled {
		return Quote{}
	}
	if !a.quoted {
		a.quoted = true
		r.quoted++
	}
	// A run with a token limit settles the step's tokens before Settle
	// returns (see Settle), which the caller must not put after its answer:
	// until then the ledger holds the step's estimate, and the run's next
	// call in another process would be admitted against it.
	covered := a.covers(cost) && !a.tokensFirst()
	return Quote{Cost: cost, Estimated: estimated, Covered: covered}
}

// covers reports whether Settle charges cost off the request path (see
// Quote.Covered). Under r.mu.
func (a *Admitted) covers(cost budget.USD) bool {
	return a.resID != "" && cost <= a.held || a.private
}

// unquote ends what Quote announced, once Settle or Fail has done its
// part on the caller's path (the writes it leaves to the background are
// waited for by Run.Flush as before).
func (a *Admitted) unquote() {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.quoted {
		a.quoted = false
		r.quoted--
		r.written.Broadcast()
	}
}

// Price returns the cost of u for the step, as Settle charges it, and
// whether it is an estimate; unlike Quote it announces nothing. Each of
// Outcome.Parts is priced at its own model, or, without parts, u priced
// by the provider and model
// that served it (Outcome.Provider/Model, else the Step's). Models without
// a price are charged the step's estimate, once, marked estimated, except
// that a call that failed without them using any token costs nothing for
// them: no provider charges for it, so neither does the ledger.
func (a *Admitted) Price(u budget.Usage, o Outcome) (cost budget.USD, estimated bool) {
	parts := o.Parts
	if len(parts) == 0 {
		parts = []UsagePart{{Provider: o.Provider, Model: o.Model, Usage: u}}
	}
	unpriced, unpricedUsed := false, false
	for _, p := range parts {
		provider, model := p.Provider, p.Model
		if model == "" {
			provider, model = a.step.Provider, a.step.Model
		}
		pr, match, err := a.r.m.pricing.Lookup(provider, model)
		if err != nil {
			unpriced = true
			unpricedUsed = unpricedUsed || !p.Usage.Empty()
			continue
		}
		cost = cost.Add(pr.Cost(p.Usage))
		// A priority call of a model without a priority price is charged
		// the standard price, below the bill.
		estimated = estimated || match.Default || p.Estimated || !pr.Exact(p.Usage)
	}
	if unpriced && (unpricedUsed || o.Err == nil) {
		cost, estimated = cost.Add(a.step.EstimatedCost), true
	}
	return cost, estimated || o.Estimated
}

// spendWithCreate reports whether a's spend of cost is to be written with
// the run record's creation (store.RunSpender): a is the step of a Single
// run admitted in memory, and the record is not written yet. It then
// notes the spend on the run. Its turn needs no ledger entry: a Single run
// has one.
func (a *Admitted) spendWithCreate(cost budget.USD) bool {
	r := a.r
	if _, ok := r.m.st.(store.RunSpender); !ok || !r.single {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !a.private || r.created || r.creating || r.withCreate != nil {
		return false
	}
	r.withCreate = a
	if cost > 0 {
		// The id is used only if another process created the run first
		// (see writeRecord): the spend is then written on its own.
		r.createSpends = []budget.Reservation{{ID: ids.New(), Owner: r.m.owner, Amount: cost, Spend: true,
			Scopes: unlimited(a.scopes)}}
	}
	return true
}

// charge settles the reservation at cost, or records the spend with a
// fresh unlimited reservation when the original is gone (expired): money
// spent is always recorded. A store that
// fails is retried (Manager.durably).
func (a *Admitted) charge(ctx context.Context, cost budget.USD) error {
	r := a.r
	r.mu.Lock()
	turn, private, extra, in, out := a.turnUnwritten, a.private, a.extra, a.usedIn, a.usedOut
	r.mu.Unlock()
	if private { // admitted in memory: its turn, cost and tokens are spends
		return a.spend(ctx, cost, turn, in, out)
	}
	if a.resID == "" && cost == 0 && len(extra) == 0 {
		return nil
	}
	if a.resID == "" && a.scopes == nil {
		a.scopes, a.tb = r.scopes(r.m.now())
	}
	c := &charger{a: a, cost: cost, lateID: ids.New(), extra: extra}
	return a.settleWrite(ctx, "settle", c.try)
}

// chargeTokens settles the step's token reservation at the tokens it used
// (see TokenScope); a store that fails is retried (Manager.durably).
func (a *Admitted) chargeTokens(ctx context.Context) error {
	r := a.r
	r.mu.Lock()
	in, out, extra := a.usedIn, a.usedOut, a.tokExtra
	r.mu.Unlock()
	c := &tokenCharger{a: a, in: in, out: out, extra: extra, lateID: ids.New(), outID: ids.New()}
	return a.settleWrite(ctx, "settle tokens", c.try)
}

// spend records a step admitted in memory (the first of a Fresh run): its
// turn and its cost as spends, in one ledger write that is safe to repeat
// (the money spend's id is kept: a retry after a lost answer is a
// conflict, taken as done).
func (a *Admitted) spend(ctx context.Context, cost budget.USD, turn bool, in, out int64) error {
	r := a.r
	var rs []budget.Reservation
	id := ids.New()
	if turn {
		// With an id: a retry after a lost answer conflicts instead of
		// counting the turn twice.
		rs = append(rs, budget.Reservation{ID: id + "-turn", Owner: r.m.owner, Amount: turnUnit, Spend: true,
			Scopes: []budget.ScopeLimit{{Scope: TurnScope(r.id)}}})
	}
	if cost > 0 {
		rs = append(rs, budget.Reservation{ID: id, Owner: r.m.owner, Amount: cost, Spend: true, Scopes: unlimited(a.scopes)})
	}
	if r.ledgerCounts() {
		rs = append(rs, tokenSpends(r.id, r.m.owner, id, in, out)...)
	}
	if len(rs) == 0 {
		a.privateWritten()
		return nil
	}
	return r.m.durablyMoney(ctx, "settle", r.id, func(ctx context.Context) error {
		_, err := r.m.reserve(ctx, rs)
		if err != nil && !errors.Is(err, store.ErrConflict) { // a conflict: an earlier try committed
			return err
		}
		r.mu.Lock()
		a.turnUnwritten = false
		r.mu.Unlock()
		return nil
	}, func(error) {
		// Written, or given up (logged, Stats.StoreFailures): the run's
		// next step may reserve now, not while the write is retried.
		a.privateWritten()
	})
}

// tokenSpends are the spends that count in tokens and out output tokens
// in run runID's token scopes (see TokenScope), with ids made from id
// (so that a spend repeated after a lost answer conflicts instead of
// counting twice); none for zero tokens.
func tokenSpends(runID, owner, id string, in, out int64) []budget.Reservation {
	var rs []budget.Reservation
	if out > 0 { // first: see tokenCharger
		rs = append(rs, tokenSpend(OutputTokenScope(runID), owner, id+"-out", out))
	}
	if in+out > 0 {
		rs = append(rs, tokenSpend(TokenScope(runID), owner, id+"-tokens", in+out))
	}
	return rs
}

// tokenSpend is the spend, with id, of n tokens in scope.
func tokenSpend(scope budget.Scope, owner, id string, n int64) budget.Reservation {
	return budget.Reservation{ID: id, Owner: owner, Amount: budget.USD(n), Spend: true, Scopes: []budget.ScopeLimit{{Scope: scope}}}
}

// releaseFrom releases the reservations ids[*released:], counting in
// *released those done (or already gone), so that a retry goes on where a
// failed write stopped.
func releaseFrom(ctx context.Context, st Store, ids []string, released *int) error {
	for _, id := range ids[*released:] {
		if err := st.Release(ctx, id); err != nil && !errors.Is(err, budget.ErrUnknownReservation) {
			return err
		}
		*released++
	}
	return nil
}

// unlimited returns scopes without their limits: a spend that happened is
// recorded whatever the limit.
func unlimited(scopes []budget.ScopeLimit) []budget.ScopeLimit {
	out := make([]budget.ScopeLimit, len(scopes))
	for i, s := range scopes {
		out[i] = budget.ScopeLimit{Scope: s.Scope}
	}
	return out
}

// charger is one charge, safe to repeat after a failed try: each store
// call is idempotent by reservation id.
//
// A settle retried after a failure that returns ErrUnknownReservation is
// taken as done: the failed try may have committed before its answer was
// lost (a dropped connection), and charging again would count the spend
// twice. (The reservation could also have expired in between, which needs
// the step to have run for about Config.ReservationTTL.)
type charger struct {
	a      *Admitted
	cost   budget.USD
	tried  bool // a settle of the reservation failed once
	late   bool // the reservation is gone: record the spend anew
	lateID string
	held   bool // the late reservation is (or may be) in the store
	// extra are the step's reservations by Admitted.Cover, released once
	// the cost is settled (the first released of them);
	// settled: the cost is.
	extra    []string
	released int
	settled  bool
}

func (c *charger) try(ctx context.Context) error {
	if !c.settled {
		if err := c.settle(ctx); err != nil {
			return err
		}
		c.settled = true
	}
	// After the settle: until it lands, the extra money stays held.
	return releaseFrom(ctx, c.a.r.m.st, c.extra, &c.released)
}

// tokenCharger settles a step's token reservation (Admitted.tokID) at the
// tokens it used, or spends them anew when the reservation is gone
// (expired), after spending its output tokens in the run's
// OutputTokenScope. Output first: a reader of the two scopes (total, then
// output: Run.tokensCounted) then never counts a step's tokens as input
// before its output is in, and a record, whose counts are never lowered,
// never keeps such an overcount. Each write is safe to repeat (see
// charger).
type tokenCharger struct {
	a              *Admitted
	in, out        int64
	tried, late    bool // as charger's
	spent, settled bool
	lateID, outID  string
	// extra are HoldTokens' reservations, released once the tokens are
	// settled (released: how many are).
	extra    []string
	released int
}

func (c *tokenCharger) try(ctx context.Context) error {
	st := c.a.r.m.st
	if !c.spent && c.out > 0 {
		err := st.Reserve(ctx, tokenSpend(OutputTokenScope(c.a.r.id), c.a.r.m.owner, c.outID, c.out))
		if err != nil && !errors.Is(err, store.ErrConflict) { // a conflict: an earlier try spent it
			return err
		}
	}
	c.spent = true
	if err := c.settle(ctx); err != nil {
		return err
	}
	// After the settle: until it lands, the hold stays.
	return releaseFrom(ctx, st, c.extra, &c.released)
}

// settle settles the step's token reservation, or spends the tokens anew
// when it is gone.
func (c *tokenCharger) settle(ctx context.Context) error {
	st := c.a.r.m.st
	if c.settled {
		return nil
	}
	if !c.late {
		err := st.Settle(ctx, c.a.tokID, budget.USD(c.in+c.out))
		switch {
		case err == nil, errors.Is(err, budget.ErrUnknownReservation) && c.tried:
			c.settled = true
			return nil
		case !errors.Is(err, budget.ErrUnknownReservation):
			c.tried = true
			return err
		}
		c.late = true
	}
	// The reservation is gone: the tokens are spent anew.
	if c.in+c.out > 0 {
		err := st.Reserve(ctx, tokenSpend(TokenScope(c.a.r.id), c.a.r.m.owner, c.lateID, c.in+c.out))
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("run: record late tokens: %w", err)
		}
	}
	c.settled = true
	return nil
}

// settle replaces the reservation by the cost, or records the cost anew
// when the reservation is gone.
func (c *charger) settle(ctx context.Context) error {
	st := c.a.r.m.st
	if c.a.resID != "" && !c.late {
		err := st.Settle(ctx, c.a.resID, c.cost)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, budget.ErrUnknownReservation):
			c.tried = true
			return err
		case c.tried:
			return nil
		}
		c.late = true
	}
	if c.cost == 0 {
		return nil
	}
	if !c.held {
		err := st.Reserve(ctx, budget.Reservation{ID: c.lateID, Owner: c.a.r.m.owner, Scopes: unlimited(c.a.scopes), Amount: c.cost})
		if err != nil && !errors.Is(err, store.ErrConflict) { // a conflict: an earlier try reserved it
			return fmt.Errorf("run: record late spend: %w", err)
		}
		c.held = true
	}
	err := st.Settle(ctx, c.lateID, c.cost)
	if errors.Is(err, budget.ErrUnknownReservation) && c.tried {
		return nil
	}
	if err != nil {
		c.tried = true
	}
	return err
}

// Fail closes a step that consumed nothing billable (it failed before any
// usage, or the usage is unknown and the provider does not bill it): the
// reservation is released and the span records err. A Fatal failure for
// one of the run's limits (killed, deadline, budget, turns) stops the run.
// The turn still counts. To record the attempts of a failed model step,
// call Settle with zero usage and Outcome.Err instead. Fail after Settle or
// Fail returns ErrSettled.
func (a *Admitted) Fail(ctx context.Context, err error) error {
	return a.FailWith(ctx, Outcome{Err: err})
}

// FailWith is Fail with what the step's record keeps of the call: o.Err
// is the failure (as Fail's err), and o's messages (InputMessages,
// OutputMessages) go on the step's span as on a settled one; its other
// fields are ignored, since a failed step charges nothing. A gateway call
// that ended before any attempt (its deadline, a kill, every breaker
// refusing it) records the messages it was sent with this way.
func (a *Admitted) FailWith(ctx context.Context, o Outcome) error {
	err := o.Err
	if !a.close() {
		return ErrSettled
	}
	defer a.settleDone()
	// The step is closed: the run's end below must not cancel it (the
	// callback would run in a goroutine of its own).
	a.unlink()
	defer a.unquote()
	defer a.done()
	ctx = context.WithoutCancel(ctx)
	a.releaseReservation(ctx)
	r := a.r
	r.mu.Lock()
	private := a.private
	r.mu.Unlock()
	if private && !a.spendWithCreate(0) { // admitted in memory: its turn goes to the ledger now
		r.background(ctx, func(ctx context.Context) { _ = a.charge(ctx, 0) })
	}
	if a.step.Kind == KindModel {
		r.mu.Lock()
		r.lastFailed = true
		r.mu.Unlock()
		r.m.sink.Record(a.modelSpan(budget.Usage{}, Outcome{Err: err, InputMessages: o.InputMessages, OutputMessages: o.OutputMessages}, 0, false))
	}
	var perr error
	if fe := failure.As(err); fe != nil && fe.Kind == failure.Fatal && stopsRun(fe.Reason) {
		perr = r.persist(ctx)
		_ = r.end(ctx, store.RunStopped, fe, hardStop(fe.Reason))
	} else if r.single && !r.isEnded() {
		r.endSingle(err) // its record write is the ending's
	} else {
		perr = r.persist(ctx)
	}
	r.stepClosed()
	return perr
}

// Cost returns what Settle charged for the step and whether that cost is
// an estimate; zero before Settle and after Fail.
func (a *Admitted) Cost() (cost budget.USD, estimated bool) {
	a.r.mu.Lock()
	defer a.r.mu.Unlock()
	return a.cost, a.estimated
}

// CostEstimated reports whether any settled step's cost was an estimate
// (usage estimated, a default price, or no price at all).
func (r *Run) CostEstimated() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.costEstimated
}
