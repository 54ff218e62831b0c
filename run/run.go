package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	m      *Manager
	id     string
	tenant string
	// traceID and spanID are derived from id on first use (traceIDs):
	// spans are recorded after a gateway call is answered, so the hashing
	// stays off its request path.
	idsOnce  sync.Once
	traceID  string
	spanID   string
	deadline time.Time // zero: none
	// spanOrder (one slot) is held from the snapshot of the run's span to
	// its hand-over to the sink (recordRunSpan). A channel, not a
	// sync.Mutex, so that a test in a synctest bubble sees a recorder
	// waiting for it as durably blocked.
	spanOrder chan struct{}

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	stopAF  func() bool // stops the deadline callback; set by arm
	rec     store.Run
	pending int64 // estimated tokens of open steps
	// reserving counts the model steps counted in rec.Turns whose ledger
	// reservation is still in flight: a refusal may yet give their turns
	// back (a step that does not fit the money limit).
	reserving int
	open      map[*Admitted]struct{}
	// settling counts, per closed step, its ledger settles not done yet
	// (Admitted.settleWrite): its reservations are renewed until they
	// are (see Manager.renewOpen).
	settling map[*Admitted]int
	events   []trace.Event
	// eventsDropped counts the events left out (see maxEventsPerName).
	eventsDropped int64
	ended         bool
	// drained: the run's context is canceled. A hard end (kill, deadline,
	// Finish) drains at once; a soft one (a turn or money refusal) when
	// the last open step closes.
	drained  bool
	endCause error // the cause the context is canceled with
	// lastActive is when a step was last admitted or closed, or the run
	// last returned by Start or Get.
	lastActive time.Time
	// costEstimated: some settled cost was an estimate.
	costEstimated bool
	dirty         bool // persistence: a newer record waits to be written
	writing       bool
	writeMu       sync.Mutex    // held while a record is written, so writes do not cross
	lastFailed    bool          // the last model step settled or failed with an error
	ttl           time.Duration // Spec.IdleTTL; 0: the Manager's
	written       *sync.Cond    // on mu: broadcast when a background write ends
	// created: the record is in the store (Spec.Fresh runs start without).
	created bool
	// fresh: a Spec.Fresh run that has admitted no step yet (see
	// Run.reserveAll). privateOpen: first steps admitted in memory whose
	// ledger entries have not been written yet.
	fresh       bool
	privateOpen int
	freshSpec   bool // started with Spec.Fresh (for Manager.EndFresh)
	single      bool // Spec.Single: the run ends with its one step
	owned       bool // Spec.Owned: only its caller ends it
	// withCreate: the step admitted in memory of a Single run, whose
	// spends (createSpends) are written with the record's creation
	// (store.RunSpender), in one write. Under mu.
	withCreate   *Admitted
	createSpends []budget.Reservation
	creating     bool // writeRecord is creating the record
	// pendingBG: ledger writes of settled steps not done yet (see
	// Run.background); Flush waits for them and the run stays in memory.
	pendingBG int
	// quoted: steps that Admitted.Quote announced and that have not
	// settled yet; Flush waits for them. Under mu.
	quoted int
	// closing counts the steps closed whose Settle or FailWith has not
	// returned (their counts and writes are not all registered yet).
	closing int
	// tracked: the cleanup that drops r's idle entry is registered (see
	// Manager.keepIdle). Under Manager.mu.
	tracked bool
}

// newRun builds the object for rec; a record that has ended gives an ended
// run. The deadline is armed by arm, once the run is in the live table. A
// Single run has no timer of its own: its one step's context carries the
// deadline (see Admit).
func (m *Manager) newRun(rec store.Run, single bool) *Run {
	r := &Run{m: m, id: rec.ID, tenant: rec.Tenant, rec: rec, open: map[*Admitted]struct{}{},
		lastActive: m.now(), single: single, spanOrder: make(chan struct{}, 1), costEstimated: rec.CostEstimated}
	r.written = sync.NewCond(&r.mu)
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	if rec.Limits.Deadline > 0 {
		// Also for an ended run: a call after its deadline is refused
		// for the deadline (see checkLocked), whichever process or
		// object holds it (a newcomer got 409 run_ended once the ended
		// run had left memory, 504 before).
		r.deadline = rec.Started.Add(rec.Limits.Deadline)
	}
	if rec.Status != store.RunRunning {
		r.ended, r.drained = true, true
		r.cancel(failure.Wrap(failure.RunEnded, fmt.Errorf("run %s %w (%s)", rec.ID, ErrEnded, rec.Status)))
		return r
	}
	if rec.Limits.Deadline > 0 && !single {
		cause := r.deadlineFailure()
		var cancelT context.CancelFunc
		r.ctx, cancelT = context.WithTimeoutCause(r.ctx, r.deadline.Sub(m.now()), cause)
		parentCancel := r.cancel
		r.cancel = func(err error) { parentCancel(err); cancelT() }
	}
	return r
}

