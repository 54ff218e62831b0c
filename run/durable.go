package run

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belay-run/belay/store"
)

// Backoff of the store write retries: the first retry waits
// retryFirstWait, each next one twice as long, at most retryMaxWait.
const (
	retryFirstWait = 100 * time.Millisecond
	retryMaxWait   = 5 * time.Second
)

type managerStats struct {
	retries  atomic.Int64
	failures atomic.Int64
	stops    [len(stopReasons)]atomic.Int64 // runs stopped, by stopReasons' index
}

// retrier tracks the background retries so that Close waits for them.
type retrier struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// add registers a retry; false once the Manager is closed.
func (t *retrier) add() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

func (t *retrier) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

// permanent reports whether a store error cannot go away by retrying: the
// record or reservation is absent, or the write lost to another one.
func permanent(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict)
}

// durably runs the store write fn, which must be safe to repeat. When it
// fails with an error that may pass (a locked SQLite file, a dropped
// connection), it is retried in the background with backoff for up to
// Config.StoreRetryFor, and durably returns nil: the caller does not wait.
// Each failure is logged at WARN and counted in Stats.StoreRetries; a write
// given up is logged at ERROR and counted in Stats.StoreFailures. done,
// if not nil, is called once fn has succeeded or been given up, with the
// last error (nil on success). With a negative StoreRetryFor, or after
// Close, nothing is retried and fn's error is returned.
func (m *Manager) durably(ctx context.Context, op, runID string, fn func(context.Context) error, done func(error)) error {
	return m.durablyFor(ctx, m.cfg.StoreRetryFor, op, runID, fn, done)
}

// durablyMoney is durably for the ledger writes of money already spent (a
// step's settle): they are retried until the Manager closes, not for
// StoreRetryFor only. Given up, the spend would be lost from the ledger
// while the process lives and knows it: the step's reservation, no longer
// renewed, expires as unspent, and the tenant's budget under-counts it
// (adversarial review, session 26: a store back after 65 s).
func (m *Manager) durablyMoney(ctx context.Context, op, runID string, fn func(context.Context) error, done func(error)) error {
	retryFor := m.cfg.StoreRetryFor
	if retryFor >= 0 {
		retryFor = 0 // until Close
	}
	return m.durablyFor(ctx, retryFor, op, runID, fn, done)
}

// durablyFor is durably with retries for up to retryFor (0: until Close).
func (m *Manager) durablyFor(ctx context.Context, retryFor time.Duration, op, runID string, fn func(context.Context) error, done func(error)) error {
	err := fn(context.WithoutCancel(ctx))
	m.storeDown.Store(err != nil && !permanent(err))
	if err == nil || permanent(err) || retryFor < 0 || !m.retry.add() {
		if err != nil && !permanent(err) {
			m.giveUp(op, runID, err)
		}
		if done != nil {
			done(err)
		}
		return err
	}
	m.stats.retries.Add(1)
	m.log.Warn("run: store write failed; retrying", "op", op, "run_id", runID, "attempt", 1, "err", err)
	go func() {
		defer m.retry.wg.Done()
		err := m.retryLoop(retryFor, op, runID, fn)
		if done != nil {
			done(err)
		}
	}()
	return nil
}

func (m *Manager) retryLoop(retryFor time.Duration, op, runID string, fn func(context.Context) error) error {
	until := time.Now().Add(retryFor)
	wait := retryFirstWait
	for attempt := 2; ; attempt++ {
		t := time.NewTimer(wait)
		closing := false
		select {
		case <-t.C:
		case <-m.ctx.Done():
			t.Stop()
			closing = true // one last attempt, then give up
		}
		err := fn(context.WithoutCancel(m.ctx))
		switch {
		case err == nil:
			m.storeDown.Store(false)
			m.log.Info("run: store write recovered", "op", op, "run_id", runID, "attempt", attempt)
			return nil
		case permanent(err) || closing || retryFor > 0 && !time.Now().Add(wait).Before(until):
			m.giveUp(op, runID, err)
			return err
		}
		m.stats.retries.Add(1)
		m.log.Warn("run: store write failed; retrying", "op", op, "run_id", runID, "attempt", attempt, "err", err)
		wait = min(2*wait, retryMaxWait)
	}
}

func (m *Manager) giveUp(op, runID string, err error) {
	m.stats.failures.Add(1)
	m.log.Error("run: store write given up; the store misses it", "op", op, "run_id", runID, "err", err)
}
