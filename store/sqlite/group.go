package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/belay-run/belay/store/internal/sqlstore"
)

// Group commit. Every write of the process goes to one goroutine, which
// takes whatever writes are queued (up to maxBatch), runs them in one
// BEGIN IMMEDIATE transaction, each inside its own SAVEPOINT, and commits
// once. A write whose function fails is rolled back to its savepoint and
// gets its own error; the others commit. A commit that fails reaches every
// write of the batch. Alone in its batch, a write runs without a
// savepoint. Under load the cost of a commit (the WAL append, the lock) is
// shared by the batch; sequential writes pay one hand-off between
// goroutines.
const (
	maxBatch   = 128
	queueDepth = 1024
)

// errWriterClosed is returned by writes after Close.
var errWriterClosed = errors.New("store/sqlite: writer is closed")

type writeReq struct {
	ctx  context.Context
	fn   func(sqlstore.Tx) error
	done chan error
}

var reqPool = sync.Pool{New: func() any { return &writeReq{done: make(chan error, 1)} }}

type groupWriter struct {
	b      *backend
	mu     sync.RWMutex // held for reading while enqueueing; Close takes it
	closed bool
	queue  chan *writeReq
	ctx    context.Context // the transactions' context; canceled after the queue is drained
	cancel context.CancelFunc
	done   chan struct{}
}

func startGroupWriter(b *backend) *groupWriter {
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupWriter{b: b, queue: make(chan *writeReq, queueDepth), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go g.loop()
	return g
}

// write queues fn and waits for its outcome. Once queued, it waits even if
// ctx ends: the writer skips a write whose context has ended before it
// starts, and a write that started reports whether it committed, so the
// caller never takes a committed write for a failed one.
func (g *groupWriter) write(ctx context.Context, fn func(sqlstore.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := reqPool.Get().(*writeReq)
	r.ctx, r.fn = ctx, fn
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		reqPool.Put(r)
		return errWriterClosed
	}
	select {
	case g.queue <- r:
	case <-ctx.Done():
		g.mu.RUnlock()
		reqPool.Put(r)
		return ctx.Err()
	}
	g.mu.RUnlock()
	err := <-r.done
	r.ctx, r.fn = nil, nil
	reqPool.Put(r)
	return err
}

// close stops taking writes, lets the queued ones run and waits for them.
func (g *groupWriter) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		<-g.done
		return
	}
	g.closed = true
	close(g.queue)
	g.mu.Unlock()
	<-g.done
	g.cancel()
}

func (g *groupWriter) loop() {
	defer close(g.done)
	batch := make([]*writeReq, 0, maxBatch)
	for first := range g.queue {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-g.queue:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		g.run(batch)
		clear(batch)
		g.b.prepareIfWanted(g.ctx)
	}
}

// run executes one batch in one transaction and answers every write in it.
func (g *groupWriter) run(batch []*writeReq) {
	errs := make([]error, len(batch))
	live := 0
	for i, r := range batch {
		if errs[i] = r.ctx.Err(); errs[i] == nil {
			live++
		}
	}
	if live == 0 {
		answer(batch, errs)
		return
	}
	tx, err := g.b.w.BeginTx(g.ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		answer(batch, errs)
		return
	}
	wt := writeTx{b: g.b, tx: tx}
	if live == 1 {
		for i, r := range batch {
			if errs[i] == nil {
				errs[i] = call(r.fn, wt)
				if errs[i] != nil {
					tx.Rollback() //nolint:errcheck // the fn's error is the one to report
					answer(batch, errs)
					return
				}
			}
		}
	} else {
		for i, r := range batch {
			if errs[i] != nil {
				continue
			}
			if errs[i] = r.ctx.Err(); errs[i] != nil {
				continue
			}
			if _, err := tx.ExecContext(g.ctx, "SAVEPOINT w"); err != nil {
				g.abort(tx, batch, errs, err)
				return
			}
			errs[i] = call(r.fn, wt)
			undo := ""
			if errs[i] != nil {
				undo = "ROLLBACK TO w; "
			}
			if _, err := tx.ExecContext(g.ctx, undo+"RELEASE w"); err != nil {
				g.abort(tx, batch, errs, err)
				return
			}
		}
	}
	cerr := tx.Commit()
	if cerr == nil {
		g.b.ckpt.committed()
	}
	for i := range errs {
		if errs[i] == nil {
			errs[i] = cerr
		}
	}
	answer(batch, errs)
}

// abort rolls the whole batch back after a savepoint statement failed:
// every write of the batch that has not failed by itself gets err.
func (g *groupWriter) abort(tx interface{ Rollback() error }, batch []*writeReq, errs []error, err error) {
	tx.Rollback() //nolint:errcheck // err is the one to report
	for i := range errs {
		if errs[i] == nil {
			errs[i] = fmt.Errorf("batch rolled back: %w", err)
		}
	}
	answer(batch, errs)
}

// call runs fn, turning a panic into an error so that the writer survives
// it and the transaction is rolled back (to the write's savepoint).
func call(fn func(sqlstore.Tx) error, tx sqlstore.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store/sqlite: write panicked: %v", p)
		}
	}()
	return fn(tx)
}

func answer(batch []*writeReq, errs []error) {
	for i, r := range batch {
		r.done <- errs[i]
	}
}
