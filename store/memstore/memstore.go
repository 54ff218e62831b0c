// Package memstore is a complete store.Store kept in memory: for tests
// everywhere and for library users who need no database. Nothing survives
// the process and nothing is shared between processes.
//
// Every method is safe for concurrent use and atomic; values passed in and
// returned are copied, so callers may keep or change them freely. Behaviour
// matches the SQL backends (store/storetest passes): span attributes come
// back under the same JSON round-trip rule, a reservation id is used once.
package memstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/codec"
	"github.com/belay-run/belay/trace"
)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("memstore: closed")

// Store is the in-memory store. The zero value is not usable; call New.
type Store struct {
	ledger *budget.MemLedger

	mu        sync.Mutex
	closed    bool
	runs      map[string]store.Run
	spans     map[string]map[string]storedSpan // run id → span id → span
	idem      map[string]*idemRecord
	approvals map[string]store.Approval
	apOrder   []string
	kills     map[killKey]store.Kill
	goldens   map[string]golden
	watchers  []chan struct{} // each drained by its forwarding goroutine
}

type golden struct {
	canonical []byte
	runID     string
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.KillWatcher = (*Store)(nil)
	_ store.RunPruner   = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{
		ledger:    budget.NewMemLedger(),
		runs:      map[string]store.Run{},
		spans:     map[string]map[string]storedSpan{},
		idem:      map[string]*idemRecord{},
		approvals: map[string]store.Approval{},
		kills:     map[killKey]store.Kill{},
		goldens:   map[string]golden{},
	}
}

// Close marks the store closed; later calls return ErrClosed. Kill
// watchers' channels close when their contexts end, as documented by
// store.KillWatcher.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	return nil
}

// lock takes the mutex and reports ErrClosed (unlocking) when closed.
func (s *Store) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) isClosed() error {
	if err := s.lock(); err != nil {
		return err
	}
	s.mu.Unlock()
	return nil
}

// Ledger methods delegate to a budget.MemLedger.

func (s *Store) Reserve(ctx context.Context, r budget.Reservation) error {
	if err := s.isClosed(); err != nil {
		return err
	}
	err := s.ledger.Reserve(ctx, r)
	if errors.Is(err, budget.ErrDuplicateReservation) {
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	}
	return err
}

// ReserveAll holds every reservation of rs or none (budget.BatchLedger).
func (s *Store) ReserveAll(ctx context.Context, rs []budget.Reservation) error {
	if err := s.isClosed(); err != nil {
		return err
	}
	err := s.ledger.ReserveAll(ctx, rs)
	if errors.Is(err, budget.ErrDuplicateReservation) {
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	}
	return err
}

func (s *Store) Settle(ctx context.Context, id string, actual budget.USD) error {
	if err := s.isClosed(); err != nil {
		return err
	}
	return s.ledger.Settle(ctx, id, actual)
}

func (s *Store) Release(ctx context.Context, id string) error {
	if err := s.isClosed(); err != nil {
		return err
	}
	return s.ledger.Release(ctx, id)
}

func (s *Store) ExpireReservations(ctx context.Context, now time.Time) (int, error) {
	if err := s.isClosed(); err != nil {
		return 0, err
	}
	return s.ledger.ExpireReservations(ctx, now)
}

func (s *Store) Renew(ctx context.Context, ids []string, expiresAt time.Time) error {
	if err := s.isClosed(); err != nil {
		return err
	}
	return s.ledger.Renew(ctx, ids, expiresAt)
}

func (s *Store) Balance(ctx context.Context, sc budget.Scope) (budget.Balance, error) {
	if err := s.isClosed(); err != nil {
		return budget.Balance{}, err
	}
	return s.ledger.Balance(ctx, sc)
}

func (s *Store) MarkAlert(ctx context.Context, sc budget.Scope, threshold float64) (bool, error) {
	if err := s.isClosed(); err != nil {
		return false, err
	}
	return s.ledger.MarkAlert(ctx, sc, threshold)
}

func copyRun(r store.Run) store.Run {
	r.Labels = maps.Clone(r.Labels)
	return r
}