// recordRunSpan hands the run's span, as it is now, to the sink. The
// snapshot and the hand-over happen under spanOrder, so the run's span
// reaches the sink in the order of its snapshots, and the store, which
// keeps a span's last write, keeps the latest: a note taken while the run
// was live and handed over after the run's end (an adversarial review's
// finding) no longer replaces the ended span. The sink may block (a full
// recorder, up to its BlockTimeout); the run's other span records wait
// for it, nothing else does.
func (r *Run) recordRunSpan() {
	r.spanOrder <- struct{}{}
	defer func() { <-r.spanOrder }()
	r.m.sink.Record(r.runSpan())
}

// deadlineFailure is the cause a run's context ends with at its deadline.
func (r *Run) deadlineFailure() *failure.Error {
	return &failure.Error{Kind: failure.Fatal, Reason: failure.DeadlineExceeded,
		Message: "run deadline of " + r.rec.Limits.Deadline.String() + " passed"}
}

// arm makes the run stop (DeadlineExceeded) when its deadline passes; its
// context is canceled then in any case. It is called once the run is in
// the live table, so a deadline already past stops a run the table holds.
func (r *Run) arm() {
	if r.deadline.IsZero() || r.single {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopAF = context.AfterFunc(r.ctx, func() {
		if fe := failure.As(context.Cause(r.ctx)); fe != nil && fe.Reason == failure.DeadlineExceeded {
			if r.m.cfg.EndIdle && !r.owned && r.idleAtDeadline() {
				// Nothing was cut short: a run whose client never says
				// it is over ends by its last step's outcome, as after
				// an idle time (later steps are still refused for the
				// deadline, see checkLocked).
				r.mu.Lock()
				d := r.rec.Limits.Deadline
				r.mu.Unlock()
				r.endIdle(fmt.Sprintf("its deadline of %v passed", d))
				return
			}
			_ = r.end(context.Background(), store.RunStopped, fe, true)
		}
	})
}

// idleAtDeadline reports whether the deadline cut nothing short: no step
// is open, and none closed at or after the deadline (a step the deadline
// canceled may close just before this check).
func (r *Run) idleAtDeadline() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open) == 0 && !r.ended && r.lastActive.Before(r.deadline)
}

// touch marks the run active now (it is not idle).
func (r *Run) touch() {
	now := r.m.now()
	r.mu.Lock()
	r.lastActive = now
	r.mu.Unlock()
}

// evictable reports whether the Manager may drop r: nothing open or being
// written, and either ended (and drained) or, with idle, idle for IdleTTL.
// Called under Manager.mu.
func (r *Run) evictable(now time.Time, idle bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.open) > 0 || r.writing || r.dirty || r.pendingBG > 0 {
		return false
	}
	if r.ended {
		return r.drained
	}
	ttl := r.idleTTL()
	return idle && ttl > 0 && now.Sub(r.lastActive) >= ttl
}

// refresh brings a run up to its stored record: counters written by other
// processes, and an ending they wrote (the steps this process has in
// flight finish, as after a soft end).
func (r *Run) refresh(rec store.Run) {
	r.mu.Lock()
	raise(&r.rec, rec)
	r.costEstimated = r.costEstimated || r.rec.CostEstimated // another process's estimate
	end := !r.ended && rec.Status != store.RunRunning
	if end { // steps in flight finish, as after a soft end
		r.ended, r.drained = true, len(r.open) == 0
		r.rec.Status, r.rec.StopReason, r.rec.Error, r.rec.Ended = rec.Status, rec.StopReason, rec.Error, rec.Ended
		r.endCause = failure.Wrap(failure.RunEnded, fmt.Errorf("run %s %w (%s)", r.id, ErrEnded, rec.Status))
	}
	stop, drain := r.stopAF, end && r.drained
	r.mu.Unlock()
	if drain {
		r.cancel(r.endCause)
		if stop != nil {
			stop()
		}
	}
}

