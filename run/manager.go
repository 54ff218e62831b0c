package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	randv2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// Manager owns the live runs of one process: it starts and finds runs,
// watches kill flags, and expires stale reservations. Build one with
// NewManager and Close it when done. Safe for concurrent use.
//
// A run is driven by one Manager at a time: its counters live in memory and
// are written to the store after each step. A live run is held until it
// ends (Finish, a stop, a kill or its deadline); runs that are abandoned
// without a deadline stay in memory until the Manager is dropped.
type Manager struct {
	cfg     Config
	st      Store
	pricing *budget.Pricing
	sink    trace.Sink
	now     func() time.Time
	owner   string
	rand    func() float64

	killMu sync.Mutex // serialises writers of kills
	kills  atomic.Pointer[killSet]

	mu   sync.Mutex
	live map[string]*Run

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
		owner: cfg.Owner, rand: cfg.Rand, live: map[string]*Run{}, done: make(chan struct{})}
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

	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
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

// Close stops the background loop and waits for it. Live runs stay as they
// are (they are not finished); their records hold their last counters.
func (m *Manager) Close() error {
	m.stop()
	<-m.done
	return nil
}

// Owner returns the name this Manager uses in reservations and claims.
func (m *Manager) Owner() string { return m.owner }

func (m *Manager) loop(ctx context.Context, watch <-chan struct{}) {
	defer close(m.done)
	var poll, expire <-chan time.Time
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
			_, _ = m.st.ExpireReservations(ctx, m.now())
		}
	}
}

func (m *Manager) setKills(s killSet) { m.kills.Store(&s) }

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
}

// DefaultTenant is the tenant of a run started without one.
const DefaultTenant = "default"

// Start creates the run record (status running) and returns the live run.
// An ID already stored is an error wrapping store.ErrConflict. A run whose
// tenant (or everything) is killed starts, and its first step is refused.
func (m *Manager) Start(ctx context.Context, s Spec) (*Run, error) {
	if s.ID == "" {
		s.ID = uuid.NewString()
	}
	if s.Tenant == "" {
		s.Tenant = DefaultTenant
	}
	rec := store.Run{
		ID: s.ID, Tenant: s.Tenant, Agent: s.Agent, AgentVersion: s.AgentVersion,
		PromptVersion: s.PromptVersion, Labels: maps.Clone(s.Labels), Limits: s.Limits,
		Status: store.RunRunning, Started: m.now(),
	}
	if err := m.st.CreateRun(ctx, rec); err != nil {
		return nil, fmt.Errorf("run: create %s: %w", s.ID, err)
	}
	r := m.newRun(rec)
	m.mu.Lock()
	m.live[r.id] = r
	m.mu.Unlock()
	m.sink.Record(r.runSpan())
	return r, nil
}

// Get returns the run id: the live one when this Manager drives it,
// otherwise the stored record, which becomes live if it is still running.
// An ended run is returned too; its steps are refused. An unknown id is an
// error wrapping store.ErrNotFound.
func (m *Manager) Get(ctx context.Context, id string) (*Run, error) {
	m.mu.Lock()
	r, ok := m.live[id]
	m.mu.Unlock()
	if ok {
		return r, nil
	}
	rec, err := m.st.GetRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("run: get %s: %w", id, err)
	}
	r = m.newRun(rec)
	if rec.Status != store.RunRunning {
		return r, nil
	}
	m.mu.Lock()
	if cur, ok := m.live[id]; ok { // loaded concurrently
		m.mu.Unlock()
		r.release()
		return cur, nil
	}
	m.live[id] = r
	m.mu.Unlock()
	if r.isEnded() { // its deadline had passed: it stopped as it loaded
		m.forget(r)
	}
	if k, ok := m.loadKills().forRun(r.id, r.tenant); ok {
		r.kill(ctx, k)
	}
	return r, nil
}

// Resume is Get, named for the gateway's use: continue a run begun by an
// earlier request or process.
func (m *Manager) Resume(ctx context.Context, id string) (*Run, error) { return m.Get(ctx, id) }

func (m *Manager) forget(r *Run) {
	m.mu.Lock()
	if m.live[r.id] == r {
		delete(m.live, r.id)
	}
	m.mu.Unlock()
}

// Live returns the number of runs this Manager drives.
func (m *Manager) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// storeSink writes each span to the store at once; errors are dropped (a
// trace must never fail a run).
type storeSink struct{ s store.Spans }

func (s storeSink) Record(sp trace.Span) {
	_ = s.s.WriteSpans(context.Background(), []trace.Span{sp})
}

type discard struct{}

func (discard) Record(trace.Span) {}

// errEnded marks a step refused because its run has ended.
var errEnded = errors.New("run has ended")
