package run

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// Run is one live run. Its methods are safe for concurrent use: several
// steps may be in flight at once, and their admissions never together pass
// a limit.
type Run struct {
	m        *Manager
	id       string
	tenant   string
	traceID  string
	spanID   string
	deadline time.Time // zero: none

	ctx    context.Context
	cancel context.CancelCauseFunc
	stopAF func() bool

	mu      sync.Mutex
	rec     store.Run
	pending int64 // estimated tokens of open steps
	open    map[*Admitted]struct{}
	events  []trace.Event
	ended   bool
	// costEstimated: some settled cost was an estimate.
	costEstimated bool
	dirty         bool // persistence: a newer record waits to be written
	writing       bool
}

func (m *Manager) newRun(rec store.Run) *Run {
	r := &Run{m: m, id: rec.ID, tenant: rec.Tenant, rec: rec, open: map[*Admitted]struct{}{},
		traceID: traceIDFor(rec.ID), spanID: runSpanIDFor(rec.ID)}
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	if rec.Status != store.RunRunning {
		r.ended = true
		r.cancel(failure.Wrap(failure.Canceled, fmt.Errorf("run %s %w (%s)", rec.ID, errEnded, rec.Status)))
		return r
	}
	if rec.Limits.Deadline > 0 {
		r.deadline = rec.Started.Add(rec.Limits.Deadline)
		cause := &failure.Error{Kind: failure.Fatal, Reason: failure.DeadlineExceeded,
			Message: fmt.Sprintf("run deadline of %v passed", rec.Limits.Deadline)}
		var cancelT context.CancelFunc
		r.ctx, cancelT = context.WithTimeoutCause(r.ctx, r.deadline.Sub(m.now()), cause)
		parentCancel := r.cancel
		r.cancel = func(err error) { parentCancel(err); cancelT() }
		// When the deadline passes the run stops on its own.
		r.stopAF = context.AfterFunc(r.ctx, func() {
			if fe := failure.As(context.Cause(r.ctx)); fe != nil && fe.Reason == failure.DeadlineExceeded {
				r.end(context.Background(), store.RunStopped, fe)
			}
		})
	}
	return r
}

// release frees the resources of a Run object that will not be used.
func (r *Run) release() {
	if r.stopAF != nil {
		r.stopAF()
	}
	r.cancel(nil)
}

// ID returns the run id.
func (r *Run) ID() string { return r.id }

// TraceID returns the trace id shared by the run's spans (32 hex digits,
// derived from the run id, so every process writes the same one).
func (r *Run) TraceID() string { return r.traceID }

// Context returns a context canceled when the run is killed, stopped,
// finished or its deadline passes; context.Cause gives the *failure.Error.
// Steps get contexts derived from it (Admitted.Context).
func (r *Run) Context() context.Context { return r.ctx }

// Deadline returns when the run's time is up, and false when it has no
// deadline (Limits.Deadline counted from the start).
func (r *Run) Deadline() (time.Time, bool) { return r.deadline, !r.deadline.IsZero() }

// Record returns a copy of the run's current record and counters.
func (r *Run) Record() store.Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.rec
	rec.Labels = maps.Clone(rec.Labels)
	return rec
}

// Finish ends the run with status succeeded, failed or stopped. err, if
// any, is recorded; for stopped its failure reason (errors.As
// *failure.Error) becomes the stop reason. Finish cancels the run's
// context, releases the reservations of steps still open (a step that
// settles later is still charged), writes the record and the run span. A
// run already ended keeps its first ending and Finish returns nil.
func (r *Run) Finish(ctx context.Context, status store.RunStatus, err error) error {
	switch status {
	case store.RunSucceeded, store.RunFailed, store.RunStopped:
	default:
		return fmt.Errorf("run: finish with status %q; want succeeded, failed or stopped", status)
	}
	return r.end(ctx, status, err)
}