// raise sets each counter of dst to the larger of dst's and src's.
func raise(dst *store.Run, src store.Run) {
	dst.Turns = max(dst.Turns, src.Turns)
	dst.ToolCalls = max(dst.ToolCalls, src.ToolCalls)
	dst.InputTokens = max(dst.InputTokens, src.InputTokens)
	dst.OutputTokens = max(dst.OutputTokens, src.OutputTokens)
	dst.Cost = max(dst.Cost, src.Cost)
	dst.CostEstimated = dst.CostEstimated || src.CostEstimated
}

// ID returns the run id.
func (r *Run) ID() string { return r.id }

// Tenant returns the tenant the run belongs to (fixed when it starts).
func (r *Run) Tenant() string { return r.tenant }

// Single reports whether the run was started with Spec.Single (it ends
// with its one step) by this process.
func (r *Run) Single() bool { return r.single }

// TraceID returns the trace id shared by the run's spans (32 hex digits,
// derived from the run id, so every process writes the same one).
func (r *Run) TraceID() string {
	t, _ := r.traceIDs()
	return t
}

// traceIDs returns the run's trace id and its run span's id.
func (r *Run) traceIDs() (traceID, spanID string) {
	r.idsOnce.Do(func() { r.traceID, r.spanID = traceIDFor(r.id), runSpanIDFor(r.id) })
	return r.traceID, r.spanID
}

// Context returns a context canceled when the run is killed, stopped,
// finished or its deadline passes; context.Cause gives the *failure.Error.
// A Spec.Single run has no timer of its own: its context ends at its
// deadline only through its step (Admitted.Context ends then, and the
// step's failure ends the run); with no step open it ends when the run
// ends. Steps' contexts end with the run's (Admitted.Context).
func (r *Run) Context() context.Context { return r.ctx }

// Deadline returns when the run's time is up, and false when it has no
// deadline (Limits.Deadline counted from the start).
func (r *Run) Deadline() (time.Time, bool) { return r.deadline, !r.deadline.IsZero() }

// Limits returns the run's limits, fixed when it starts (Spec.Limits).
func (r *Run) Limits() store.Limits {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec.Limits
}

// Agent returns the run's agent (its Spec's, "" for none). Safe for
// concurrent use.
func (r *Run) Agent() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec.Agent
}

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
//
// Steps that Admitted.Quote announced (their caller has its answer and is
// settling them) are waited for first, until ctx is done: an agent that
// finishes as soon as it has its last answer finds that answer's turn,
// tokens and cost in the record.
func (r *Run) Finish(ctx context.Context, status store.RunStatus, err error) error {
	switch status {
	case store.RunSucceeded, store.RunFailed, store.RunStopped:
	default:
		return fmt.Errorf("run: finish with status %q; want succeeded, failed or stopped", status)
	}
	_ = r.waitQuoted(ctx) // if ctx ends first, they settle later
	return r.end(ctx, status, err, true)
}

