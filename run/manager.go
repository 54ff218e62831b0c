package run

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	randv2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// Manager owns the live runs of one process: it starts and finds runs,
// watches kill flags, and expires stale reservations. Build one with
// NewManager and Close it when done. Safe for concurrent use.
//
// One process holds at most one *Run per run id: Start and Get insert the
// id into the live table under the Manager's lock before any store I/O, and
// a concurrent Start or Get of the same id waits for that object. A run
// stays in memory while it has steps open or a record write pending; it is
// evicted once it has ended and its record is written, or when it has been
// idle (no step admitted or open) for Config.IdleTTL. An evicted run stays
// in the store; Get reloads it (or revives the same object while a caller
// still holds it).
//
// Several processes may serve one run over one store. Money limits hold
// across them because reservations live in the store's ledger; so does
// the turn limit: every admitted model step of a run with MaxTurns also
// takes one unit in the run's turn scope of the ledger (TurnScope), whose
// limit is MaxTurns, so the ledger refuses the turn past the cap whichever
// process asks. Kill
// flags and deadlines are shared through the store too. The counters in
// the run record are each process's view, raised to the ledger's turn
// count and settled cost when the record is written (store.RunSaver: in
// the same statement, which also never writes "running" over an ending
// another process wrote); token counts are the writing process's view. A
// run ended in one process is seen as ended by another when that one next
// writes the record or reloads the run.
//
// On the request path a model step makes one ledger write (its turn and
// its estimated cost, budget.BatchLedger.ReserveAll); its settle, the
// record and the spans are written in the background, and the first step
// of a Spec.Fresh run makes none (see Spec.Fresh).
//
// Store writes that fail (a settle, a run record: a locked SQLite file, a
// dropped connection) are retried in the background with backoff for
// Config.StoreRetryFor; see Stats for the counters.
type Manager struct {
	cfg     Config
	st      Store
	pricing *budget.Pricing
	sink    trace.Sink
	now     func() time.Time
	owner   string
	rand    func() float64
	log     *slog.Logger

	killMu sync.Mutex // serialises writers of kills
	kills  atomic.Pointer[killSet]
	// killGen counts the kill flags set or cleared in this process (under
	// killMu), so that a store read begun before one does not overwrite it
	// (see refreshKills).
	killGen uint64

	mu   sync.Mutex
	live map[string]*entry            // runs held in memory, or being started or loaded
	idle map[string]weak.Pointer[Run] // evicted runs a caller may still hold

	stats managerStats
	// storeDown: the last store write failed with an error that may pass
	// and none has succeeded since; first steps of Fresh runs then go
	// through the ledger (and fail with the store) instead of memory.
	storeDown atomic.Bool
	retry     retrier
	// writers bounds the run-record writes in the background: when it is
	// full, the next write waits (backpressure on the request path)
	// instead of queueing without bound.
	writers chan struct{}

	ctx  context.Context // canceled by Close
	stop context.CancelFunc
	done chan struct{}
}

// NewManager validates cfg, reads the current kill flags and starts the
// background loop (kill polling, store notifications, reservation
// janitor). It returns an error naming the first invalid field, or the
// store's error reading the kill flags.
func NewManager(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, st: cfg.Store, pricing: cfg.Pricing, sink: cfg.Sink, now: cfg.Now,
		writers: make(chan struct{}, maxBackgroundWrites),
		owner:   cfg.Owner, rand: cfg.Rand, live: map[string]*entry{}, idle: map[string]weak.Pointer[Run]{},
		done: make(chan struct{})}
	if m.pricing == nil {
		m.pricing = budget.DefaultPricing()
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.owner == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		m.owner = "belay-" + hex.EncodeToString(b[:])
	}
	if m.rand == nil {
		m.rand = randv2.Float64
	}
	if m.sink == nil {
		if sp, ok := cfg.Store.(store.Spans); ok {
			m.sink = storeSink{sp}
		} else {
			m.sink = discard{}
		}
	}
	m.cfg.ReservationTTL = orDefault(cfg.ReservationTTL, DefaultReservationTTL)
	m.cfg.IdempotencyLease = orDefault(cfg.IdempotencyLease, DefaultIdempotencyLease)
	m.cfg.KillPoll = orDefault(cfg.KillPoll, DefaultKillPoll)
	m.cfg.ExpireEvery = orDefault(cfg.ExpireEvery, DefaultExpireEvery)
	m.cfg.TenantBudgets = maps.Clone(cfg.TenantBudgets)
	m.cfg.IdleTTL = orDefault(cfg.IdleTTL, DefaultIdleTTL)
	m.cfg.StoreRetryFor = orDefault(cfg.StoreRetryFor, DefaultStoreRetryFor)
	m.log = cfg.Logger
	if m.log == nil {
		m.log = slog.Default()
	}

	ctx, cancel := context.WithCancel(context.Background())
	m.ctx, m.stop = ctx, cancel
	if err := m.refreshKills(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("run: read kill flags: %w", err)
	}
	var watch <-chan struct{}
	if w, ok := cfg.Store.(store.KillWatcher); ok {
		ch, err := w.WatchKills(ctx)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("run: watch kill flags: %w", err)
		}
		watch = ch
	}
	go m.loop(ctx, watch)
	return m, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Close stops the background loop and waits for it and for the store