// CreateRun inserts r; an existing id is store.ErrConflict.
func (s *Store) CreateRun(_ context.Context, r store.Run) error {
	if r.ID == "" {
		return errors.New("memstore: run without an id")
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.runs[r.ID]; ok {
		return fmt.Errorf("%w: run %q exists", store.ErrConflict, r.ID)
	}
	s.runs[r.ID] = copyRun(r)
	return nil
}

// CreateRunSpent creates r and applies spends at once (see
// store.RunSpender).
func (s *Store) CreateRunSpent(ctx context.Context, r store.Run, spends []budget.Reservation) error {
	if r.ID == "" {
		return errors.New("memstore: run without an id")
	}
	rs := make([]budget.Reservation, len(spends))
	for i, sp := range spends {
		if !sp.Spend {
			return fmt.Errorf("memstore: create run %s: reservation %q is not a spend", r.ID, sp.ID)
		}
		sp.ID = "" // applied to its scopes only
		rs[i] = sp
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.runs[r.ID]; ok {
		return fmt.Errorf("%w: run %q exists", store.ErrConflict, r.ID)
	}
	if len(rs) > 0 {
		if err := s.ledger.ReserveAll(ctx, rs); err != nil {
			return err
		}
	}
	s.runs[r.ID] = copyRun(r)
	return nil
}

// UpdateRun replaces the record of r.ID (store.ErrNotFound if absent).
func (s *Store) UpdateRun(_ context.Context, r store.Run) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.runs[r.ID]; !ok {
		return fmt.Errorf("%w: run %q", store.ErrNotFound, r.ID)
	}
	s.runs[r.ID] = copyRun(r)
	return nil
}

// SaveRun writes r raised to the ledger's counts, unless it would write a
// running record over an ended one (see store.RunSaver).
func (s *Store) SaveRun(ctx context.Context, r store.Run, turns, cost budget.Scope) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	old, ok := s.runs[r.ID]
	if !ok {
		return fmt.Errorf("%w: run %q", store.ErrNotFound, r.ID)
	}
	if r.Status == store.RunRunning && old.Status != store.RunRunning {
		return fmt.Errorf("%w (%s)", store.ErrRunEnded, old.Status)
	}
	r.Tenant, r.Started = old.Tenant, old.Started
	r.InputTokens, r.OutputTokens = max(r.InputTokens, old.InputTokens), max(r.OutputTokens, old.OutputTokens)
	r.CostEstimated = r.CostEstimated || old.CostEstimated
	if turns != "" {
		if b, err := s.ledger.Balance(ctx, turns); err == nil {
			r.Turns = max(r.Turns, int(b.Settled+b.Reserved))
		}
	}
	if cost != "" {
		if b, err := s.ledger.Balance(ctx, cost); err == nil {
			r.Cost = max(r.Cost, b.Settled)
		}
	}
	s.runs[r.ID] = copyRun(r)
	return nil
}

// GetRun returns the run id (store.ErrNotFound if absent).
func (s *Store) GetRun(_ context.Context, id string) (store.Run, error) {
	if err := s.lock(); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return store.Run{}, fmt.Errorf("%w: run %q", store.ErrNotFound, id)
	}
	return copyRun(r), nil
}

