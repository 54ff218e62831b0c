package memstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/codec"
)

type idemRecord struct {
	owner     string
	leaseEnd  time.Time
	completed bool
	result    []byte
	isError   bool
}

func (r *idemRecord) claim(key string, now time.Time) store.Claim {
	c := store.Claim{Key: key, Owner: r.owner, LeaseEnd: r.leaseEnd}
	switch {
	case r.completed:
		c.State, c.Result, c.IsError = store.ClaimCompleted, slices.Clone(r.result), r.isError
	case now.Before(r.leaseEnd):
		c.State = store.ClaimInFlight
	default:
		c.State = store.ClaimExpired
	}
	return c
}

// Claim takes key for owner until now+lease if it is free; otherwise it
// reports the key's state (completed, in flight, expired). A key in flight
// is reported in flight even to its own owner.
func (s *Store) Claim(_ context.Context, key, owner string, lease time.Duration, now time.Time) (store.Claim, error) {
	if key == "" || owner == "" {
		return store.Claim{}, errors.New("memstore: claim needs a key and an owner")
	}
	if err := s.lock(); err != nil {
		return store.Claim{}, err
	}
	defer s.mu.Unlock()
	if r, ok := s.idem[key]; ok {
		return r.claim(key, now), nil
	}
	r := &idemRecord{owner: owner, leaseEnd: now.Add(lease)}
	s.idem[key] = r
	return store.Claim{Key: key, State: store.ClaimNew, Owner: owner, LeaseEnd: r.leaseEnd}, nil
}

// Lookup reports key's state at now without taking it;
// store.ErrNotFound when no record holds it.
func (s *Store) Lookup(_ context.Context, key string, now time.Time) (store.Claim, error) {
	if err := s.lock(); err != nil {
		return store.Claim{}, err
	}
	defer s.mu.Unlock()
	if r, ok := s.idem[key]; ok {
		return r.claim(key, now), nil
	}
	return store.Claim{}, fmt.Errorf("%w: idempotency key %q", store.ErrNotFound, key)
}

// TakeOver takes an expired key for owner; a key that is not expired, or
// is absent, is store.ErrConflict.
func (s *Store) TakeOver(_ context.Context, key, owner string, lease time.Duration, now time.Time) (store.Claim, error) {
	if err := s.lock(); err != nil {
		return store.Claim{}, err
	}
	defer s.mu.Unlock()
	r, ok := s.idem[key]
	if !ok {
		return store.Claim{}, fmt.Errorf("%w: idempotency key %q is not held", store.ErrConflict, key)
	}
	if c := r.claim(key, now); c.State != store.ClaimExpired {
		return c, fmt.Errorf("%w: key %q is %s", store.ErrConflict, key, c.State)
	}
	r.owner, r.leaseEnd = owner, now.Add(lease)
	return store.Claim{Key: key, State: store.ClaimNew, Owner: owner, LeaseEnd: r.leaseEnd}, nil
}

// Complete stores the result of key's effect. Only the current owner of a
// key not yet completed may complete it (store.ErrConflict otherwise); an
// expired lease not taken over may still be completed by its owner.
func (s *Store) Complete(_ context.Context, key, owner string, result []byte, isError bool) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.heldBy(key, owner)
	if err != nil {
		return err
	}
	r.completed, r.result, r.isError = true, slices.Clone(result), isError
	return nil
}

// Abandon frees key, held and not completed by owner, so a later Claim is
// new (store.ErrConflict otherwise).
func (s *Store) Abandon(_ context.Context, key, owner string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := s.heldBy(key, owner); err != nil {
		return err
	}
	delete(s.idem, key)
	return nil
}

// heldBy returns key's record when owner holds it, not completed; s.mu is
// held by the caller.
func (s *Store) heldBy(key, owner string) (*idemRecord, error) {
	r, ok := s.idem[key]
	if !ok {
		return nil, fmt.Errorf("%w: idempotency key %q", store.ErrNotFound, key)
	}
	if r.completed || r.owner != owner {
		return nil, fmt.Errorf("%w: key %q is held or completed by %q", store.ErrConflict, key, r.owner)
	}
	return r, nil
}

func copyApproval(a store.Approval) store.Approval {
	a.Arguments = slices.Clone(a.Arguments)
	return a
}