// writes being retried (each makes one last attempt; one that fails is
// logged at ERROR and counted in Stats.StoreFailures). Live runs stay as
// they are (they are not finished); their records hold their last
// counters.
func (m *Manager) Close() error {
	m.stop()
	<-m.done
	m.retry.close()
	return nil
}

// Owner returns the name this Manager uses in reservations and claims.
func (m *Manager) Owner() string { return m.owner }

func (m *Manager) loop(ctx context.Context, watch <-chan struct{}) {
	defer close(m.done)
	var poll, expire, sweep <-chan time.Time
	if m.cfg.IdleTTL > 0 {
		t := time.NewTicker(sweepEvery(m.cfg.IdleTTL))
		defer t.Stop()
		sweep = t.C
	}
	if m.cfg.KillPoll > 0 {
		t := time.NewTicker(m.cfg.KillPoll)
		defer t.Stop()
		poll = t.C
	}
	if m.cfg.ExpireEvery > 0 {
		t := time.NewTicker(m.cfg.ExpireEvery)
		defer t.Stop()
		expire = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll:
			_ = m.refreshKills(ctx) // a failed read keeps the last view
		case _, ok := <-watch:
			if !ok {
				watch = nil
				continue
			}
			_ = m.refreshKills(ctx)
		case <-expire:
			m.renewOpen(ctx)
			_, _ = m.st.ExpireReservations(ctx, m.now())
			if m.cfg.EndIdle {
				m.endAbandoned(ctx)
			}
		case <-sweep:
			m.sweep()
		}
	}
}

func (m *Manager) setKills(s killSet) { m.kills.Store(&s) }

// renewOpen moves the expiry of the reservations of every step open in
// this process to a ReservationTTL (plus one janitor interval) from now: a
// call that runs longer than the TTL keeps its money held (an adversarial
// review: after 15 minutes the janitor released a live call's
// reservation, another call of the tenant was admitted against it, and
// the tenant spent $1.60 of $1.00). A failed write is left to the next
// tick; the reservations then live on their earlier expiry. Closed steps
// whose settle is still being written are renewed too. Open steps of a
// drained run (a hard end: a kill or the deadline canceled them) are not
// renewed: one that has not settled a TTL after its run ended (a caller
// that never calls Settle or Fail) lets its money go. Open steps of a run
// ended softly (its turns used, its money refused to another call) run on
// uncanceled, so they keep their money until they settle or the run's
// deadline drains them (an adversarial review: a soft-stopped run's long
// call lost its reservation after the TTL, and the tenant spent $1.60 of
// $1.00).
func (m *Manager) renewOpen(ctx context.Context) {
	var ids []string
	for _, r := range m.held() {
		r.mu.Lock()
		// A closed step whose settle is being written (and retried) keeps
		// its reservations: one that expired meanwhile would make the
		// settle's retry take its spend for done.
		for a := range r.settling {
			ids = a.holds(ids)
		}
		if !r.drained {
			for a := range r.open {
				ids = a.holds(ids)
			}
		}
		r.mu.Unlock()
	}
	if len(ids) > 0 {
		_ = m.st.Renew(ctx, ids, m.now().Add(m.cfg.ReservationTTL+m.cfg.ExpireEvery))
	}
}

// abandonedPages bounds the pages of running runs endAbandoned reads per
// tick (100 runs each).
const abandonedPages = 10