// end is the one way a run ends; its first ending is kept.
//
// A hard end (Finish, a kill, the deadline) cancels the run's context and
// its in-flight steps at once and releases their reservations (a step that
// settles later is still charged). A soft end (a step refused for the
// run's turn or money limit) only stops admissions: the steps already
// admitted run on and are charged when they settle, and the run's context
// is canceled when the last of them closes. A hard end after a soft one
// (a kill, the deadline) cancels the steps still in flight and keeps the
// first status and stop reason.
//
// The record (status, stop reason, Ended) and the run span are written at
// the end; each step that settles later writes them again with its counts.
func (r *Run) end(ctx context.Context, status store.RunStatus, err error, hard bool) error {
	idle, _ := ctx.Value(asyncEndKey{}).(bool)
	cause := err
	if failure.As(err) == nil {
		cause = failure.Wrap(failure.RunEnded, fmt.Errorf("run %s %w (%s)", r.id, ErrEnded, status))
	}
	r.mu.Lock()
	if r.ended && r.drained && hard {
		// Drained by another goroutine (the same kill seen by the store's
		// watcher, the deadline), which may not have canceled the steps
		// yet: a hard end returns with them canceled (a cancel is
		// idempotent; the first cause stays).
		open, cause := slices.Collect(maps.Keys(r.open)), r.endCause
		r.mu.Unlock()
		r.cancel(cause)
		for _, a := range open {
			a.cancel(cause)
		}
		return nil
	}
	if r.ended && (r.drained || !hard) {
		r.mu.Unlock()
		return nil
	}
	first := !r.ended
	stopped := first && status == store.RunStopped
	if first {
		r.ended, r.endCause = true, cause
		if idle {
			// Its record is written in the background below: until then
			// the run may not be evicted (Flush and Get find it).
			r.dirty = true
		}
		r.rec.Status, r.rec.Ended = status, r.m.now()
		if idle && !r.lastActive.Before(r.rec.Started) {
			r.rec.Ended = r.lastActive // ended by its idle time: it was last active then
		}
		if err != nil {
			r.rec.Error = err.Error()
		}
		if status == store.RunStopped {
			r.rec.StopReason = string(failure.Canceled)
			if fe := failure.As(err); fe != nil {
				r.rec.StopReason = string(fe.Reason)
			}
		}
	}
	var open []*Admitted
	if hard || len(r.open) == 0 {
		r.drained = true
		for a := range r.open {
			open = append(open, a)
		}
	}
	drained, stop, reason := r.drained, r.stopAF, failure.Reason(r.rec.StopReason)
	r.mu.Unlock()
	if stopped {
		r.m.countStop(reason)
	}

	ctx = context.WithoutCancel(ctx)
	if drained {
		// Cancel first, so in-flight steps see the end before any I/O.
		r.cancel(cause)
		for _, a := range open {
			a.cancel(cause)
		}
		if stop != nil {
			stop()
		}
		// The open steps keep their reservations until they settle or
		// fail, as their cancellation makes them do at once: released
		// here, another run of the tenant was admitted against the money
		// before the canceled call settled what it had used, and the
		// tenant ended past its budget (an adversarial review: $1.40 of a
		// $1.00 budget).
	}
	if !first {
		r.recordRunSpan() // with the kill event
		return nil
	}
	if async, _ := ctx.Value(asyncEndKey{}).(bool); async {
		// An idle run ended by the sweep: its record is written in the
		// background (and the run evicted once it is), so one sweep can
		// end many runs.
		perr := r.persist(ctx)
		r.recordRunSpan()
		return perr
	}
	perr := r.persistNow(ctx)
	r.recordRunSpan()
	r.m.evict(r, false)
	return perr
}

// asyncEndKey marks the context of an end whose record may be written in
// the background.
type asyncEndKey struct{}

// maxBackgroundWrites bounds the run-record writes in flight in the
// background (Manager.writers).
const maxBackgroundWrites = 256

// stepClosed runs after a step has closed and its record was written: it
// completes a soft end once no step is open, and lets the Manager drop an
// ended run.
func (r *Run) stepClosed() {
	now := r.m.now()
	r.mu.Lock()
	r.lastActive = now
	drain := r.ended && !r.drained && len(r.open) == 0
	if drain {
		r.drained = true
	}
	ended, cause, stop := r.ended, r.endCause, r.stopAF
	r.mu.Unlock()
	if drain {
		r.cancel(cause)
		if stop != nil {
			stop()
		}
	}
	if ended {
		r.m.evict(r, false)
	}
}

// kill stops the run because of flag k, canceling its in-flight steps
// (also those of a run a refusal stopped that are still running).
func (r *Run) kill(ctx context.Context, k store.Kill) {
	r.mu.Lock()
	drained := r.drained
	r.mu.Unlock()
	if !drained { // a drained run has had its end, and its kill event if killed
		r.event("kill", map[string]any{"target": string(k.Target), "name": k.Name, "reason": k.Reason, "by": k.By})
	}
	_ = r.end(ctx, store.RunStopped, killFailure(k), true) // on a drained run: its steps are canceled on return
}

