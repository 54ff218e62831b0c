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
	err := fn(context.WithoutCancel(ctx))
	m.storeDown.Store(err != nil && !permanent(err))
	if err == nil || permanent(err) || m.cfg.StoreRetryFor < 0 || !m.retry.add() {
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
		err := m.retryLoop(op, runID, fn)
		if done != nil {
			done(err)
		}
	}()
	return nil
}

func (m *Manager) retryLoop(op, runID string, fn func(context.Context) error) error {
	until := time.Now().Add(m.cfg.StoreRetryFor)
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
		case permanent(err) || closing || !time.Now().Add(wait).Before(until):
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
