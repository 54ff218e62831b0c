package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"time"
	"weak"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/ids"
	"github.com/belay-run/belay/store"
)

// Spec describes a run to start. Zero fields mean: a new UUID for ID, the
// tenant "default", no limits.
type Spec struct {
	ID            string
	Tenant        string
	Agent         string
	AgentVersion  string
	PromptVersion string
	Labels        map[string]string
	Limits        store.Limits
	// IdleTTL, when positive, replaces Config.IdleTTL for this run.
	IdleTTL time.Duration
	// Fresh says ID was made for this Start and no one else knows it yet
	// (the gateway's own run ids, random UUIDs). Nothing is written at
	// Start: the record is created by the run's first record write (when
	// its first step closes, or when it ends), the run's span is written
	// when it ends (its steps' spans as they close), and until then the store
	// does not know the run (GetRun is ErrNotFound; Flush waits for the
	// write). With Config.FirstStepInMemory, the run's first model step is
	// admitted in memory when the tenant has no budget limit: no other
	// process can know the run, so
	// its turn and money limits are checked exactly here, and its ledger
	// entries are written when it closes, in the background. Later steps
	// go through the ledger as usual (after the first step's entries have
	// landed), so the limits hold across processes once the id is out.
	// A Fresh ID that is in the store after all is found when the record
	// is written: the stored record's ending, if any, is taken.
	Fresh bool
	// Single says the run is one step (the gateway's run for a call whose
	// client names none): it ends when that step closes — succeeded, or
	// failed with the step's error — or when its admission fails, and
	// leaves memory once its record is written. A second step is refused
	// with RunEnded, while the first is open (without stopping the run)
	// and after the end. With Fresh, the record is written once, already ended.
	Single bool
	// Owned says the caller ends the run (Run.Finish), as belay eval does
	// once its agent exits: with Config.EndIdle it is still never ended
	// for being idle, nor ended by its last step's outcome when its
	// deadline passes between steps; the deadline stops it
	// (DeadlineExceeded), as without EndIdle. (The gateway's runs end so
	// because no client says when it is done; an eval run's end is its
	// agent's exit, and a newcomer's eval run whose deadline passed
	// between two calls was recorded "succeeded" though the agent failed.)
	Owned bool
}

// DefaultTenant is the tenant of a run started without one.
const DefaultTenant = "default"

// entry is one id in the live table. ready is closed once r or err is set
// (both written under Manager.mu); until then the id is being started or
// loaded and callers for the same id wait.
type entry struct {
	ready chan struct{}
	r     *Run
	err   error
	start bool // a Start: its waiters try again when it fails
}