// maxEventsPerName bounds the events of one name on a run's span: the
// OpenTelemetry SDKs' default span event count limit
// (OTEL_SPAN_EVENT_COUNT_LIMIT, 128), applied per name, so that a client
// sending bad requests in a run (a request.refused event each) can
// neither grow the run without bound nor crowd out its kill and alert
// events. The events past it are counted on the span
// (belay.run.events_dropped); the first ones are kept.
const maxEventsPerName = 128

func (r *Run) event(name string, attrs map[string]any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Name == name {
			n++
		}
	}
	if n >= maxEventsPerName {
		r.eventsDropped++
		return
	}
	r.events = append(r.events, trace.Event{Name: name, Time: r.m.now(), Attrs: attrs})
}

func (r *Run) isEnded() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// persist writes the current record. Concurrent callers coalesce: while
// one goroutine writes, others mark the record dirty and the writer writes
// again, so the store ends with the newest record and no I/O happens under
// the lock. A write that fails is retried in the background (see
// Manager.durably) and persist returns nil; the run stays in memory until
// the record is written or given up.
func (r *Run) persist(ctx context.Context) error {
	if !r.startWrite() {
		return nil
	}
	// The record is written off the request path: limits are enforced by
	// the in-memory run and the ledger, not by the record, so a step does
	// not wait for it (Flush does). Close waits for writes in flight.
	select {
	case r.m.writers <- struct{}{}:
	case <-ctx.Done(): // the caller gave up waiting: write here instead
		r.mu.Lock()
		r.writing, r.dirty = false, false // persistNow writes the record as it is now
		r.mu.Unlock()
		return r.persistNow(context.WithoutCancel(ctx))
	}
	if !r.m.retry.add() {
		<-r.m.writers
		r.mu.Lock()
		r.writing, r.dirty = false, false
		r.mu.Unlock()
		return r.persistNow(ctx)
	}
	go func() {
		defer r.m.retry.wg.Done()
		defer func() { <-r.m.writers }()
		_ = r.m.durably(store.Deferrable(context.WithoutCancel(ctx)), "write run record", r.id, r.writeLoop, r.recordWritten)
	}()
	return nil
}

// persistHere writes the record in the calling goroutine, which already
// holds a background slot (see Run.background); writes in flight
// coalesce as in persist.
func (r *Run) persistHere(ctx context.Context) {
	if r.startWrite() {
		_ = r.m.durably(ctx, "write run record", r.id, r.writeLoop, r.recordWritten)
	}
}

// startWrite marks the record dirty and reports whether the caller is to
// write it: false while another goroutine is writing (it writes again
// while the record is dirty).
func (r *Run) startWrite() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty = true
	if r.writing {
		return false
	}
	r.writing = true
	return true
}

// recordWritten ends a background record write (err: given up) and
// evicts the run when it has ended.
func (r *Run) recordWritten(err error) {
	r.mu.Lock()
	var step *Admitted
	if err != nil { // given up: the next persist starts afresh
		r.writing, r.dirty = false, false
		step, r.withCreate, r.createSpends = r.withCreate, nil, nil // lost with the record (logged)
	}
	r.written.Broadcast()
	r.mu.Unlock()
	if step != nil {
		step.privateWritten()
	}
	if r.isEnded() {
		r.m.evict(r, false)
	}
}

// Flush waits until the record as it is now, and the ledger settles of the
// steps closed so far, have been written to the store (or their writes
// given up), for callers that read the store next: Settle and Tool write
// them in the background; Finish writes the record before it returns. A
// step that Admitted.Quote announced is waited for until it settles.
// An ended run whose writes are done is dropped from the live table
// (Manager.Live) before Flush returns: the write that ends last evicts it
// too, but after it has woken Flush.
func (r *Run) Flush(ctx context.Context) error {
	h, _ := r.m.st.(store.Hurrier)
	err := r.waitUntil(ctx, func() bool {
		done := !r.writing && !r.dirty && r.pendingBG == 0 && r.quoted == 0
		if !done && h != nil {
			h.Hurry() // the writes may be waiting to share a transaction
		}
		return done
	})
	if err == nil && r.isEnded() {
		r.m.evict(r, false)
	}
	return err
}

// waitUntil waits, until ctx is done, for done (called under r.mu) to
// hold; background writes broadcast r.written as they end.
func (r *Run) waitUntil(ctx context.Context, done func() bool) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.written.Broadcast()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for !done() && ctx.Err() == nil {
		r.written.Wait()
	}
	return ctx.Err()
}