// end is the one way a run ends.
func (r *Run) end(ctx context.Context, status store.RunStatus, err error) error {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return nil
	}
	r.ended = true
	r.rec.Status, r.rec.Ended = status, r.m.now()
	if err != nil {
		r.rec.Error = err.Error()
	}
	if status == store.RunStopped {
		r.rec.StopReason = string(failure.Canceled)
		if fe := failure.As(err); fe != nil {
			r.rec.StopReason = string(fe.Reason)
		}
	}
	open := make([]*Admitted, 0, len(r.open))
	for a := range r.open {
		open = append(open, a)
	}
	r.mu.Unlock()

	// Cancel first, so in-flight steps see the end before any I/O.
	cause := err
	if failure.As(err) == nil {
		cause = failure.Wrap(failure.Canceled, fmt.Errorf("run %s %w (%s)", r.id, errEnded, status))
	}
	r.cancel(cause)
	for _, a := range open {
		a.cancel(cause)
	}
	if r.stopAF != nil {
		r.stopAF()
	}
	ctx = context.WithoutCancel(ctx)
	for _, a := range open {
		a.releaseReservation(ctx)
	}
	r.m.forget(r)
	perr := r.persist(ctx)
	r.m.sink.Record(r.runSpan())
	return perr
}

// kill stops the run because of flag k.
func (r *Run) kill(ctx context.Context, k store.Kill) {
	if r.isEnded() {
		return
	}
	r.event("kill", map[string]any{"target": string(k.Target), "name": k.Name, "reason": k.Reason, "by": k.By})
	_ = r.end(ctx, store.RunStopped, killFailure(k))
}

func (r *Run) event(name string, attrs map[string]any) {
	r.mu.Lock()
	r.events = append(r.events, trace.Event{Name: name, Time: r.m.now(), Attrs: attrs})
	r.mu.Unlock()
}

func (r *Run) isEnded() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// persist writes the current record. Concurrent callers coalesce: while
// one goroutine writes, others mark the record dirty and the writer writes
// again, so the store ends with the newest record and no I/O happens under
// the lock.
func (r *Run) persist(ctx context.Context) error {
	r.mu.Lock()
	r.dirty = true
	if r.writing {
		r.mu.Unlock()
		return nil
	}
	r.writing = true
	var err error
	for r.dirty {
		r.dirty = false
		rec := r.rec
		rec.Labels = maps.Clone(rec.Labels)
		r.mu.Unlock()
		err = r.m.st.UpdateRun(ctx, rec)
		r.mu.Lock()
	}
	r.writing = false
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("run: write record %s: %w", r.id, err)
	}
	return nil
}

// scopes returns the ledger scopes a step of this run spends in (the run,
// and the tenant's period) and the tenant's budget (zero when none is
// configured: unlimited, the spend still recorded).
func (r *Run) scopes(now time.Time) ([]budget.ScopeLimit, TenantBudget) {
	tb, _ := r.m.cfg.tenantBudget(r.tenant)
	r.mu.Lock()
	maxCost := r.rec.Limits.MaxCost
	r.mu.Unlock()
	return []budget.ScopeLimit{
		{Scope: budget.RunScope(r.id), Limit: maxCost},
		{Scope: budget.TenantScope(r.tenant, tb.Period, now), Limit: tb.Limit},
	}, tb
}

// alerts checks the thresholds after a settle and reports the new ones.
func (r *Run) alerts(ctx context.Context, scopes []budget.ScopeLimit, tb TenantBudget) {
	var fired []budget.Alert
	if a, err := budget.CheckAlerts(ctx, r.m.st, scopes[0].Scope, scopes[0].Limit, r.m.cfg.RunAlertAt); err == nil {
		fired = append(fired, a...)
	}
	if a, err := budget.CheckAlerts(ctx, r.m.st, scopes[1].Scope, scopes[1].Limit, tb.AlertAt); err == nil {
		fired = append(fired, a...)
	}
	for _, a := range fired {
		r.event("budget.alert", map[string]any{
			"scope": string(a.Scope), "threshold": a.Threshold,
			"limit_usd": a.Limit.Float(), "settled_usd": a.Settled.Float(),
		})
		if r.m.cfg.OnAlert != nil {
			r.m.cfg.OnAlert(a)
		}
	}
}