func (e *entry) wait(ctx context.Context) error {
	select {
	case <-e.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start creates the run record (status running) and returns the live run.
// An ID already stored, or live or being started in this process, is an
// error wrapping store.ErrConflict (returned once the other start has
// settled, so a Get that follows finds the run). A run whose tenant (or
// everything) is killed starts, and its first step is refused. A
// negative limit is an error: it would read as no limit (0), and a
// computed limit that went below zero (a budget less what is spent) must
// not lift the bound.
func (m *Manager) Start(ctx context.Context, s Spec) (*Run, error) {
	if err := checkLimits(s.Limits); err != nil {
		return nil, err
	}
	if s.ID == "" {
		s.ID = ids.New()
	}
	if s.Tenant == "" {
		s.Tenant = DefaultTenant
	}
	for {
		m.mu.Lock()
		if e, ok := m.live[s.ID]; ok {
			m.mu.Unlock()
			if err := e.wait(ctx); err != nil {
				return nil, err
			}
			if e.err != nil {
				continue // that start or load failed: try ours
			}
			return nil, fmt.Errorf("run: create %s: %w: the run exists", s.ID, store.ErrConflict)
		}
		if m.idle[s.ID].Value() != nil {
			m.mu.Unlock()
			return nil, fmt.Errorf("run: create %s: %w: the run exists", s.ID, store.ErrConflict)
		}
		e := &entry{ready: make(chan struct{}), start: true}
		m.live[s.ID] = e
		m.mu.Unlock()
		return m.create(ctx, s, e)
	}
}

// checkLimits refuses negative limits.
func checkLimits(l store.Limits) error {
	for _, f := range []struct {
		name string
		v    int64
		show string
	}{{"MaxTurns", int64(l.MaxTurns), fmt.Sprint(l.MaxTurns)}, {"Deadline", int64(l.Deadline), l.Deadline.String()},
		{"MaxTokens", l.MaxTokens, fmt.Sprint(l.MaxTokens)}, {"MaxCost", int64(l.MaxCost), l.MaxCost.String()}} {
		if f.v < 0 {
			return fmt.Errorf("run: Spec.Limits.%s %s: want ≥ 0 (0 is no limit)", f.name, f.show)
		}
	}
	return nil
}

func (m *Manager) create(ctx context.Context, s Spec, e *entry) (*Run, error) {
	rec := store.Run{
		ID: s.ID, Tenant: s.Tenant, Agent: s.Agent, AgentVersion: s.AgentVersion,
		PromptVersion: s.PromptVersion, Labels: maps.Clone(s.Labels), Limits: s.Limits,
		Status: store.RunRunning, Started: m.now(),
	}
	if !s.Fresh {
		if err := m.st.CreateRun(ctx, rec); err != nil {
			err = fmt.Errorf("run: create %s: %w", s.ID, err)
			m.publish(s.ID, e, nil, err)
			return nil, err
		}
	}
	r := m.newRun(rec, s.Single)
	r.ttl, r.owned = s.IdleTTL, s.Owned
	r.created, r.fresh, r.freshSpec = !s.Fresh, s.Fresh, s.Fresh
	m.publish(s.ID, e, r, nil)
	if !s.Fresh { // a Fresh run's span is written when it ends, like its record
		r.recordRunSpan()
	}
	r.arm()
	return r, nil
}

// publish settles entry e of id: a failure or an ended run leaves the live
// table, a running run stays in it. Waiters are woken outside the lock.
func (m *Manager) publish(id string, e *entry, r *Run, err error) {
	m.mu.Lock()
	e.r, e.err = r, err
	if err != nil || r.isEnded() {
		if m.live[id] == e {
			delete(m.live, id)
		}
		if r != nil {
			m.keepIdle(r)
		}
	}
	m.mu.Unlock()
	close(e.ready)
}

// Get returns the run id: the one this process holds, otherwise the stored
// record, which is held if it is still running. Concurrent calls for one
// id share one store read and one *Run. An ended run is returned too; its
// steps are refused. An unknown id is an error wrapping store.ErrNotFound.
func (m *Manager) Get(ctx context.Context, id string) (*Run, error) {
	for {
		m.mu.Lock()
		if e, ok := m.live[id]; ok {
			m.mu.Unlock()
			if err := e.wait(ctx); err != nil {
				return nil, err
			}
			if e.err != nil {
				if e.start {
					continue // a failed start: the store decides
				}
				return nil, e.err
			}
			e.r.touch()
			return e.r, nil
		}
		held := m.idle[id].Value()
		delete(m.idle, id)
		e := &entry{ready: make(chan struct{})}
		m.live[id] = e
		m.mu.Unlock()
		return m.load(ctx, id, e, held)
	}
}

// load reads the record of id and publishes the run: held, when an evicted
// object is still referenced (it is revived, so the process keeps one
// object per id), or a new one.
func (m *Manager) load(ctx context.Context, id string, e *entry, held *Run) (*Run, error) {
	rec, err := m.st.GetRun(ctx, id)
	if held != nil {
		if err == nil {
			held.refresh(rec)
		}
		held.touch()
		m.publish(id, e, held, nil)
		return held, nil
	}
	if err != nil {
		err = fmt.Errorf("run: get %s: %w", id, err)
		m.publish(id, e, nil, err)
		return nil, err
	}
	r := m.newRun(rec, false)
	m.publish(id, e, r, nil)
	if r.isEnded() {
		return r, nil
	}
	r.arm() // a deadline already past stops the run at once
	if k, ok := m.loadKills().forRun(r.id, r.tenant); ok {
		r.kill(ctx, k)
	}
	return r, nil
}

// Resume is Get, named for the gateway's use: continue a run begun by an
// earlier request or process.
func (m *Manager) Resume(ctx context.Context, id string) (*Run, error) { return m.Get(ctx, id) }

// Note records an event on run id's span when this process holds the run
// in memory and it belongs to tenant, and reports whether it did; a run
// only in the store is left as it is (no read, no write). The gateway
// notes the requests of a run it refused before their step could count (a
// malformed body, an unknown model), so that the run's trace shows why an
// agent's call failed. The run span is recorded again with the event.
func (m *Manager) Note(id, tenant, name string, attrs map[string]any) bool {
	m.mu.Lock()
	var r *Run
	if e, ok := m.live[id]; ok {
		r = e.r
	}
	m.mu.Unlock()
	if r == nil || r.Tenant() != tenant {
		return false
	}
	r.event(name, attrs)
	r.recordRunSpan()
	return true
}

// held returns the runs this process holds (live, and evicted ones still
// referenced by a caller).
func (m *Manager) held() []*Run {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Run, 0, len(m.live)+len(m.idle))
	for _, e := range m.live {
		if e.r != nil {
			out = append(out, e.r)
		}
	}
	for _, w := range m.idle {
		if r := w.Value(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// evict drops r from the live table when it may go: it has ended, no step
// is open and its record is written; or, with idle set, it is still
// running but has been idle for Config.IdleTTL. An evicted run is kept as a
// weak reference so that a caller still holding it gets it back from Get.
func (m *Manager) evict(r *Run, idle bool) bool {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.live[r.id]
	if !ok || e.r != r || !r.evictable(now, idle) {
		return false
	}
	delete(m.live, r.id)
	m.keepIdle(r)
	return true
}

// sweep evicts the runs idle for Config.IdleTTL and the ended ones.
func (m *Manager) sweep() {
	m.mu.Lock()
	rs := make([]*Run, 0, len(m.live))
	for _, e := range m.live {
		if e.r != nil {
			rs = append(rs, e.r)
		}
	}
	m.mu.Unlock()
	for _, r := range rs {
		if m.cfg.EndIdle && !r.owned && r.idleRunning(m.now()) {
			r.endIdle(fmt.Sprintf("idle for %s", r.idleTTL()))
			continue // evicted once its record is written
		}
		m.evict(r, true)
	}
}

// sweepEvery is the interval of the idle sweep: a quarter of the idle TTL,
// at most 5s (runs may carry shorter TTLs of their own, Spec.IdleTTL).
func sweepEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/4, time.Millisecond), 5*time.Second)
}

// dropIdle forgets the weak reference of id once its run is collected.
func (m *Manager) dropIdle(id string) {
	m.mu.Lock()
	if w, ok := m.idle[id]; ok && w.Value() == nil {
		delete(m.idle, id)
	}
	m.mu.Unlock()
}

// Live returns the number of runs this Manager holds in memory (running,
// or ended with steps still open or a record write pending).
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// Stats are counters of a Manager, for metrics. Safe to read at any time.
type Stats struct {
	// Live is the number of runs held in memory (see Live).
	Live int
	// StoreRetries counts store writes (a settle, a run record) that failed
	// and were retried with backoff; each is also logged at WARN.
	StoreRetries int64
	// StoreFailures counts store writes given up after
	// Config.StoreRetryFor (or at Close): spend or a run record that the
	// store does not hold. Each is also logged at ERROR.
	StoreFailures int64
	// Stops counts the runs this Manager stopped for one of their limits
	// or a kill, by stop reason: killed, max_turns_exceeded,
	// deadline_exceeded and budget_exceeded, each present (0 until
	// counted). A run counts once, when it first ends stopped for one of
	// them (a refusal, a kill, its deadline, or Finish with such a
	// failure): its record then has status stopped and that stop_reason.
	// A later step the stopped run refuses is not counted again. It is
	// this process's count: a run held by several processes sharing a
	// store (a kill flag, its deadline) is counted by each that ended it.
	Stops map[failure.Reason]int64
}

// Stats returns the Manager's counters.
func (m *Manager) Stats() Stats {
	st := Stats{Live: m.Live(), StoreRetries: m.stats.retries.Load(), StoreFailures: m.stats.failures.Load(),
		Stops: make(map[failure.Reason]int64, len(stopReasons))}
	for i, reason := range stopReasons {
		st.Stops[reason] = m.stats.stops[i].Load()
	}
	return st
}

// countStop counts a run that ended stopped for reason in Stats.Stops
// (other reasons, such as canceled at shutdown, are not counted).
func (m *Manager) countStop(reason failure.Reason) {
	if i := slices.Index(stopReasons[:], reason); i >= 0 {
		m.stats.stops[i].Add(1)
	}
}

// keepIdle holds r weakly in the idle table (called under m.mu), and the
// first time registers the cleanup that forgets that entry once r is
// collected: a run that never leaves the live table needs none, and a
// one-call run registers it after its answer, not before.
func (m *Manager) keepIdle(r *Run) {
	m.idle[r.id] = weak.Make(r)
	if !r.tracked {
		r.tracked = true
		runtime.AddCleanup(r, m.dropIdle, r.id)
	}
}

// FlushRun is Run.Flush for run id, if this process holds it (live or
// kept by a caller): it waits, until ctx is done, for the run's record,
// settles and announced steps to be written. It returns ctx's error when
// ctx ended first, and nil for a run this process does not hold.
func (m *Manager) FlushRun(ctx context.Context, id string) error {
	r := m.heldRun(id)
	if r == nil {
		return nil
	}
	return r.Flush(ctx)
}

// Flush waits until the records of every run this process holds have been
// written (or their writes given up): for callers that read the store
// next, such as `belay eval` before it reports.
func (m *Manager) Flush(ctx context.Context) error {
	for _, r := range m.held() {
		if err := r.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// EndFresh ends every live run started with Spec.Fresh that has no step
// open, by the outcome of its last model step (as an idle end does), and
// waits, until ctx is done, for their records. A process that stops calls
// it so that the runs it named itself do not stay "running" in the store:
// no one else ends them. A run with a step still open is stopped softly
// (reason canceled): the step finishes and is charged. It returns how many
// runs it ended. Runs named by their clients are left running (another
// process may serve them).
func (m *Manager) EndFresh(ctx context.Context) (int, error) {
	n := 0
	for _, r := range m.held() {
		r.mu.Lock()
		fresh, open := r.freshSpec && !r.ended, len(r.open) > 0
		r.mu.Unlock()
		switch {
		case fresh && !open:
			r.endIdle("the process stopped")
			n++
		case fresh:
			// A step still open (a long stream): the run ends softly, the
			// step finishes and is charged.
			_ = r.end(context.WithoutCancel(ctx), store.RunStopped,
				failure.Wrap(failure.Canceled, errors.New("the process stopped with a step open")), false)
			n++
		}
	}
	return n, m.Flush(ctx)
}

// idleRunning reports whether r is running with no step open for IdleTTL.
func (r *Run) idleRunning(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ttl := r.idleTTL()
	return !r.ended && len(r.open) == 0 && ttl > 0 && now.Sub(r.lastActive) >= ttl
}

// endIdle ends an idle run by the outcome of its last model step; why
// says what ended it ("idle for 10m0s", "its deadline of 1m0s passed",
// "the process stopped"), for the error of a run that ends failed.
func (r *Run) endIdle(why string) {
	status := store.RunSucceeded
	if r.lastCallFailed() {
		status = store.RunFailed
	}
	err := fmt.Errorf("%s with no step since %s; its last call had failed", why, r.lastActiveTime().Format(time.RFC3339))
	if status == store.RunSucceeded {
		err = nil
	}
	_ = r.end(context.WithValue(r.m.ctx, asyncEndKey{}, true), status, err, false)
}

// lastCallFailed reports whether the run's last model step, as this
// process saw it, failed (it settled with an error, or was refused): the
// outcome an idle end and Manager.End give the run. False for a run with
// no model step.
func (r *Run) lastCallFailed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastFailed
}

func (r *Run) lastActiveTime() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastActive
}

// idleTTL is the run's idle time-to-live: its Spec's, else the Manager's.
func (r *Run) idleTTL() time.Duration {
	if r.ttl > 0 {
		return r.ttl
	}
	return r.m.cfg.IdleTTL
}