// endAbandoned ends runs the store holds as running that no process can be
// serving any more: their deadline passed more than IdleTTL ago (no step
// is admitted after it, and the one that held them would have ended them),
// and this process does not hold them. The process that served them
// stopped or crashed. Each ends as an idle run does, by its last model
// call's outcome (its span in the store): succeeded at that call's end
// when it succeeded; otherwise failed, at its deadline, with an error that
// says so (so does a run whose calls left no span). Its run span is
// written too. Runs without a deadline are left as they are. With
// EndIdle only (the gateway); a store error leaves them for the next tick.
// (A newcomer's agent runs, all answered, read "failed: abandoned" after
// a clean restart of their gateway.)
func (m *Manager) endAbandoned(ctx context.Context) {
	saver, ok := m.st.(store.RunSaver)
	if !ok || m.cfg.IdleTTL <= 0 {
		return
	}
	now := m.now()
	before := now.Add(-m.cfg.IdleTTL)
	for range abandonedPages {
		runs, err := m.st.ListRuns(ctx, store.RunFilter{Status: store.RunRunning, Before: before, Limit: 100})
		if err != nil || len(runs) == 0 {
			return
		}
		for _, rec := range runs {
			if rec.Limits.Deadline <= 0 || m.holds(rec.ID) {
				continue
			}
			deadline := rec.Started.Add(rec.Limits.Deadline)
			if !deadline.Add(m.cfg.IdleTTL).Before(now) {
				continue
			}
			turns, cost := ledgerScopes(rec.ID)
			rec.Status, rec.Ended = store.RunFailed, deadline
			rec.Error = fmt.Sprintf("abandoned: no process held the run when its deadline (%v) passed", rec.Limits.Deadline)
			if last, ok := m.lastModelSpan(ctx, rec.ID); ok {
				if last.Status == trace.StatusOK {
					rec.Status, rec.Ended, rec.Error = store.RunSucceeded, last.End, ""
				} else {
					rec.Error += "; its last model call failed"
				}
			}
			if err := saver.SaveRun(ctx, rec, turns, cost); err != nil {
				m.log.Warn("run: ending an abandoned run failed", "run_id", rec.ID, "err", err)
				continue
			}
			if saved, err := m.st.GetRun(ctx, rec.ID); err == nil { // its counts, as the ledger raised them
				m.sink.Record(runSpanOf(saved, false, 0, nil))
			}
		}
		if len(runs) < 100 {
			return
		}
		before = runs[len(runs)-1].Started
	}
}

// End ends run id of tenant at its client's request and returns its record
// once written (the gateway's POST /v1/belay/runs/{id}/end).
//
// status is store.RunSucceeded or store.RunFailed, or "" for the outcome of
// the run's last model call, as an idle end gives it: failed when that call
// failed (as this process saw it, or, for a run it did not hold, as the
// call's span in the store says) or when a call of the run is in flight
// (the end cancels it), succeeded otherwise. msg is the error recorded on a
// failed end ("" for one that says why); given with status "", it makes
// the end failed.
//
// Like Run.Finish, the end is hard: steps in flight are canceled, and End
// waits (up to endSettleWait) for them to be charged for what they used. A
// run that has already ended keeps its first ending. The record returned is
// the stored one, whose counts include the run's calls through other
// processes on the store, or this process's own when the store does not
// hold the ending yet (a write being retried). An unknown id, or a run of
// another tenant, is an error wrapping store.ErrNotFound (another tenant's
// run is not loaded). When ctx ends before the record is written, the write
// goes on in the background and ctx's error is returned with the record as
// it stands. Safe for concurrent use.
func (m *Manager) End(ctx context.Context, id, tenant string, status store.RunStatus, msg string) (store.Run, error) {
	switch status {
	case "", store.RunSucceeded, store.RunFailed:
	default:
		return store.Run{}, fmt.Errorf("run: end with status %q; want succeeded or failed", status)
	}
	held := m.holds(id)
	if !held {
		// Another tenant's run is not loaded (Get would hold it, and
		// stop it at once if its deadline had passed).
		rec, err := m.st.GetRun(ctx, id)
		if err != nil {
			return store.Run{}, fmt.Errorf("run: get %s: %w", id, err)
		}
		if rec.Tenant != tenant {
			return store.Run{}, fmt.Errorf("run: get %s: %w", id, store.ErrNotFound)
		}
	}
	r, err := m.Get(ctx, id)
	if err != nil {
		return store.Run{}, err
	}
	if r.Tenant() != tenant {
		return store.Run{}, fmt.Errorf("run: get %s: %w", id, store.ErrNotFound)
	}
	if status == "" && msg != "" {
		status = store.RunFailed // a reason given is a failure's
	}
	if status == "" {
		failed := r.lastCallFailed()
		why := "ended by its client; its last call had failed"
		if !held {
			last, ok := m.lastModelSpan(ctx, id)
			failed = ok && last.Status != trace.StatusOK
		}
		if r.modelStepOpen() {
			// The end cancels it: its last call fails.
			failed, why = true, "ended by its client with a call in flight, which the end canceled"
		}
		status = store.RunSucceeded
		if failed {
			status = store.RunFailed
			msg = cmp.Or(msg, why)
		}
	}
	var endErr error
	if status == store.RunFailed {
		endErr = errors.New(cmp.Or(msg, "ended by its client as failed"))
	}
	if err := r.Finish(ctx, status, endErr); err != nil {
		return store.Run{}, err
	}
	// The steps the end canceled settle (charged for what they used)
	// before the record is read, within endSettleWait.
	wctx, cancel := context.WithTimeout(ctx, endSettleWait)
	_ = r.waitUntil(wctx, func() bool { return len(r.open) == 0 && r.closing == 0 })
	cancel()
	if err := r.Flush(ctx); err != nil {
		return r.Record(), err
	}
	// The stored record: its counts include the run's calls through other
	// processes on the store (the ledger raises them), this one's do not.
	// When the store does not hold the ending yet (its write failed and
	// is being retried in the background), this process's record.
	rec := r.Record()
	if stored, err := m.st.GetRun(ctx, id); err == nil && stored.Status == rec.Status && stored.Ended.Equal(rec.Ended) {
		rec = stored
	}
	// A call another process answered just before may not be settled in
	// the ledger yet (its settle is written after its answer): while the
	// run's money is held, wait a little (holdWaits) for it, and count
	// what the ledger then holds (adversarial review, session 26: the end
	// answer missed the last call, served by another replica, in 2 of 5
	// trials).
	if r.ledgerCounts() {
		held := func(s budget.Scope) bool {
			b, err := m.st.Balance(ctx, s)
			return err == nil && b.Reserved > 0
		}
		for _, d := range holdWaits[1:] {
			if !held(budget.RunScope(id)) && !held(TokenScope(id)) {
				break
			}
			if r.waitForHolds(ctx, d) != nil {
				break
			}
		}
		rec = r.ledgerCounted(ctx, rec)
	}
	return rec, nil
}

