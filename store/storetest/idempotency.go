package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
)

func testIdempotency(t *testing.T, s store.Store) {
	ctx := context.Background()
	claim := func(key, owner string, now time.Time, want store.ClaimState, wantOwner string) store.Claim {
		t.Helper()
		c, err := s.Claim(ctx, key, owner, time.Minute, now)
		must(t, err)
		if c.State != want || c.Owner != wantOwner || c.Key != key {
			t.Fatalf("Claim(%s, %s) = %+v, want state %s owner %s", key, owner, c, want, wantOwner)
		}
		return c
	}

	lookup := func(key string, now time.Time, want store.ClaimState, wantOwner string) store.Claim {
		t.Helper()
		c, err := s.Lookup(ctx, key, now)
		must(t, err)
		if c.State != want || c.Owner != wantOwner || c.Key != key {
			t.Fatalf("Lookup(%s) = %+v, want state %s owner %s", key, c, want, wantOwner)
		}
		return c
	}
	// Lookup never takes a key.
	if _, err := s.Lookup(ctx, "k1", at(0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lookup of an unheld key: got %v, want ErrNotFound", err)
	}
	c := claim("k1", "A", at(0), store.ClaimNew, "A")
	lookup("k1", at(time.Second), store.ClaimInFlight, "A")
	lookup("k1", at(2*time.Minute), store.ClaimExpired, "A")
	if !c.LeaseEnd.Equal(at(time.Minute)) {
		t.Errorf("LeaseEnd = %v, want %v", c.LeaseEnd, at(time.Minute))
	}
	// While the lease lasts, the key is in flight for everyone.
	c = claim("k1", "B", at(59*time.Second), store.ClaimInFlight, "A")
	if !c.LeaseEnd.Equal(at(time.Minute)) {
		t.Errorf("in-flight LeaseEnd = %v, want %v", c.LeaseEnd, at(time.Minute))
	}
	claim("k1", "A", at(time.Second), store.ClaimInFlight, "A")
	// Only the owner completes.
	if err := s.Complete(ctx, "k1", "B", []byte("nope"), false); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Complete by a non-owner: got %v, want ErrConflict", err)
	}
	must(t, s.Complete(ctx, "k1", "A", []byte(`{"refund":"r_123"}`), false))
	c = claim("k1", "B", at(time.Hour), store.ClaimCompleted, "A")
	if !bytes.Equal(c.Result, []byte(`{"refund":"r_123"}`)) || c.IsError {
		t.Errorf("completed claim result = %q isError %v", c.Result, c.IsError)
	}
	if c = lookup("k1", at(time.Hour), store.ClaimCompleted, "A"); !bytes.Equal(c.Result, []byte(`{"refund":"r_123"}`)) || c.IsError {
		t.Errorf("completed lookup result = %q isError %v", c.Result, c.IsError)
	}
	if err := s.Complete(ctx, "k1", "A", []byte("again"), false); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second Complete: got %v, want ErrConflict", err)
	}
	if _, err := s.TakeOver(ctx, "k1", "B", time.Minute, at(time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("TakeOver of a completed key: got %v, want ErrConflict", err)
	}

	// A stored failure.
	claim("k2", "A", at(0), store.ClaimNew, "A")
	must(t, s.Complete(ctx, "k2", "A", []byte("card declined"), true))
	if c = claim("k2", "B", at(0), store.ClaimCompleted, "A"); !c.IsError || string(c.Result) != "card declined" {
		t.Errorf("completed-with-error claim = %+v", c)
	}

	// An owner that dies: at lease end the key is expired (outcome unknown);
	// Claim does not take it, TakeOver does.
	claim("k3", "A", at(0), store.ClaimNew, "A")
	if _, err := s.TakeOver(ctx, "k3", "B", time.Minute, at(59*time.Second)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("TakeOver before the lease ends: got %v, want ErrConflict", err)
	}
	claim("k3", "B", at(time.Minute), store.ClaimExpired, "A")
	claim("k3", "B", at(time.Minute), store.ClaimExpired, "A")
	c, err := s.TakeOver(ctx, "k3", "B", 2*time.Minute, at(time.Minute))
	must(t, err)
	if c.State != store.ClaimNew || c.Owner != "B" || !c.LeaseEnd.Equal(at(3*time.Minute)) {
		t.Errorf("TakeOver = %+v, want new for B until %v", c, at(3*time.Minute))
	}
	claim("k3", "C", at(2*time.Minute), store.ClaimInFlight, "B")
	if err := s.Complete(ctx, "k3", "A", []byte("late"), false); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Complete by the old owner after a take-over: got %v, want ErrConflict", err)
	}
	must(t, s.Complete(ctx, "k3", "B", []byte("done"), false))
	if _, err := s.TakeOver(ctx, "absent", "B", time.Minute, at(0)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("TakeOver of an absent key: got %v, want ErrConflict", err)
	}

	// The owner may still complete after its lease ended, if nobody took over.
	claim("k4", "A", at(0), store.ClaimNew, "A")
	must(t, s.Complete(ctx, "k4", "A", nil, false))
	if c = claim("k4", "B", at(time.Hour), store.ClaimCompleted, "A"); len(c.Result) != 0 {
		t.Errorf("nil result came back %q", c.Result)
	}

	// Abandon frees the key for a new claim; only the owner abandons.
	claim("k5", "A", at(0), store.ClaimNew, "A")
	if err := s.Abandon(ctx, "k5", "B"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Abandon by a non-owner: got %v, want ErrConflict", err)
	}
	must(t, s.Abandon(ctx, "k5", "A"))
	claim("k5", "B", at(time.Second), store.ClaimNew, "B")
	if err := s.Abandon(ctx, "k1", "A"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Abandon of a completed key: got %v, want ErrConflict", err)
	}
	if _, err := s.Claim(ctx, "", "A", time.Minute, at(0)); err == nil {
		t.Error("Claim of an empty key: nil error")
	}
}
