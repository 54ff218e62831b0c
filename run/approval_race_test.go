package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// slowLookup: a Lookup that sees the key in flight answers after the
// in-flight call ended (store latency).
type slowLookup struct {
	*memstore.Store
	sawInFlight chan struct{}
	resume      chan struct{}
}

func (s *slowLookup) Lookup(ctx context.Context, key string, now time.Time) (store.Claim, error) {
	c, err := s.Store.Lookup(ctx, key, now)
	if err == nil && c.State == store.ClaimInFlight {
		close(s.sawInFlight)
		<-s.resume
	}
	return c, err
}

type denyAfterFirst struct{ n *atomic.Int32 }

func (d denyAfterFirst) Decide(context.Context, store.Approval) (store.ApprovalState, string, error) {
	if d.n.Add(1) == 1 {
		return store.ApprovalApproved, "person", nil
	}
	return store.ApprovalDenied, "person", nil
}

// A call that skipped its approval because its key was in flight
// elsewhere, and then got the key (the other call gave it up), is
// approved before its effect runs (adversarial review, session 26: it
// ran unapproved).
func TestApprovalAfterTheKeyIsGivenUp(t *testing.T) {
	var asked, effects atomic.Int32
	st := &slowLookup{Store: memstore.New(), sawInFlight: make(chan struct{}), resume: make(chan struct{})}
	pol := Policy{Irreversible: []string{"wire_money"}}
	f := newFixture(t, func(c *Config) { c.Store = st; c.Approver = denyAfterFirst{&asked}; c.Policy = pol })
	ctx := context.Background()
	r1 := f.start(t, Spec{ID: "w1"})
	r2 := f.start(t, Spec{ID: "w2"})
	call := ToolCall{Name: "wire_money", IdempotencyKey: "pay-42", Arguments: json.RawMessage(`{"usd":5}`)}
	running, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := r1.Tool(ctx, call, func(context.Context) (json.RawMessage, error) {
			close(running)
			<-release
			return nil, fmt.Errorf("bank offline: %w", ErrNoEffect) // nothing happened: key abandoned
		})
		done <- err
	}()
	<-running
	errc := make(chan error, 1)
	go func() {
		_, err := r2.Tool(ctx, call, func(context.Context) (json.RawMessage, error) {
			effects.Add(1)
			return json.RawMessage(`"sent"`), nil
		})
		errc <- err
	}()
	<-st.sawInFlight
	close(release)
	<-done
	close(st.resume)
	err := <-errc
	if !errors.Is(err, failure.ApprovalDenied) || asked.Load() != 2 || effects.Load() != 0 {
		t.Errorf("second call: err=%v; approver asked %d times; effects run by the second call: %d; "+
			"want approval_denied, asked twice, no effect", err, asked.Load(), effects.Load())
	}
}