// Held returns the record of run id as this process holds it in memory,
// when it does and the run is tenant's: a run the gateway named (Spec.Fresh)
// is in the store only once it has ended. Safe for concurrent use.
func (m *Manager) Held(id, tenant string) (store.Run, bool) {
	r := m.heldRun(id)
	if r == nil || r.Tenant() != tenant {
		return store.Run{}, false
	}
	return r.Record(), true
}

// endSettleWait bounds End's wait for the steps it canceled to settle (a
// canceled HTTP attempt returns at once; a Go agent's step that ignores
// its context is not waited for longer).
const endSettleWait = 5 * time.Second

// modelStepOpen reports whether a model step of r is in flight.
func (r *Run) modelStepOpen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for a := range r.open {
		if a.step.Kind == KindModel {
			return true
		}
	}
	return false
}

// lastModelSpan returns the latest-ending closed model span of run id in
// the store; false when there is none or the store cannot say.
func (m *Manager) lastModelSpan(ctx context.Context, id string) (trace.Span, bool) {
	sr, ok := m.st.(store.Spans)
	if !ok {
		return trace.Span{}, false
	}
	spans, err := sr.RunSpans(ctx, id)
	if err != nil {
		return trace.Span{}, false
	}
	var last trace.Span
	found := false
	for _, s := range spans {
		if s.Kind == trace.KindModel && !s.End.IsZero() && (!found || s.End.After(last.End)) {
			last, found = s, true
		}
	}
	return last, found
}

// Holds reports whether this process has run id in memory: running, or
// ended and not yet collected. A run the gateway named (Spec.Fresh) is in
// the store only once its record is written, but held from its start.
// Safe for concurrent use.
func (m *Manager) Holds(id string) bool { return m.holds(id) }

// holds reports whether this process has run id in memory.
func (m *Manager) holds(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[id]; ok {
		return true
	}
	return m.idle[id].Value() != nil
}

// heldRun returns run id as this process holds it (live, or kept by a
// caller), or nil; a run still being started or loaded is nil.
func (m *Manager) heldRun(id string) *Run {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.live[id]; ok {
		return e.r
	}
	return m.idle[id].Value()
}

// storeSink writes each span to the store at once; errors are dropped (a
// trace must never fail a run).
type storeSink struct{ s store.Spans }

func (s storeSink) Record(sp trace.Span) {
	_ = s.s.WriteSpans(context.Background(), []trace.Span{sp})
}

type discard struct{}

func (discard) Record(trace.Span) {}

// ErrEnded marks a step refused, or canceled in flight, because its run
// has ended; such an error reads "run ID has ended (STATUS)" (its text
// follows the run's id). A step that Finish or a client's end (Manager.End)
// canceled ends with a RunEnded failure that wraps it. A run stopped by a
// limit or a kill refuses its later steps with that reason instead
// (failure.MaxTurnsExceeded, failure.Killed, …), not ErrEnded.
var ErrEnded = errors.New("has ended")
