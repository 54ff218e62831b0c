package route

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
)

// Attempt records one call to one deployment, for traces.
type Attempt struct {
	Deployment string
	// Start is when the call began; Duration how long it took.
	Start    time.Time
	Duration time.Duration
	// Failure is the classified failure, nil for a success.
	Failure *failure.Error
	// Wait is the backoff or server-requested delay slept before the call
	// (zero for the first call on a deployment).
	Wait time.Duration
	// Breaker is the deployment's breaker state when it admitted the call
	// (Closed or HalfOpen).
	Breaker breaker.State
	// RetryRefused is true when the retry policy would have retried after
	// this attempt but the deployment's retry budget (retry.Budget) had no
	// room: the call moved to the next deployment, or failed with attempts
	// left when this was the last.
	RetryRefused bool
}

// inlineAttempts is how many attempts a Result holds without allocating.
const inlineAttempts = 4

// Result describes one Do call, whether it succeeded or not.
type Result struct {
	// Deployment is the deployment that served the call; nil on failure.
	Deployment *Deployment
	// Degraded is true when the call was served by other than the alias's
	// first deployment: after a fallback for any reason (degraded failure,
	// open breaker, retries used up, context-window or content fallback).
	Degraded bool

	n      int
	inline [inlineAttempts]Attempt
	more   []Attempt

	nRefused    int
	refused     [inlineAttempts]string
	moreRefused []string
}

// Attempts returns the record of every call made, in order. The slice is
// valid as long as r is and must not be modified.
func (r *Result) Attempts() []Attempt {
	if r.more != nil {
		return r.more
	}
	return r.inline[:r.n]
}

// Refused returns the names of the deployments whose breakers refused a
// call, in order. The slice is valid as long as r is and must not be
// modified.
func (r *Result) Refused() []string {
	if r.moreRefused != nil {
		return r.moreRefused
	}
	return r.refused[:r.nRefused]
}

func (r *Result) refuse(name string) {
	if r.moreRefused == nil && r.nRefused < inlineAttempts {
		r.refused[r.nRefused] = name
		r.nRefused++
		return
	}
	if r.moreRefused == nil {
		r.moreRefused = append(make([]string, 0, 2*inlineAttempts), r.refused[:r.nRefused]...)
	}
	r.moreRefused = append(r.moreRefused, name)
	r.nRefused++
}

// lastAttempt returns the latest attempt added; there must be one.
func (r *Result) lastAttempt() *Attempt {
	if r.more != nil {
		return &r.more[len(r.more)-1]
	}
	return &r.inline[r.n-1]
}

func (r *Result) add(a Attempt) {
	if r.more == nil && r.n < inlineAttempts {
		r.inline[r.n] = a
		r.n++
		return
	}
	if r.more == nil {
		r.more = append(make([]Attempt, 0, 2*inlineAttempts), r.inline[:r.n]...)
	}
	r.more = append(r.more, a)
	r.n++
}

