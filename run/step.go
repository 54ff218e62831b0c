package run

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/ids"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/store"
)

// Kind is what a step is.
type Kind string

const (
	KindModel Kind = "model" // a model call: a turn
	KindTool  Kind = "tool"  // a tool call
)

// Step describes a step to admit. For a model step, Provider and Model
// price it; Alias and Deployment, when known, are checked against kill
// flags. EstimatedCost is reserved in the run's and the tenant's scopes;
// when it is zero and PromptTokens or MaxOutputTokens is set, it is
// computed with Pricing.Estimate at list price (for a model without a
// price it stays zero). EstimatedTokens counts against Limits.MaxTokens;
// zero means PromptTokens + MaxOutputTokens.
type Step struct {
	Kind       Kind
	Provider   string
	Model      string
	Alias      string
	Deployment string
	// API is the OpenAI API a model step calls, "chat_completions" or
	// "responses", for its span's openai.api.type; "" for other
	// providers' calls.
	API             string
	Tool            string
	EstimatedCost   budget.USD
	EstimatedTokens int64
	PromptTokens    int64
	MaxOutputTokens int64
	// OutputLimitField names the request member that set
	// MaxOutputTokens ("max_tokens", "max_output_tokens"), for a token
	// limit's refusal to say what to lower; "" names none.
	OutputLimitField string
}

// turnsUsed is the message of a run whose turns, max of them, are used.
func turnsUsed(max int) string {
	if max == 1 {
		return "run used its 1 turn"
	}
	return fmt.Sprintf("run used its %d turns", max)
}

// ErrNoEstimate is returned (wrapped) by Admit for a model step that
// cannot be priced before it runs (no tokens, no EstimatedCost, or a model
// without a price) in a run with a money limit (its MaxCost, or its
// tenant's budget): nothing would be reserved for it. The run goes on.
var ErrNoEstimate = errors.New("the step has no cost estimate")

// moneyLimited reports whether the run's spend is bounded: its MaxCost or
// its tenant's budget.
func (r *Run) moneyLimited() bool {
	r.mu.Lock()
	maxCost := r.rec.Limits.MaxCost
	r.mu.Unlock()
	tb, _ := r.m.cfg.tenantBudget(r.tenant)
	return maxCost > 0 || tb.Limit > 0
}

// ErrSettled is returned by Settle or Fail on a step already settled or
// failed.
var ErrSettled = errors.New("run: step already settled")

// Admitted is a step that passed admission: its estimated cost is reserved
// until Settle or Fail, exactly one of which must be called. Safe for
// concurrent use.
type Admitted struct {
	r      *Run
	step   Step
	ctx    context.Context
	cancel context.CancelCauseFunc
	// stopAF stops the link from the run's context (nil for a Single
	// run's step, see Run.Admit).
	stopAF func() bool
	// stopDeadline frees the deadline of a Single run's step (nil for
	// other runs: the run's context has it).
	stopDeadline context.CancelFunc
	resID        string // "" when nothing was reserved
	// tokID is the reservation of the step's estimated tokens in the
	// run's TokenScope ("" when none: a Single run's step, a private
	// one, a tool step); tokExtra are HoldTokens' reservations there
	// (under r.mu).
	tokID    string
	tokExtra []string
	// usedIn, usedOut: the tokens Settle charged (see TokenScope). Under r.mu.
	usedIn, usedOut int64
	// held is the money the step holds: its estimate, and what Cover
	// added; extra are the ids of Cover's reservations. Under r.mu.
	held budget.USD
	// tokens is what the step counts in the run's pending tokens: its
	// EstimatedTokens, or more after HoldTokens. Under r.mu.
	tokens int64
	extra  []string
	// cover makes Cover calls one at a time (a semaphore, made by the
	// first Cover under r.mu): each reads what the step holds after the
	// one before has added to it.
	cover  chan struct{}
	scopes []budget.ScopeLimit
	tb     TenantBudget
	start  time.Time
	end    time.Time // when it closed (Settle, Fail): its span's end
	spanID string
	// private: admitted in memory, the first step of a Spec.Fresh run;
	// turnUnwritten: its turn is not in the ledger yet. Under r.mu.
	private, turnUnwritten bool
	// Under r.mu:
	settled   bool
	quoted    bool       // Quote announced Settle (see Run.quoted)
	cost      budget.USD // charged by Settle
	estimated bool
}

// Context returns the step's context: done when the caller's context is,
// or when the run is killed, stopped, finished or out of time. Use it for
// the model or tool call.
func (a *Admitted) Context() context.Context { return a.ctx }

// Step returns the admitted step, with its estimates filled in.
func (a *Admitted) Step() Step { return a.step }