// persistNow writes the record before returning (retried in the
// background if the store fails): the ends of a run use it, so the stored
// record is final when Finish returns.
func (r *Run) persistNow(ctx context.Context) error {
	return r.m.durably(ctx, "write run record", r.id, func(ctx context.Context) error {
		r.writeMu.Lock()
		defer r.writeMu.Unlock()
		if err := r.writeRecord(ctx); err != nil {
			return fmt.Errorf("run: write record %s: %w", r.id, err)
		}
		return nil
	}, func(error) {
		if r.isEnded() {
			r.m.evict(r, false)
		}
	})
}

// writeLoop writes the record while it is dirty; on success it clears
// writing. It is safe to repeat.
func (r *Run) writeLoop(ctx context.Context) error {
	r.mu.Lock()
	for r.dirty {
		r.dirty = false
		r.mu.Unlock()
		r.writeMu.Lock()
		err := r.writeRecord(ctx)
		r.writeMu.Unlock()
		if err != nil {
			r.mu.Lock()
			r.dirty = true
			r.mu.Unlock()
			return fmt.Errorf("run: write record %s: %w", r.id, err)
		}
		r.mu.Lock()
	}
	r.writing = false
	r.mu.Unlock()
	return nil
}

// writeRecord stores the record. The first write of a Spec.Fresh run
// creates it (no other process knows the run: its counts are this
// process's; a conflict means an earlier try committed before its answer
// was lost). Later writes go through store.RunSaver when the store has it
// (one atomic write, raised to the ledger's counts, never over another
// process's ending), else counted and UpdateRun. Called under writeMu.
func (r *Run) writeRecord(ctx context.Context) error {
	r.mu.Lock()
	created := r.created
	r.mu.Unlock()
	if !created {
		// From here a step that settles hands its spend to no create
		// (spendWithCreate): this one may have read its spends already.
		r.mu.Lock()
		step, spends := r.withCreate, r.createSpends
		r.creating = true
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.creating = false
			r.mu.Unlock()
		}()
		rec := r.Record()
		var err error
		if step != nil {
			err = r.m.st.(store.RunSpender).CreateRunSpent(ctx, rec, spends)
			if errors.Is(err, store.ErrConflict) && !r.storedIsOurs(ctx, rec) {
				// Another process created the run (its id reached it
				// while the step ran): the spends were not written with
				// it. Their ids make this write safe to repeat.
				if _, rerr := r.m.reserve(ctx, spends); rerr != nil && !errors.Is(rerr, store.ErrConflict) {
					return rerr
				}
			}
		} else {
			// A conflict: an earlier try committed before its answer was
			// lost (the id is this process's own), or another process
			// created the run; either way, the record is saved below.
			err = r.m.st.CreateRun(ctx, rec)
		}
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		r.mu.Lock()
		r.created = true
		r.withCreate, r.createSpends = nil, nil
		r.mu.Unlock()
		if step != nil {
			step.privateWritten()
			if step.scopes != nil {
				r.alerts(ctx, step.scopes, step.tb)
			}
		}
		if err == nil {
			return nil
		}
	}
	saver, ok := r.m.st.(store.RunSaver)
	if !ok {
		return r.m.st.UpdateRun(ctx, r.counted(ctx))
	}
	turns, cost := ledgerScopes(r.id)
	err := saver.SaveRun(ctx, r.tokensCounted(ctx, r.Record()), turns, cost)
	if errors.Is(err, store.ErrRunEnded) {
		// Another process ended the run: take its ending (this
		// process's steps are refused from now on), then write the
		// counts.
		stored, gerr := r.m.st.GetRun(ctx, r.id)
		if gerr != nil {
			return gerr
		}
		r.refresh(stored)
		err = saver.SaveRun(ctx, r.tokensCounted(ctx, r.Record()), turns, cost)
	}
	return err
}