// Do calls call for the alias's deployments in order until one succeeds or
// the chain must stop, and returns what happened.
//
// For each deployment whose breaker admits the call: a transient failure is
// retried on the same deployment under the retry policy and budget, except
// a timeout on a deployment that another follows in the chain, which moves
// to the next deployment at once (a retry would likely wait a whole timeout
// again; the deployment is revisited on a later pass as below); a
// degraded failure (or a transient one that may not be retried there) moves
// to the next deployment; a permanent failure stops, unless the alias has a
// context-window or content-policy fallback for it, tried once; a fatal one
// stops. The attempt budget (Config.MaxAttempts) and ctx's deadline hold for
// the whole chain: a wait that would end at or after the deadline is not
// begun, and Do stops at once with a Fatal DeadlineExceeded failure whose
// Cause is the last attempt's failure.
//
// When the last deployment of a chain of two or more is left and attempts
// are left, Do makes another pass over the deployments it left with a
// transient failure it could still retry (its Retry.MaxAttempts used up, or
// its retry budget refusing), and over those whose breakers refused the
// call, which may admit it now; not over one it left for a degraded failure
// or for x-should-retry: false. Each revisit starts with a retry: it waits
// the policy's first backoff (or the server's Retry-After; see
// retry.Policy.Revisit), whatever Retry.MaxAttempts, and needs room in the
// deployment's retry budget (looked at before the wait, so that no wait is
// begun for a retry the budget would refuse), and may make up to
// Retry.MaxAttempts attempts. A failure on a revisit is handled as on the
// first pass (a permanent one gets the alias's fallback). Passes go on while
// attempts are left and the last pass made at least one. So a deployment
// whose breaker opens (or an operator disabled) does not cut a call's
// attempts to the other deployments' MaxAttempts.
//
// call receives the attempt's context and the deployment, which it must not
// modify; it returns nil on success or an error, classified with
// failure.ClassifyError unless it is (or wraps) a *failure.Error. Do returns
// a nil error on success; otherwise the final *failure.Error, with its
// Deployment set. When every breaker of the chain refused, call is never
// called and the error is a Degraded CircuitOpen failure that matches
// breaker.ErrOpen and names the alias; like the breaker's, it is shared by
// all such calls: read it, do not modify it.
// An unknown alias gives a Permanent ModelNotFound failure. The Result is
// filled in either case.
func (r *Router) Do(ctx context.Context, alias string, call func(ctx context.Context, d *Deployment) error) (Result, error) {
	c := r.aliases[alias]
	if c == nil {
		return Result{}, &failure.Error{Kind: failure.Permanent, Reason: failure.ModelNotFound,
			Message: fmt.Sprintf("route: unknown model alias %q", alias)}
	}
	// res lives inside l, not behind a pointer, so that it stays on the
	// stack: the success path does not allocate.
	l := loop{r: r, alias: alias, ctx: ctx, call: call, limit: c.maxAttempts}
	res := &l.res
	members, fellBack := c.members, false
	var last *failure.Error
	var visit uint64 // on a further pass, bit i: go back to member i
passes:
	for pass := 0; ; pass++ {
		before := res.n
		for i, m := range members {
			var prev *failure.Error
			if pass > 0 {
				if i >= 64 || visit&(1<<uint(i)) == 0 {
					continue
				}
				prev = l.lasts[i]
			}
			out, f := l.deployment(m, prev, pass == 0 && i < len(members)-1)
			if out == served {
				res.Deployment = &m.d
				res.Degraded = fellBack || i > 0
				return *res, nil
			}
			if f != nil {
				last = f
			}
			switch out {
			case spent, refused:
				l.mark(i, len(members), f, out == spent)
			case stop:
				if f == nil { // the attempt budget ran out before m's first attempt
					return *res, last
				}
				if fb := c.fallbackFor(f); fb != nil && !fellBack {
					members, fellBack = fb, true
					visit, l.again, l.lasts, l.spent = 0, 0, nil, false
					pass = -1
					continue passes
				}
				return *res, f
			}
		}
		if !l.spent || res.n >= l.limit || (pass > 0 && res.n == before) {
			break
		}
		visit, l.again, l.spent = l.again, 0, false
	}
	if last == nil { // every breaker of the primary chain refused
		return *res, c.errAllOpen
	}
	return *res, last
}

// mark notes that member i of a chain of n may be revisited: it was left
// with a retryable transient failure f (spent), or its breaker refused.
// Only the first 64 members of a chain are revisited. A refusal does not
// allocate: the all-open path stays free of allocations.
func (l *loop) mark(i, n int, f *failure.Error, spent bool) {
	if n < 2 || i >= 64 {
		return
	}
	l.again |= 1 << uint(i)
	if spent {
		if l.lasts == nil {
			l.lasts = make([]*failure.Error, n)
		}
		l.lasts[i] = f
		l.spent = true
	}
}

// fallbackFor returns the fallback chain configured for a permanent failure.
func (c *chain) fallbackFor(f *failure.Error) []*member {
	switch {
	case f == nil || f.Kind != failure.Permanent:
		return nil
	case f.Reason == failure.ContextLengthExceeded:
		return c.contextFallback
	case f.Reason == failure.ContentFiltered:
		return c.contentFallback
	}
	return nil
}