// ListRuns returns the runs matching f, newest first (ties by id,
// descending).
func (s *Store) ListRuns(_ context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	var out []store.Run
	for _, r := range s.runs {
		if (f.Tenant == "" || r.Tenant == f.Tenant) && (f.Agent == "" || r.Agent == f.Agent) &&
			(f.Status == "" || r.Status == f.Status) &&
			(f.Since.IsZero() || !r.Started.Before(f.Since)) && (f.Before.IsZero() || r.Started.Before(f.Before)) {
			out = append(out, copyRun(r))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b store.Run) int {
		if c := b.Started.Compare(a.Started); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// storedSpan is a span with its attributes and events encoded as the SQL
// backends store them, so values come back under the same round-trip rule
// (store/internal/codec): integers as int64, NaN as "NaN", and so on.
type storedSpan struct {
	span   trace.Span // Attrs and Events nil
	attrs  *string
	events *string
}

func encodeSpan(sp trace.Span) (storedSpan, error) {
	a, err := codec.EncodeAttrs(sp.Attrs)
	if err != nil {
		return storedSpan{}, fmt.Errorf("memstore: span %q: %w", sp.SpanID, err)
	}
	e, err := codec.EncodeEvents(sp.Events)
	if err != nil {
		return storedSpan{}, fmt.Errorf("memstore: span %q: %w", sp.SpanID, err)
	}
	sp.Attrs, sp.Events = nil, nil
	return storedSpan{span: sp, attrs: a, events: e}, nil
}

func (s storedSpan) decode() (trace.Span, error) {
	sp := s.span
	var err error
	if sp.Attrs, err = codec.DecodeAttrs(s.attrs); err != nil {
		return sp, err
	}
	sp.Events, err = codec.DecodeEvents(s.events)
	return sp, err
}

// WriteSpans stores spans in one step: a span whose run id and span id are
// already stored is replaced; a span without an id or with an attribute
// JSON cannot encode fails the whole batch.
func (s *Store) WriteSpans(_ context.Context, spans []trace.Span) error {
	enc := make([]storedSpan, len(spans))
	for i, sp := range spans {
		if sp.SpanID == "" {
			return errors.New("memstore: span without an id")
		}
		var err error
		if enc[i], err = encodeSpan(sp); err != nil {
			return err
		}
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, e := range enc {
		run := s.spans[e.span.RunID]
		if run == nil {
			run = map[string]storedSpan{}
			s.spans[e.span.RunID] = run
		}
		run[e.span.SpanID] = e
	}
	return nil
}

// RunSpans returns the spans of runID by start time, then span id.
func (s *Store) RunSpans(_ context.Context, runID string) ([]trace.Span, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	enc := make([]storedSpan, 0, len(s.spans[runID]))
	for _, e := range s.spans[runID] {
		enc = append(enc, e)
	}
	s.mu.Unlock()
	out := make([]trace.Span, len(enc))
	for i, e := range enc {
		var err error
		if out[i], err = e.decode(); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b trace.Span) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.SpanID, b.SpanID)
	})
	return out, nil
}

// SaveGolden stores (or replaces) the golden trace name.
func (s *Store) SaveGolden(_ context.Context, name, runID string, canonical []byte) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.goldens[name] = golden{canonical: slices.Clone(canonical), runID: runID}
	return nil
}

// ListGoldens returns every stored golden, by name ascending.
func (s *Store) ListGoldens(context.Context) ([]store.GoldenInfo, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]store.GoldenInfo, 0, len(s.goldens))
	for name, g := range s.goldens {
		out = append(out, store.GoldenInfo{Name: name, RunID: g.runID, Bytes: int64(len(g.canonical))})
	}
	slices.SortFunc(out, func(a, b store.GoldenInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteGolden removes golden name (store.ErrNotFound if absent).
func (s *Store) DeleteGolden(_ context.Context, name string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.goldens[name]; !ok {
		return fmt.Errorf("%w: golden %q", store.ErrNotFound, name)
	}
	delete(s.goldens, name)
	return nil
}

// Golden returns the golden trace name (store.ErrNotFound if absent).
func (s *Store) Golden(_ context.Context, name string) ([]byte, string, error) {
	if err := s.lock(); err != nil {
		return nil, "", err
	}
	defer s.mu.Unlock()
	g, ok := s.goldens[name]
	if !ok {
		return nil, "", fmt.Errorf("%w: golden %q", store.ErrNotFound, name)
	}
	return slices.Clone(g.canonical), g.runID, nil
}

// PruneRuns deletes up to max runs that ended before before, oldest
// first, with their spans and the ledger scopes scopes names (see
// store.RunPruner).
func (s *Store) PruneRuns(_ context.Context, before time.Time, max int, scopes func(runID string) []budget.Scope) (int, error) {
	if max < 1 {
		return 0, fmt.Errorf("memstore: prune runs: max %d: want at least 1", max)
	}
	if err := s.lock(); err != nil {
		return 0, err
	}
	var old []store.Run
	for _, r := range s.runs {
		if r.Status != store.RunRunning && !r.Ended.IsZero() && r.Ended.Before(before) {
			old = append(old, r)
		}
	}
	slices.SortFunc(old, func(a, b store.Run) int {
		if c := a.Started.Compare(b.Started); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	old = old[:min(len(old), max)]
	for _, r := range old {
		delete(s.runs, r.ID)
		delete(s.spans, r.ID)
	}
	s.mu.Unlock()
	for _, r := range old {
		if scopes != nil {
			s.ledger.Forget(scopes(r.ID)...)
		}
	}
	return len(old), nil
}