// storedIsOurs reports whether the stored record of the run is rec, as an
// earlier try of this process's CreateRunSpent wrote it before its answer
// was lost (same start and end, to the nanosecond): then its spends are in
// the ledger. A record another process created has its own start. A read
// that fails counts as not ours: the spends are written again, by id.
func (r *Run) storedIsOurs(ctx context.Context, rec store.Run) bool {
	stored, err := r.m.st.GetRun(ctx, r.id)
	return err == nil && stored.Started.Equal(rec.Started) && stored.Ended.Equal(rec.Ended) &&
		stored.Status == rec.Status && stored.Cost == rec.Cost
}

// ledgerScopes returns the ledger scopes a run's record is raised to: its
// turn scope (counted when the run has a turn limit or is not a Single
// run; a scope with no balance raises nothing) and its cost scope.
func ledgerScopes(runID string) (turns, cost budget.Scope) {
	return TurnScope(runID), budget.RunScope(runID)
}

// background runs fn (a ledger write of a closed step) off the request
// path. At most maxBackgroundWrites such writes and record writes run at
// once; past that the caller waits (backpressure) rather than queueing
// without bound. The run counts fn until it returns: Flush waits for it,
// the run stays in memory, and Manager.Close waits for it.
func (r *Run) background(ctx context.Context, fn func(context.Context)) {
	ctx = store.Deferrable(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.pendingBG++
	r.mu.Unlock()
	finish := func() {
		r.mu.Lock()
		r.pendingBG--
		r.written.Broadcast()
		ended := r.ended
		r.mu.Unlock()
		if ended {
			r.m.evict(r, false)
		}
	}
	r.m.writers <- struct{}{}
	if !r.m.retry.add() { // the Manager is closing: write here
		<-r.m.writers
		fn(ctx)
		finish()
		return
	}
	go func() {
		defer r.m.retry.wg.Done()
		defer func() { <-r.m.writers }()
		defer finish()
		fn(ctx)
	}()
}

// counted returns the record to write: the in-memory one with its turn
// count, cost and tokens raised to the ledger's (which count every
// process's turns, spend and tokens: see TokenScope). A ledger that
// cannot be read leaves the in-memory counts.
//
// A running record is first checked against the stored one: when another
// process has ended the run, this process takes that ending (its steps are
// refused from then on) rather than write "running" over it. The check and
// the write are not one transaction: an ending written between them is
// overwritten, and comes back when that process writes its record again.
func (r *Run) counted(ctx context.Context) store.Run {
	if !r.isEnded() {
		if stored, err := r.m.st.GetRun(ctx, r.id); err == nil && stored.Status != store.RunRunning {
			r.refresh(stored)
		}
	}
	r.mu.Lock()
	rec := r.rec
	rec.Labels = maps.Clone(rec.Labels)
	r.mu.Unlock()
	return r.ledgerCounted(ctx, rec)
}

// ledgerCounted returns rec with its turns, cost and tokens raised to the
// ledger's, which count every process's steps of the run; a scope that
// cannot be read leaves its count.
func (r *Run) ledgerCounted(ctx context.Context, rec store.Run) store.Run {
	var ledger store.Run
	turns, cost := ledgerScopes(r.id)
	if b, err := r.m.st.Balance(ctx, turns); err == nil {
		ledger.Turns = int(b.Settled + b.Reserved)
	}
	if b, err := r.m.st.Balance(ctx, cost); err == nil {
		ledger.Cost = b.Settled
	}
	raise(&rec, ledger)
	return r.tokensCounted(ctx, rec)
}

// tokensCounted returns rec with its token counts raised to the ledger's
// (see TokenScope), which count every process's; a ledger that cannot be
// read, or a Single run, leaves them.
func (r *Run) tokensCounted(ctx context.Context, rec store.Run) store.Run {
	if !r.ledgerCounts() {
		return rec
	}
	total, err := r.m.st.Balance(ctx, TokenScope(r.id))
	if err != nil || total.Settled == 0 {
		return rec
	}
	out, err := r.m.st.Balance(ctx, OutputTokenScope(r.id))
	if err != nil || out.Settled > total.Settled {
		return rec
	}
	rec.InputTokens = max(rec.InputTokens, int64(total.Settled-out.Settled))
	rec.OutputTokens = max(rec.OutputTokens, int64(out.Settled))
	return rec
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
	if len(fired) > 0 && r.isEnded() {
		// The run's span was written at its end (a Single run's, before
		// its spend landed): write it again with the alert events.
		r.recordRunSpan()
	}
}