// allOpenError is the failure for an alias whose every breaker refused.
func allOpenError(alias string, n int) *failure.Error {
	msg := fmt.Sprintf("route: alias %q: all %d deployments' breakers are open (or the deployments are disabled)", alias, n)
	if n == 1 {
		msg = fmt.Sprintf("route: alias %q: its deployment's breaker is open (or the deployment is disabled)", alias)
	}
	return &failure.Error{Kind: failure.Degraded, Reason: failure.CircuitOpen, Message: msg, Cause: breaker.ErrOpen}
}

type outcome uint8

const (
	served outcome = iota
	next
	stop
	// spent: left with a transient failure that could be retried there
	// later (its attempts used up, or its retry budget refusing).
	spent
	// refused: its breaker refused the first attempt, or Skip passed over it
	// (before any attempt, or before a retry).
	refused
)

// loop is the state of one Do call.
type loop struct {
	r     *Router
	alias string // the alias Do was called with
	ctx   context.Context
	call  func(context.Context, *Deployment) error
	res   Result
	limit int
	// again has bit i set when member i of the current chain is to be
	// revisited; lasts[i] is the failure it was left with (nil before it
	// made an attempt; lasts is nil until a member is left spent). spent
	// is true when a member was left spent in the current pass.
	again uint64
	lasts []*failure.Error
	spent bool
}

// deployment makes the attempts on m: the first, and retries while the
// policy, the retry budget, the breaker, the attempt budget and the deadline
// allow. prev is nil on a first visit; on a revisit it is the failure m was
// left with, and the first attempt is a retry after it (or, when prev is
// nil on a revisit, a first attempt). moreAfter says a deployment follows
// m in the chain's first pass: a timed-out attempt then moves on to it
// rather than retrying m. It returns the failure to report unless served.
func (l *loop) deployment(m *member, prev *failure.Error, moreAfter bool) (outcome, *failure.Error) {
	var last *failure.Error
	var wait time.Duration
	begun := false    // m.budget counts this call as a request in flight
	retrying := false // holds a retry from m.budget
	defer func() {
		if retrying {
			m.budget.DoneRetry()
		}
		if begun {
			m.budget.End()
		}
	}()
	if prev != nil {
		// A revisit: check what would refuse the retry before waiting
		// for it.
		if l.res.n >= l.limit {
			return stop, nil
		}
		if l.r.skip != nil && l.r.skip(l.alias, &m.d) || m.b.State() == breaker.Open {
			l.res.refuse(m.d.Name)
			return refused, nil
		}
		m.budget.Begin()
		begun = true
		if !m.budget.Room() {
			return next, nil
		}
		d := l.r.policy.Revisit(prev, l.r.rand(), l.left())
		switch d.Action {
		case retry.Stop:
			return stop, d.Failure
		case retry.Next:
			return next, nil
		}
		wait = d.Wait
		if err := retry.Sleep(l.ctx, wait); err != nil {
			return stop, contextFailure(err, prev)
		}
		if !m.budget.TryRetry() {
			return next, nil
		}
		retrying = true
		last = prev
	}
	for try := 1; ; try++ {
		if l.res.n >= l.limit {
			return stop, last
		}
		if err := l.ctx.Err(); err != nil {
			return stop, contextFailure(err, last)
		}
		if l.r.skip != nil && l.r.skip(l.alias, &m.d) { // also before a retry: a kill applies to calls retrying on it
			l.res.refuse(m.d.Name)
			return refused, nil
		}
		ticket, err := m.b.Allow()
		if err != nil {
			if try == 1 {
				l.res.refuse(m.d.Name)
				return refused, nil
			}
			return next, last // our own failures opened it
		}
		if !begun {
			m.budget.Begin()
			begun = true
		}
		start := time.Now()
		f := l.try(m, ticket)
		end := time.Now()
		l.res.add(Attempt{Deployment: m.d.Name, Start: start, Duration: end.Sub(start), Failure: f, Wait: wait, Breaker: ticket.State()})
		if f == nil {
			ticket.DoneKindAt(failure.OK, end)
			return served, nil
		}
		ticket.DoneKindAt(healthKind(f), end)
		if retrying {
			m.budget.DoneRetry()
			retrying = false
		}
		d := l.r.policy.Decide(try, f, l.r.rand(), l.left())
		last = d.Failure
		switch {
		case d.Action == retry.Next && retryable(d.Failure):
			return spent, last
		case d.Action == retry.Next:
			return next, last
		case d.Action == retry.Stop:
			return stop, last
		case moreAfter && f.Reason == failure.Timeout:
			// A deployment that did not answer in time would likely cost
			// another whole timeout (a hang): the next one is tried now,
			// and m is revisited after the others if attempts are left
			// (a newcomer's hung primary used up a call's deadline on
			// retries, its healthy fallback never tried).
			return spent, last
		case l.res.n >= l.limit: // no attempt left to wait for
			return stop, last
		case m.b.State() == breaker.Open: // our failures tripped it: do not wait
			return next, last
		}
		wait = d.Wait
		if err := retry.Sleep(l.ctx, wait); err != nil {
			return stop, contextFailure(err, last)
		}
		// A retry holds the budget while its attempt is in flight, as
		// Envoy's retry budget counts active retry requests: waiting for a
		// server's Retry-After adds no load, so it does not hold the
		// budget; many slow retries at once (an upstream that is slow to
		// fail) do, and are refused.
		if !m.budget.TryRetry() {
			l.res.lastAttempt().RetryRefused = true
			return spent, last
		}
		retrying = true
	}
}