// refusal builds the Fatal error of an admission refusal.
func refusal(reason failure.Reason, format string, args ...any) *failure.Error {
	return &failure.Error{Kind: failure.Fatal, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// stopReasons are the reasons a refusal stops the run for: the run's own
// limits and kills; a disabled tool refuses only the call.
var stopReasons = [...]failure.Reason{failure.Killed, failure.MaxTurnsExceeded, failure.DeadlineExceeded, failure.BudgetExceeded}

// stopsRun reports whether a refusal for reason stops the run.
func stopsRun(reason failure.Reason) bool { return slices.Contains(stopReasons[:], reason) }

// hardStop reports whether stopping for reason cancels the steps in
// flight: a kill and the deadline do; a turn or money refusal stops only
// admissions (see Run.end).
func hardStop(reason failure.Reason) bool {
	return reason == failure.Killed || reason == failure.DeadlineExceeded
}

// settleQuoted waits until the run's quoted steps (answered, settling:
// see Admitted.Quote) are settled, or ctx ends: a client's next call, sent
// on the previous answer, on any connection, is admitted against that
// step's actual usage, not its estimate. When ctx ends first it returns a
// Fatal Canceled or DeadlineExceeded failure with ctx's cause, and
// nothing is admitted.
func (r *Run) settleQuoted(ctx context.Context) error {
	err := r.waitQuoted(ctx)
	if err == nil {
		return nil
	}
	reason := failure.Canceled
	if errors.Is(err, context.DeadlineExceeded) {
		reason = failure.DeadlineExceeded
	}
	return failure.Wrap(reason, fmt.Errorf("run %s: waiting for the settle of a step already answered: %w", r.id, context.Cause(ctx)))
}

// waitQuoted waits, until ctx is done, for the run's quoted steps to
// settle; it returns ctx's error when ctx ended first. Without quoted
// steps it returns at once.
func (r *Run) waitQuoted(ctx context.Context) error {
	r.mu.Lock()
	q := r.quoted
	r.mu.Unlock()
	if q == 0 {
		return nil
	}
	return r.waitUntil(ctx, func() bool { return r.quoted == 0 })
}

// Admit checks, in order: the run has not ended and is not killed (flags
// for all, the run, its tenant), the step's model, deployment or tool is
// not killed; a model step has a turn left (Limits.MaxTurns); time is left
// (Limits.Deadline); tokens are left (Limits.MaxTokens, counting the
// estimates of steps in flight); the estimated cost fits in the run's
// MaxCost and the tenant's period budget (reserved atomically in both).
// A refusal is a *failure.Error of kind Fatal with reason Killed,
// ToolDisabled, MaxTurnsExceeded, DeadlineExceeded or BudgetExceeded,
// returned before anything is spent; all but ToolDisabled stop the run.
// A kill or the deadline cancels the run's steps in flight; a turn or
// money refusal does not: the steps already admitted finish and are
// charged (see Run.end). A model step's turn is counted in the ledger
// (TurnScope), so MaxTurns holds across processes sharing a store. A
// store error during the reservation is returned as is and stops nothing.
// A step of the run that was quoted (Admitted.Quote) and is settling is
// waited for first, so that its actual usage, not its estimate, counts; a
// ctx that ends meanwhile gives a Fatal Canceled or DeadlineExceeded
// failure and admits nothing. A model step whose cost cannot be estimated
// (no EstimatedCost, and no tokens or no price to estimate it from) is
// refused in a run with a money limit, its own or its tenant's, with an
// error wrapping ErrNoEstimate that stops nothing: nothing would be
// reserved for it.
func (r *Run) Admit(ctx context.Context, s Step) (*Admitted, error) {
	if err := r.settleQuoted(ctx); err != nil {
		return nil, err
	}
	if s.Kind == "" {
		s.Kind = KindModel
	}
	var noEstimate error
	if s.EstimatedCost == 0 && s.Kind == KindModel {
		why := "it gives no PromptTokens, MaxOutputTokens or EstimatedCost"
		if s.PromptTokens > 0 || s.MaxOutputTokens > 0 {
			c, err := r.m.pricing.Estimate(s.Provider, s.Model, s.PromptTokens, s.MaxOutputTokens)
			s.EstimatedCost, why = c, ""
			if err != nil {
				why = err.Error()
			}
		}
		if why != "" && r.moneyLimited() {
			// Nothing would be reserved: calls in flight together could
			// spend past the limit (adversarial review: 43 of 50
			// concurrent calls admitted against $0.01). Refused below,
			// once the run's own refusals (ended, killed, …) are known.
			noEstimate = fmt.Errorf("run: %w: a model step of a run with a money limit must be estimated, and %s "+
				"(provider %q, model %q): set Step.EstimatedCost, or the prompt and output tokens of a priced model", ErrNoEstimate, why, s.Provider, s.Model)
		}
	}
	if s.EstimatedTokens == 0 {
		s.EstimatedTokens = AddTokens(s.PromptTokens, s.MaxOutputTokens)
	}
	now := r.m.now()
	a := &Admitted{r: r, step: s, start: now, spanID: newSpanID()}
	if r.single && !r.deadline.IsZero() {
		// A Single run has no timer of its own (see newRun): its step's
		// context ends at the run's deadline.
		ctx, a.stopDeadline = context.WithDeadlineCause(ctx, r.deadline, r.deadlineFailure())
	}
	a.ctx, a.cancel = context.WithCancelCause(ctx)
	if !r.single {
		// The run's context ends at its deadline (see newRun) with its
		// steps. A Single run's has no timer, and every end of a run
		// with steps open cancels them itself (see Run.end).
		a.stopAF = context.AfterFunc(r.ctx, func() { a.cancel(context.Cause(r.ctx)) })
	}

	// A first step may be admitted in memory (see reserveAll) only with
	// nothing shared to reserve against: no tenant limit, and a store
	// whose writes are not failing.
	privateOK := r.m.cfg.FirstStepInMemory && s.Kind == KindModel && !r.m.storeDown.Load()
	if privateOK {
		tb, _ := r.m.cfg.tenantBudget(r.tenant)
		privateOK = tb.Limit <= 0
	}
	r.mu.Lock()
	ferr := r.checkLocked(s, now)
	// Turns all taken, but some only by steps still reserving: if their
	// reservations fail (money), the turns were never used, and the run
	// must not stop as if they were. This step is refused; the run stops
	// by what those steps meet (adversary: concurrent streams stopped runs
	// that had used 16 of 20 turns "for" max_turns_exceeded, the others
	// being refused for money).
	inFlight := ferr != nil && !r.ended && ferr.Reason == failure.MaxTurnsExceeded && r.rec.Turns-r.reserving < r.rec.Limits.MaxTurns
	if inFlight {
		ferr = refusal(failure.MaxTurnsExceeded, "run's %d turns are all used or being admitted", r.rec.Limits.MaxTurns)
	}
	if ferr == nil && noEstimate != nil {
		r.mu.Unlock()
		a.done()
		return nil, noEstimate
	}
	if r.single && !r.ended && r.rec.Turns+r.rec.ToolCalls > 0 && (ferr == nil || ferr.Reason != failure.Killed) {
		// Not a limit of the run, whatever limit a second step would
		// pass: the run goes on with its one step.
		r.mu.Unlock()
		a.done()
		return nil, refusal(failure.RunEnded, "run %s takes no more calls: it is a single call, still in flight "+
			"(send X-Belay-Run-Id to group calls in a run)", r.id)
	}
	private := false
	if ferr == nil {
		if s.Kind == KindModel {
			r.rec.Turns++
			r.reserving++
		} else {
			r.rec.ToolCalls++
		}
		r.pending += s.EstimatedTokens
		a.tokens = s.EstimatedTokens
		r.open[a] = struct{}{}
		r.lastActive = now
		private, r.fresh = r.fresh && privateOK, false
		if private {
			// Counted at once, with fresh cleared under the same lock, so
			// that a concurrent step waits for this one's ledger entries.
			a.private, a.turnUnwritten = true, r.rec.Limits.MaxTurns > 0 || r.ledgerCounts()
			r.privateOpen++
		}
	}
	maxTurns := r.rec.Limits.MaxTurns
	r.mu.Unlock()
	if inFlight {
		a.done()
		r.recordRefused(a, ferr)
		return nil, ferr
	}
	if ferr != nil {
		r.recordRefused(a, ferr)
		err := r.refuse(ctx, a, ferr)
		r.endSingle(err)
		return nil, err
	}
	if err := r.reserveAll(ctx, a, maxTurns, now, private); err != nil {
		r.mu.Lock()
		if s.Kind == KindModel {
			// With the turn's removal, under one lock: a concurrent Admit
			// must not see the turn counted and no longer reserving.
			r.reserving--
		}
		r.unadmitLocked(a)
		if errors.Is(err, ErrEnded) {
			err = r.checkLocked(s, now) // the run ended while the step was reserved
		}
		r.mu.Unlock()
		defer r.stepClosed()
		if fe := failure.As(err); fe != nil {
			r.recordRefused(a, fe)
			err = r.refuse(ctx, a, fe)
		} else {
			a.done()
		}
		r.endSingle(err)
		return nil, err
	}
	if s.Kind == KindModel {
		r.mu.Lock()
		r.reserving--
		r.mu.Unlock()
	}
	return a, nil
}

// endSingle ends a Spec.Single run whose one step closed, or whose
// admission failed: succeeded, or failed with err. Its record is written
// in the background (Ended is when the step closed). A run already ended
// (stopped by a refusal, a kill) keeps that ending; other runs are left
// as they are.
func (r *Run) endSingle(err error) {
	if !r.single {
		return
	}
	status := store.RunSucceeded
	if err != nil {
		status = store.RunFailed
	}
	_ = r.end(context.WithValue(r.m.ctx, asyncEndKey{}, true), status, err, false)
}

// reserveAll takes what a step holds in the ledger: a model step's turn
// in the run's turn scope (when the run has a turn limit) and the
// estimated cost in the run's and the tenant's scopes (skipped for a tool
// step that costs nothing), in one atomic write when the store is a
// budget.BatchLedger. On any refusal or error it gives back what it took.
// A refusal is a Fatal MaxTurnsExceeded or BudgetExceeded; a run that
// ended meanwhile gives ErrEnded.
func (r *Run) reserveAll(ctx context.Context, a *Admitted, maxTurns int, now time.Time, private bool) error {
	s := a.step
	if private {
		// The first step of a Spec.Fresh run: no other process knows the
		// run, so its own scopes (turns, money) are exact in memory; with
		// no tenant limit there is nothing shared to reserve against.
		// checkLocked has counted the turn; the money is checked here.
		// Its ledger entries are written when it closes (spend). Admit
		// decided this: while store writes are failing, the ledger is
		// asked instead, so that calls fail with the store rather than
		// pile up unrecorded spend.
		scopes, tb := r.scopes(now)
		if lim := scopes[0].Limit; lim > 0 && s.EstimatedCost > lim {
			a.privateWritten() // nothing to write: refused
			return &failure.Error{Kind: failure.Fatal, Reason: failure.BudgetExceeded,
				Message: notFit(s.EstimatedCost, scopes[0].Scope, lim),
				Cause:   &budget.ExceededError{Scope: scopes[0].Scope, Amount: s.EstimatedCost, Limit: lim}}
		}
		if err := r.stillRunning(); err != nil {
			a.privateWritten()
			return err
		}
		r.mu.Lock()
		a.scopes, a.tb, a.held = scopes, tb, s.EstimatedCost
		r.mu.Unlock()
		return nil
	}
	var rs []budget.Reservation
	turn := s.Kind == KindModel && (maxTurns > 0 || r.ledgerCounts())
	if turn {
		// A turn is used once admitted: it is spent at once, leaving
		// nothing to settle.
		rs = append(rs, budget.Reservation{Owner: r.m.owner, Amount: turnUnit, Spend: true,
			Scopes: []budget.ScopeLimit{{Scope: TurnScope(r.id), Limit: budget.USD(maxTurns)}}})
	}
	tokIdx := -1
	if s.Kind == KindModel && r.ledgerCounts() {
		r.mu.Lock()
		maxTokens := r.rec.Limits.MaxTokens
		r.mu.Unlock()
		tokIdx = len(rs)
		rs = append(rs, budget.Reservation{ID: ids.New(), Owner: r.m.owner, Amount: budget.USD(s.EstimatedTokens),
			Scopes: []budget.ScopeLimit{{Scope: TokenScope(r.id), Limit: budget.USD(maxTokens)}}, ExpiresAt: now.Add(r.m.cfg.ReservationTTL)})
	}
	money := s.Kind == KindModel || s.EstimatedCost != 0
	var (
		scopes []budget.ScopeLimit
		tb     TenantBudget
	)
	if money {
		scopes, tb = r.scopes(now)
		rs = append(rs, budget.Reservation{ID: ids.New(), Owner: r.m.owner, Scopes: scopes,
			Amount: s.EstimatedCost, ExpiresAt: now.Add(r.m.cfg.ReservationTTL)})
	}
	if len(rs) == 0 {
		return r.stillRunning()
	}
	// The ledger must hold the first step's entries before it is asked
	// (a step that reserves nothing, such as a free tool call, does not
	// wait).
	if err := r.waitPrivate(ctx); err != nil {
		return err
	}
	failed, err := r.m.reserve(ctx, rs)
	for i := 0; i < len(holdWaits) && err != nil && r.holdsMayClear(ctx, err); i++ {
		if werr := r.waitForHolds(a.ctx, holdWaits[i]); werr != nil {
			if fe := failure.As(context.Cause(a.ctx)); fe != nil {
				return fe // a kill or the deadline ended the wait
			}
			break // the refusal stands
		}
		failed, err = r.m.reserve(ctx, rs)
	}
	if err != nil {
		if !errors.Is(err, budget.ErrExceeded) {
			return fmt.Errorf("run: reserve: %w", err)
		}
		if turn && failed == 0 {
			return &failure.Error{Kind: failure.Fatal, Reason: failure.MaxTurnsExceeded,
				Message: turnsUsed(maxTurns),
				Cause:   &turnsUsedError{scope: TurnScope(r.id), limit: maxTurns, err: err}}
		}
		if ee, ok := errors.AsType[*budget.ExceededError](err); (ok && ee.Scope == TokenScope(r.id)) || (tokIdx >= 0 && failed == tokIdx) {
			return &failure.Error{Kind: failure.Fatal, Reason: failure.BudgetExceeded, Cause: err,
				Message: fmt.Sprintf("token limit: %d estimated tokens do not fit the run's limit of %d with what its calls, in every process sharing the store, used and hold",
					s.EstimatedTokens, rs[tokIdx].Scopes[0].Limit)}
		}
		msg := fmt.Sprintf("estimated cost %s does not fit", s.EstimatedCost)
		if ee, ok := errors.AsType[*budget.ExceededError](err); ok {
			msg = notFit(s.EstimatedCost, ee.Scope, ee.Limit)
			if ee.Scope.Kind() == "run" {
				// A run past its limit (an answer longer than its
				// reservation) is refused even a tiny call: say so.
				r.mu.Lock()
				spent := r.rec.Cost
				r.mu.Unlock()
				msg += fmt.Sprintf("; the run has spent %s", spent)
			}
			if ee.Scope.Kind() == "tenant" {
				msg += r.m.tenantSpent(ctx, ee.Scope, tb.Period, now)
			}
		}
		return &failure.Error{Kind: failure.Fatal, Reason: failure.BudgetExceeded, Message: msg, Cause: err}
	}
	if err := r.stillRunning(); err != nil {
		for _, res := range rs {
			if !res.Spend { // a turn spent stays counted
				_ = r.m.st.Release(context.WithoutCancel(ctx), res.ID)
			}
		}
		return err
	}
	r.mu.Lock()
	if tokIdx >= 0 {
		a.tokID = rs[tokIdx].ID
	}
	if money {
		a.resID, a.scopes, a.tb, a.held = rs[len(rs)-1].ID, scopes, tb, s.EstimatedCost
	}
	r.mu.Unlock()
	return nil
}

// reserve holds every reservation of rs or none: in one write when the
// store is a budget.BatchLedger, else one after another, giving back the
// earlier ones when one fails. On error it returns the index of the
// reservation refused (-1 when unknown).
func (m *Manager) reserve(ctx context.Context, rs []budget.Reservation) (int, error) {
	if bl, ok := m.st.(budget.BatchLedger); ok && len(rs) > 1 {
		err := bl.ReserveAll(ctx, rs)
		if err == nil {
			return 0, nil
		}
		if ee, ok := errors.AsType[*budget.ExceededError](err); ok {
			for i, res := range rs {
				if res.ID == ee.ID {
					return i, err
				}
			}
		}
		return -1, err
	}
	// One at a time: the spends last, as they cannot be given back.
	order := make([]int, 0, len(rs))
	for _, spend := range []bool{false, true} {
		for i, res := range rs {
			if res.Spend == spend {
				order = append(order, i)
			}
		}
	}
	for k, i := range order {
		if err := m.st.Reserve(ctx, rs[i]); err != nil {
			for _, j := range order[:k] {
				_ = m.st.Release(context.WithoutCancel(ctx), rs[j].ID)
			}
			return i, err
		}
	}
	return 0, nil
}

// holdWaits are the waits before a reservation the ledger refused is asked
// again, while holds may clear (holdsMayClear): the first (0) waits for
// this process's own settles of the scope to be written, the others for
// another process's, about 0.4 s in all. A refusal comes that much
// later; an admission that fits is not delayed at all.
var holdWaits = []time.Duration{0, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}

// holdFlushWait bounds the wait for the run's own settles in waitForHolds.
const holdFlushWait = 200 * time.Millisecond

// holdsMayClear reports whether a reservation the ledger refused (err)
// would fit the scope once what is held there is settled: the scope's
// settled amount plus the reservation is within its limit, so what stops
// it is held by steps in flight or by settles not yet written. A step's
// estimate (its prompt and whole output limit) often dwarfs its cost, and
// a settle within it is written in the background: a run whose next call
// came at once was stopped budget_exceeded with 1% of its limit spent
// (adversarial review, session 26). Turns are spent when admitted: a turn
// scope never clears.
func (r *Run) holdsMayClear(ctx context.Context, err error) bool {
	ee, ok := errors.AsType[*budget.ExceededError](err)
	if !ok || ee.Scope == TurnScope(r.id) || ee.Limit <= 0 {
		return false
	}
	b, berr := r.m.st.Balance(ctx, ee.Scope)
	return berr == nil && b.Reserved > 0 && b.Settled.Add(ee.Amount) <= ee.Limit
}

// waitForHolds waits d, or, for d = 0, until the run's own settles are
// written (for at most holdFlushWait): other runs' are waited for by time
// only, since a flush of every run would wait on any of them (a quoted
// step whose client does not read, say). ctx is the step's: a kill or
// the deadline ends the wait, and its error is returned.
func (r *Run) waitForHolds(ctx context.Context, d time.Duration) error {
	if d == 0 {
		fctx, cancel := context.WithTimeout(ctx, holdFlushWait)
		defer cancel()
		_ = r.Flush(fctx)
		return ctx.Err()
	}
	return retry.Sleep(ctx, d)
}

// notFit is the message of a money refusal: what was estimated, and which
// limit it would pass (the run's MaxCost or the tenant's period budget,
// counting what is spent and reserved there).
func notFit(estimate budget.USD, scope budget.Scope, limit budget.USD) string {
	return fmt.Sprintf("estimated cost %s does not fit %s", estimate, limitOf(scope, limit))
}

// limitOf names the money limit of scope: the run's cost limit, the
// tenant's budget.
func limitOf(scope budget.Scope, limit budget.USD) string {
	what := "the limit of " + string(scope)
	switch scope.Kind() {
	case "run":
		what = "the run's cost limit"
	case "tenant":
		what = "the tenant's budget"
	}
	return fmt.Sprintf("%s of %s (with what is spent and reserved)", what, limit)
}

// tenantSpent is what a refusal by a tenant's budget adds: what the tenant
// spent and holds in scope, and when its period ends (helper finding: the
// refusal named only the budget); a balance that cannot be read is said.
func (m *Manager) tenantSpent(ctx context.Context, scope budget.Scope, p budget.Period, now time.Time) string {
	ends := p.End(now).Format(time.RFC3339)
	b, err := m.st.Balance(context.WithoutCancel(ctx), scope)
	if err != nil {
		return fmt.Sprintf("; %s ends %s (its balance could not be read: %v)", scope, ends, err)
	}
	return fmt.Sprintf("; the tenant has spent %s and holds %s for calls in flight in %s, which ends %s",
		b.Settled, b.Reserved, scope, ends)
}

// waitPrivate waits until the ledger entries of the steps admitted in
// memory (see reserveAll) have been written.
func (r *Run) waitPrivate(ctx context.Context) error {
	return r.waitUntil(ctx, func() bool { return r.privateOpen == 0 })
}

// privateWritten marks a step admitted in memory as written to the ledger.
func (a *Admitted) privateWritten() {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.private {
		a.private = false
		r.privateOpen--
		r.written.Broadcast()
	}
}

// stillRunning reports ErrEnded when the run was drained (killed, out of
// time, finished) while a step was being reserved. A refusal of another
// step (a soft end) lets this one through: it passed its checks first.
func (r *Run) stillRunning() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drained {
		return ErrEnded
	}
	return nil
}

// turnUnit is what one turn takes in a turn scope.
const turnUnit = budget.USD(1)

// turnsUsedError is the cause of a turn the ledger refused: the run's turn
// scope holds its limit (another process may have used the turns). Its
// text counts turns, where the ledger's error (wrapped) shows them as
// amounts of turnUnit.
type turnsUsedError struct {
	scope budget.Scope
	limit int
	err   error
}

func (e *turnsUsedError) Error() string {
	return fmt.Sprintf("%v: the turn limit of %d is used up in scope %q", budget.ErrExceeded, e.limit, e.scope)
}

func (e *turnsUsedError) Unwrap() error { return e.err }

// TurnScope returns the ledger scope that counts the turns of a run with
// a turn limit across processes: "turns:<runID>". Each admitted model step
// of such a run spends one unit (budget.USD(1), not money) at once
// (budget.Reservation.Spend), under a limit of Limits.MaxTurns units, in
// the same ledger write as the step's money, so Settled of the scope is
// the number of turns admitted by every process. A run without a turn
// limit takes none; its recorded turn count is the largest of the
// processes' counts.
func TurnScope(runID string) budget.Scope { return budget.Scope("turns:" + runID) }

// TokenScope returns the ledger scope that counts the tokens (prompt and
// output) of a run that is not a Spec.Single run, limited by its
// MaxTokens: a model step reserves its estimated tokens when it is
// admitted and settles the tokens it used, so that the token limit, and
// the run's token counts in its record, hold across the processes that
// share a store, as its money does. OutputTokenScope counts the output
// part (spent at each settle), from which the record's split is read. A
// Single run (one call, in one process) counts its tokens in memory only.
func TokenScope(runID string) budget.Scope { return budget.Scope("tokens:" + runID) }

// OutputTokenScope returns the ledger scope that counts a run's output
// tokens (see TokenScope).
func OutputTokenScope(runID string) budget.Scope { return budget.Scope("tokens-out:" + runID) }

// LedgerScopes returns every ledger scope of run runID's own: its cost
// (budget.RunScope), turns, tokens and output tokens. Its tenant's scopes
// are not its own. For store.RunPruner.
func LedgerScopes(runID string) []budget.Scope {
	return []budget.Scope{budget.RunScope(runID), TurnScope(runID), TokenScope(runID), OutputTokenScope(runID)}
}

// Prune deletes from p the runs that ended before before, with their
// spans and LedgerScopes, batch runs per transaction (at least 1), until
// none is left; it returns how many it deleted, also when a batch failed
// (the error then says how many went before it).
func Prune(ctx context.Context, p store.RunPruner, before time.Time, batch int) (int, error) {
	total := 0
	for {
		n, err := p.PruneRuns(ctx, before, batch, LedgerScopes)
		total += n
		if err != nil {
			return total, fmt.Errorf("run: pruned %d runs, then: %w", total, err)
		}
		if n < batch {
			return total, nil
		}
	}
}

// tokensFirst reports whether the step's Settle settles its tokens before
// it returns (see Settle): a step of a run with a token limit whose tokens
// are in the ledger. Under r.mu.
func (a *Admitted) tokensFirst() bool { return a.tokID != "" && a.r.rec.Limits.MaxTokens > 0 }

// ledgerCounts reports whether the run counts its turns and tokens in the
// ledger whatever its limits (see TokenScope), so that its record counts
// every process's: a run that is not a Single run. A Single run counts its
// turns there only under a turn limit.
func (r *Run) ledgerCounts() bool { return !r.single }

func (r *Run) unadmitLocked(a *Admitted) {
	if a.step.Kind == KindModel {
		r.rec.Turns--
	} else {
		r.rec.ToolCalls--
	}
	r.pending -= a.tokens
	delete(r.open, a)
}

// stopMessage returns what a stopped run's record says of its stop (its
// Error, "fatal: killed: killed by the kill switch (run r1): runaway"),
// without the kind and reason that the refusal names already.
func stopMessage(recErr, reason string) string {
	if _, r, rest, ok := failure.ParseText(recErr); ok && string(r) == reason {
		if msg, ok := strings.CutPrefix(rest, ": "); ok {
			return msg
		}
	}
	return recErr
}

// checkLocked runs the admission checks before the budget, in order.
func (r *Run) checkLocked(s Step, now time.Time) *failure.Error {
	if r.ended {
		if !r.deadline.IsZero() && !now.Before(r.deadline) && r.rec.Status != store.RunStopped {
			return refusal(failure.DeadlineExceeded, "run deadline of %v passed", r.rec.Limits.Deadline)
		}
		if r.rec.Status == store.RunStopped {
			if why := stopMessage(r.rec.Error, r.rec.StopReason); why != "" {
				return refusal(failure.Reason(r.rec.StopReason), "run %s was stopped (%s): %s", r.id, r.rec.StopReason, why)
			}
			return refusal(failure.Reason(r.rec.StopReason), "run %s was stopped (%s)", r.id, r.rec.StopReason)
		}
		fe := refusal(failure.RunEnded, "run %s has ended (%s)", r.id, r.rec.Status)
		fe.Cause = ErrEnded // as ErrEnded's doc says (a newcomer's errors.Is found it missing)
		return fe
	}
	ks := r.m.loadKills()
	if k, ok := ks.forRun(r.id, r.tenant); ok {
		return killFailure(k)
	}
	if k, ok := ks.forStep(s); ok {
		return killFailure(k)
	}
	lim := r.rec.Limits
	if s.Kind == KindModel && lim.MaxTurns > 0 && r.rec.Turns >= lim.MaxTurns {
		return refusal(failure.MaxTurnsExceeded, "%s", turnsUsed(lim.MaxTurns))
	}
	if !r.deadline.IsZero() && !now.Before(r.deadline) {
		return refusal(failure.DeadlineExceeded, "run deadline of %v passed", lim.Deadline)
	}
	if lim.MaxTokens > 0 && (s.Kind == KindModel || s.EstimatedTokens > 0) {
		used := r.rec.InputTokens + r.rec.OutputTokens + r.pending
		if used >= lim.MaxTokens || s.EstimatedTokens > lim.MaxTokens-used {
			lower := ""
			if s.OutputLimitField != "" {
				lower = "; a lower " + s.OutputLimitField + " asks for less"
			}
			return refusal(failure.BudgetExceeded, "token limit: the run's limit of %d tokens holds %d used or in flight, and this call is "+
				"estimated at %d (its prompt and its output limit%s)",
				lim.MaxTokens, used, s.EstimatedTokens, lower)
		}
	}
	return nil
}

// refuse ends a refused admission: the step's context is freed and, for
// the run's own limits, the run stops.
func (r *Run) refuse(ctx context.Context, a *Admitted, fe *failure.Error) error {
	a.done()
	if fe.Reason == failure.Killed {
		if k, ok := r.m.loadKills().forRun(r.id, r.tenant); ok {
			r.kill(ctx, k)
			return fe
		}
	}
	if stopsRun(fe.Reason) {
		_ = r.end(ctx, store.RunStopped, fe, hardStop(fe.Reason))
	}
	return fe
}

// recordRefused records the span of a model step its admission refused
// (a limit, a kill, the run ended: its deadline passed after its last
// call, or it was stopped or finished): a "chat" span with status error
// and the refusal's reason, so the run's trace shows every call its agent
// made (a newcomer found the 504 of a call after the run's end nowhere; an
// adversarial review, the 403s of calls past the turn limit). The run's
// own span and record are left as they are. A tool step's refusal is
// recorded by Run.Tool.
func (r *Run) recordRefused(a *Admitted, fe *failure.Error) {
	if a.step.Kind != KindModel || fe == nil {
		return
	}
	a.end = a.start
	r.m.sink.Record(a.modelSpan(budget.Usage{}, Outcome{Err: fe}, 0, false))
}

// done frees the step's context.
func (a *Admitted) done() {
	a.unlink()
	a.cancel(nil)
	if a.stopDeadline != nil {
		a.stopDeadline()
	}
}

// settleDone ends what close began: the step's Settle or FailWith has
// counted it and registered its writes (Manager.End waits for it).
func (a *Admitted) settleDone() {
	r := a.r
	r.mu.Lock()
	r.closing--
	r.written.Broadcast()
	r.mu.Unlock()
}

// unlink stops the link from the run's context to the step's, if any.
func (a *Admitted) unlink() {
	if a.stopAF != nil {
		a.stopAF()
	}
}

func (a *Admitted) releaseReservation(ctx context.Context) {
	a.r.mu.Lock()
	ids := a.holds(nil)
	a.r.mu.Unlock()
	for _, id := range ids {
		_ = a.r.m.st.Release(ctx, id)
	}
}

// Cover makes the step hold at least total: when total is above what it
// holds (its estimated cost, and what earlier calls of Cover added), the
// difference is reserved in the step's scopes (the run's cost limit and
// the tenant's budget) in one ledger write, or nothing is. A caller that
// retries a call or falls back after attempts that used tokens covers
// what they used plus the next attempt's estimate before making it, so
// that the money limits bound every attempt, not only the first (an
// adversarial review: a $0.03 run was charged $0.08 over four attempts).
// Settle charges the step's cost and releases all it holds.
//
// A refusal is a Fatal BudgetExceeded *failure.Error and changes
// nothing: the step stays open, for its caller to settle what was used.
// Other errors are the store's, or ctx's cause when it ends while an
// earlier Cover of the step is still running. Cover on a closed step
// returns ErrSettled. It is safe for concurrent use: Covers of one step run
// one after another; a Cover that races its step's Settle gives back what
// it reserved.
func (a *Admitted) Cover(ctx context.Context, total budget.USD) error {
	r := a.r
	release, err := a.coverTurn(ctx) // r.mu held
	if err != nil {
		return err
	}
	defer release()
	held, scopes := a.held, a.scopes
	more := total.Sub(held)
	if more <= 0 {
		r.mu.Unlock()
		return nil
	}
	if a.private {
		// Admitted in memory: the run's own limit is the only one (see
		// reserveAll), and this process holds all of the run's money.
		if lim := scopes[0].Limit; lim > 0 && total > lim {
			r.mu.Unlock()
			return coverRefusal(total, held, scopes[0].Scope, lim, &budget.ExceededError{Scope: scopes[0].Scope, Amount: more, Limit: lim})
		}
		a.held = total
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	now := r.m.now()
	if scopes == nil {
		scopes, _ = r.scopes(now)
	}
	id := ids.New()
	err = r.m.st.Reserve(ctx, budget.Reservation{ID: id, Owner: r.m.owner, Scopes: scopes, Amount: more,
		ExpiresAt: now.Add(r.m.cfg.ReservationTTL)})
	if err != nil {
		if !errors.Is(err, budget.ErrExceeded) {
			return fmt.Errorf("run: reserve: %w", err)
		}
		scope, lim := scopes[0].Scope, scopes[0].Limit
		if ee, ok := errors.AsType[*budget.ExceededError](err); ok {
			scope, lim = ee.Scope, ee.Limit
		}
		return coverRefusal(total, held, scope, lim, err)
	}
	r.mu.Lock()
	if a.settled { // Settle or Fail released what it knew of
		r.mu.Unlock()
		_ = r.m.st.Release(context.WithoutCancel(ctx), id)
		return ErrSettled
	}
	a.extra = append(a.extra, id)
	a.held = a.held.Add(more)
	r.mu.Unlock()
	return nil
}

// holds appends the ids of the step's ledger reservations to ids. Under
// r.mu.
func (a *Admitted) holds(ids []string) []string {
	if a.resID != "" {
		ids = append(ids, a.resID)
	}
	if a.tokID != "" {
		ids = append(ids, a.tokID)
	}
	ids = append(ids, a.extra...)
	return append(ids, a.tokExtra...)
}

// coverTurn waits, until ctx ends, for the step's turn to change what it
// holds (Cover, HoldTokens run one after another), and returns its
// release with r.mu held; a closed step gives ErrSettled, holding
// neither.
func (a *Admitted) coverTurn(ctx context.Context) (func(), error) {
	r := a.r
	r.mu.Lock()
	if a.cover == nil {
		a.cover = make(chan struct{}, 1)
	}
	turn := a.cover
	r.mu.Unlock()
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	r.mu.Lock()
	if a.settled {
		r.mu.Unlock()
		<-turn
		return nil, ErrSettled
	}
	return func() { <-turn }, nil
}

// HoldTokens makes the step count at least n tokens (those its attempts
// used so far and its next attempt's estimate) against the run's token
// limit (Limits.MaxTokens), as Cover does for money: a caller that
// retries a call or falls back after attempts that used tokens holds
// them before the next attempt (an adversarial review: one call's
// retries took a run to 4,187 tokens past a limit of 2,500). The hold
// counts, with the step's own estimate, until the step closes: in this
// process's count and, for a run that counts its tokens in the ledger
// (see TokenScope), as a reservation there, so that it holds across
// processes. A refusal is a Fatal BudgetExceeded *failure.Error and
// changes nothing; the step stays open. Other errors are the store's, or
// ctx's cause. HoldTokens on a closed step returns ErrSettled. Safe for
// concurrent use: holds of one step run one after another, with its
// Covers.
func (a *Admitted) HoldTokens(ctx context.Context, n int64) error {
	r := a.r
	release, err := a.coverTurn(ctx) // r.mu held
	if err != nil {
		return err
	}
	defer release()
	more := n - a.tokens
	lim := r.rec.Limits.MaxTokens
	if more <= 0 {
		r.mu.Unlock()
		return nil
	}
	if lim > 0 {
		others := r.rec.InputTokens + r.rec.OutputTokens + r.pending - a.tokens
		if others+n > lim {
			r.mu.Unlock()
			return holdRefusal(n, lim, fmt.Sprintf("%d used or in flight by the rest of the run", others))
		}
	}
	ledger := a.tokID != ""
	r.mu.Unlock()
	var id string
	if ledger {
		id = ids.New()
		err := r.m.st.Reserve(ctx, budget.Reservation{ID: id, Owner: r.m.owner, Amount: budget.USD(more),
			Scopes: []budget.ScopeLimit{{Scope: TokenScope(r.id), Limit: budget.USD(lim)}}, ExpiresAt: r.m.now().Add(r.m.cfg.ReservationTTL)})
		if errors.Is(err, budget.ErrExceeded) {
			return holdRefusal(n, lim, "with what the run's calls, in every process sharing the store, used and hold")
		}
		if err != nil {
			return fmt.Errorf("run: reserve tokens: %w", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.settled { // Settle or Fail released what it knew of
		if id != "" {
			_ = r.m.st.Release(context.WithoutCancel(ctx), id)
		}
		return ErrSettled
	}
	if id != "" {
		a.tokExtra = append(a.tokExtra, id)
	}
	r.pending += n - a.tokens
	a.tokens = n
	return nil
}

// holdRefusal is HoldTokens' refusal: n tokens do not fit the run's token
// limit lim, for the reason why.
func holdRefusal(n, lim int64, why string) *failure.Error {
	return &failure.Error{Kind: failure.Fatal, Reason: failure.BudgetExceeded,
		Message: fmt.Sprintf("token limit: the call's tokens so far with its next attempt's estimate, %d, do not fit the run's limit of %d (%s)", n, lim, why)}
}

// coverRefusal is Cover's refusal: total does not fit in scope's limit,
// the step holding held.
func coverRefusal(total, held budget.USD, scope budget.Scope, limit budget.USD, cause error) *failure.Error {
	return &failure.Error{Kind: failure.Fatal, Reason: failure.BudgetExceeded, Cause: cause,
		Message: fmt.Sprintf("the call's cost so far with its next attempt's estimate, %s (%s more than it holds), does not fit %s",
			total, total.Sub(held), limitOf(scope, limit))}
}

// close marks the step settled and removes it from the run; it reports
// false when it already was.
func (a *Admitted) close() bool {
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.settled {
		return false
	}
	a.settled = true
	r.closing++
	r.pending -= a.tokens
	delete(r.open, a)
	a.end = r.m.now()
	r.lastActive = a.end // with the step's removal: see idleAtDeadline
	return true
}

// Call admits step, calls fn with the step's context, and settles the
// usage fn returns. When fn fails, the usage it returns (a partial stream,
// say) is still charged, or the reservation released when it is zero; the
// error returned is fn's, or the run's kill or stop failure when that is
// what canceled fn. Admission refusals are returned as from Admit. When
// fn panics, the step is failed (its reservation released) and the panic
// goes on up: a step left open would hold its money until the run ends.
func (r *Run) Call(ctx context.Context, step Step, fn func(ctx context.Context) (budget.Usage, error)) error {
	a, err := r.Admit(ctx, step)
	if err != nil {
		return err
	}
	u, ferr := func() (budget.Usage, error) {
		defer func() {
			if p := recover(); p != nil {
				_ = a.Fail(context.WithoutCancel(ctx), fmt.Errorf("run: the step's function panicked: %v", p))
				panic(p)
			}
		}()
		return fn(a.ctx)
	}()
	if ferr == nil {
		return a.Settle(ctx, u, Outcome{})
	}
	ferr = a.cause(ferr)
	if !u.Empty() {
		_ = a.Settle(ctx, u, Outcome{Err: ferr})
	} else {
		_ = a.Fail(ctx, ferr)
	}
	return ferr
}

// cause returns the run's failure when the step's context was canceled by
// the run and err is that cancellation.
func (a *Admitted) cause(err error) error {
	if a.ctx.Err() == nil || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if fe := failure.As(context.Cause(a.ctx)); fe != nil {
		return fe
	}
	return err
}

// AddTokens returns a+b for token counts (not negative), saturating at
// math.MaxInt64: an output limit of 2^63-1 (the largest a request can
// send) wrapped a sum negative, and the step passed a token limit (an
// adversarial review).
func AddTokens(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}