// CreateApproval stores a; an existing id is store.ErrConflict. An empty
// State is stored as pending.
func (s *Store) CreateApproval(_ context.Context, a store.Approval) error {
	if a.ID == "" {
		return errors.New("memstore: approval without an id")
	}
	if a.State == "" {
		a.State = store.ApprovalPending
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.approvals[a.ID]; ok {
		return fmt.Errorf("%w: approval %q exists", store.ErrConflict, a.ID)
	}
	s.approvals[a.ID] = copyApproval(a)
	s.apOrder = append(s.apOrder, a.ID)
	return nil
}

// GetApproval returns approval id (store.ErrNotFound if absent).
func (s *Store) GetApproval(_ context.Context, id string) (store.Approval, error) {
	if err := s.lock(); err != nil {
		return store.Approval{}, err
	}
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return store.Approval{}, fmt.Errorf("%w: approval %q", store.ErrNotFound, id)
	}
	return copyApproval(a), nil
}

// ListApprovals returns approvals in state (all when empty), oldest
// requested first, then in creation order.
func (s *Store) ListApprovals(_ context.Context, state store.ApprovalState) ([]store.Approval, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	var out []store.Approval
	for _, id := range s.apOrder {
		if a := s.approvals[id]; state == "" || a.State == state {
			out = append(out, copyApproval(a))
		}
	}
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b store.Approval) int { return a.Requested.Compare(b.Requested) })
	return out, nil
}

// DecideApproval moves pending approval id to state (approved, denied or
// expired) once; a decided approval is store.ErrConflict and the returned
// Approval is the stored one.
func (s *Store) DecideApproval(_ context.Context, id string, state store.ApprovalState, by, note string, at time.Time) (store.Approval, error) {
	switch state {
	case store.ApprovalApproved, store.ApprovalDenied, store.ApprovalExpired:
	default:
		return store.Approval{}, fmt.Errorf("memstore: cannot decide approval %q as %q; want approved, denied or expired", id, state)
	}
	if err := s.lock(); err != nil {
		return store.Approval{}, err
	}
	defer s.mu.Unlock()
	a, ok := s.approvals[id]
	if !ok {
		return store.Approval{}, fmt.Errorf("%w: approval %q", store.ErrNotFound, id)
	}
	if a.State != store.ApprovalPending {
		return copyApproval(a), fmt.Errorf("%w: approval %q is already %s", store.ErrConflict, id, a.State)
	}
	a.State, a.DecidedBy, a.Note, a.Decided = state, by, note, at
	s.approvals[id] = a
	return copyApproval(a), nil
}

type killKey struct {
	target store.KillTarget
	name   string
}

// SetKill sets (or replaces) the flag for k.Target and k.Name. An unknown
// target, a missing name, or a name for KillAll is an error.
func (s *Store) SetKill(_ context.Context, k store.Kill) error {
	if err := codec.KillTarget(k.Target, k.Name); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	if err := s.lock(); err != nil {
		return err
	}
	s.kills[killKey{k.Target, k.Name}] = k
	w := slices.Clone(s.watchers)
	s.mu.Unlock()
	notify(w)
	return nil
}

// ClearKill removes the flag for target and name (no error if absent).
func (s *Store) ClearKill(_ context.Context, target store.KillTarget, name string) error {
	if err := s.lock(); err != nil {
		return err
	}
	delete(s.kills, killKey{target, name})
	w := slices.Clone(s.watchers)
	s.mu.Unlock()
	notify(w)
	return nil
}

// ListKills returns every flag, by time set, then target, then name.
func (s *Store) ListKills(_ context.Context) ([]store.Kill, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	out := make([]store.Kill, 0, len(s.kills))
	for _, k := range s.kills {
		out = append(out, k)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b store.Kill) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Target, b.Target), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// notify wakes every watcher without blocking; the internal channels have
// a buffer of one and are never closed, so a send cannot panic.
func notify(ws []chan struct{}) {
	for _, w := range ws {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// WatchKills returns a channel that receives a value after any SetKill or
// ClearKill (changes close together may be coalesced into one value) and
// is closed when ctx ends.
func (s *Store) WatchKills(ctx context.Context) (<-chan struct{}, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	in := make(chan struct{}, 1)
	s.watchers = append(s.watchers, in)
	s.mu.Unlock()
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			s.watchers = slices.DeleteFunc(s.watchers, func(c chan struct{}) bool { return c == in })
			s.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-in:
			}
			select {
			case out <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