// try makes one attempt on m under ticket. An attempt that panics frees
// the ticket as a call that tells nothing of the deployment's health
// (as a permanent failure does: in half-open, its probe slot opens for
// another probe; a ticket never reported held it for good, and the
// breaker refused every later call) before the panic goes on.
func (l *loop) try(m *member, ticket breaker.Ticket) *failure.Error {
	defer func() {
		if p := recover(); p != nil {
			ticket.DoneKindAt(failure.Permanent, time.Now())
			panic(p)
		}
	}()
	return classify(l.call(l.ctx, &m.d), m.d.Name)
}

// retryable reports whether f, a failure the chain moved on after, could be
// retried on its deployment later: transient, and the server did not say
// not to retry.
func retryable(f *failure.Error) bool {
	return f.Kind == failure.Transient && !f.NoRetry
}

// healthKind is what a failed attempt tells the deployment's breaker. A
// rate limit is the server shedding this client's excess load, not a sign
// that the deployment is broken: the Retry-After it sends is honoured (or
// the chain moves on), and it counts as neither success nor failure, so a
// burst of 429s does not open the breaker and cut the deployment off for
// every caller (Envoy's outlier detection likewise ejects on 5xx and
// gateway failures, not on 429). A misdirected request (see
// failure.Error.Misdirected) says nothing of the deployment's health
// either.
func healthKind(f *failure.Error) failure.Kind {
	if f.Reason == failure.RateLimited || f.Misdirected {
		return failure.Permanent // counts as neither
	}
	return f.Kind
}

// left returns the time left before the context's deadline.
func (l *loop) left() time.Duration {
	if dl, ok := l.ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return retry.NoDeadline
}

// classify returns err as a *failure.Error naming the deployment, nil for
// nil. A caller's *failure.Error is copied, not modified.
func classify(err error, deployment string) *failure.Error {
	if err == nil {
		return nil
	}
	if fe := failure.As(err); fe != nil {
		if fe.Deployment == deployment {
			return fe
		}
		cp := *fe
		cp.Deployment = deployment
		return &cp
	}
	fe := failure.ClassifyError(err)
	fe.Deployment = deployment
	return fe
}

// contextFailure is the failure for a chain stopped by its context: Fatal
// DeadlineExceeded or Canceled, with the last attempt's failure as Cause
// when there was one.
func contextFailure(err error, last *failure.Error) *failure.Error {
	f := &failure.Error{Kind: failure.Fatal, Reason: failure.Canceled, Message: err.Error(), Cause: err}
	if errors.Is(err, context.DeadlineExceeded) {
		f.Reason = failure.DeadlineExceeded
	}
	if last != nil {
		f.Cause, f.Deployment = last, last.Deployment
	}
	return f
}
