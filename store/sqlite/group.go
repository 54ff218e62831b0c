package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/belay-run/belay/store"
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
//
// Writes marked store.Deferrable (settles and records written in the
// background) wait in their own queue: the writer takes the other writes
// first, and holds a deferrable one for linger so that the ones that
// follow share its transaction (up to maxBatch; more wait for the next). A write on a request path never waits for
// that delay: it ends it.
const (
	maxBatch   = 128
	queueDepth = 1024
	linger     = 2 * time.Millisecond
	// maxDeferWait is how long request-path batches may keep deferrable
	// writes waiting before a batch of them runs first.
	maxDeferWait = 20 * time.Millisecond
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
	queue  chan *writeReq  // writes on a request path
	lazy   chan *writeReq  // deferrable writes
	ctx    context.Context // the transactions' context; canceled after the queue is drained
	cancel context.CancelFunc
	done   chan struct{}
}

func startGroupWriter(b *backend) *groupWriter {
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupWriter{b: b, queue: make(chan *writeReq, queueDepth), lazy: make(chan *writeReq, queueDepth),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
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
	q := g.queue
	if store.IsDeferrable(ctx) {
		q = g.lazy
	}
	select {
	case q <- r:
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
	close(g.lazy)
	g.mu.Unlock()
	<-g.done
	g.cancel()
}

func (g *groupWriter) loop() {
	defer close(g.done)
	batch := make([]*writeReq, 0, maxBatch)
	var held []*writeReq // deferrable writes put off by request-path ones
	hold := time.NewTimer(linger)
	hold.Stop()
	queue, lazy := g.queue, g.lazy
	// waiting: since when deferrable writes have been kept waiting by
	// request-path batches (zero: none are). Past maxDeferWait they run
	// next, whatever request-path writes are queued: under a steady
	// request-path load from more than maxBatch callers, the request queue
	// is never empty, and they would never run otherwise.
	var waiting time.Time
next:
	for queue != nil || lazy != nil || len(held) > 0 {
		batch = batch[:0]
		pending := len(held) > 0 || (lazy != nil && len(lazy) > 0)
		overdue := pending && !waiting.IsZero() && time.Since(waiting) >= maxDeferWait
		if !overdue {
			// Request-path writes go first, in a transaction of their own.
			select {
			case r, ok := <-queue:
				if pending && waiting.IsZero() {
					waiting = time.Now()
				}
				queue = g.urgent(batch, r, ok, queue)
				continue
			default:
			}
		}
		switch {
		case len(held) > 0:
			batch = append(batch, held...)
			held = held[:0]
		case overdue: // pending: the channel holds one
			r, ok := <-lazy
			if !ok {
				lazy = nil
				continue
			}
			batch = append(batch, r)
		default:
			select {
			case r, ok := <-queue:
				queue = g.urgent(batch, r, ok, queue)
				continue
			case r, ok := <-lazy:
				if !ok {
					lazy = nil
					continue
				}
				batch = append(batch, r)
			}
			// Hold a deferrable write for the ones that follow, until
			// linger has passed; a request-path write that comes meanwhile
			// ends the wait and runs first. The deferrable writes that
			// follow wait in their channel meanwhile (taken by drain), so
			// that each does not wake this goroutine.
			hold.Reset(linger)
			select {
			case r, ok := <-queue:
				hold.Stop()
				held = append(held, batch...)
				queue = g.urgent(batch[:0], r, ok, queue)
				continue next
			case <-hold.C:
			}
		}
		batch = drain(batch, lazy)
		// A request-path write that comes while this batch runs preempts
		// it, unless the batch is overdue.
		preempt := queue
		if overdue {
			preempt = nil
		}
		if rest := g.run(batch, preempt); len(rest) > 0 {
			held = append(held, rest...)
		}
		waiting = time.Time{}
		if len(held) > 0 {
			waiting = time.Now()
		}
		clear(batch)
		g.b.prepareIfWanted(g.ctx)
	}
}

// urgent runs r (received with ok from queue) and the request-path writes
// queued behind it in one transaction, and returns queue, or nil once it
// is closed.
func (g *groupWriter) urgent(batch []*writeReq, r *writeReq, ok bool, queue chan *writeReq) chan *writeReq {
	if !ok {
		return nil
	}
	batch = drain(append(batch, r), queue)
	g.run(batch, nil)
	clear(batch)
	return queue
}

// drain adds the writes waiting in q to batch, up to maxBatch, without
// blocking.
func drain(batch []*writeReq, q chan *writeReq) []*writeReq {
	for q != nil && len(batch) < maxBatch {
		select {
		case r, ok := <-q:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// run executes one batch in one transaction and answers every write in it.
// With urgent set (a batch of deferrable writes), a request-path write
// that arrives meanwhile is run next in the same transaction, which then
// commits at once: the deferrable writes not yet run are returned, to run
// after it, so that a request never waits for a long deferrable batch.
func (g *groupWriter) run(batch []*writeReq, urgent chan *writeReq) (rest []*writeReq) {
	errs := make([]error, len(batch))
	live := 0
	for i, r := range batch {
		if errs[i] = r.ctx.Err(); errs[i] == nil {
			live++
		}
	}
	if live == 0 {
		answer(batch, errs)
		return nil
	}
	// The transaction and its statements run under a context that is
	// never done: a write that started finishes (see writeTx), and the
	// driver then sets up no interrupt watcher per statement.
	tx, err := g.b.w.BeginTx(context.Background(), nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		answer(batch, errs)
		return nil
	}
	wt := writeTx{b: g.b, tx: tx, ctx: context.Background(), stmts: map[*sql.Stmt]*sql.Stmt{}}
	if live == 1 && urgent == nil {
		for i, r := range batch {
			if errs[i] == nil {
				errs[i] = call(r.fn, wt)
				if errs[i] != nil {
					tx.Rollback() //nolint:errcheck // the fn's error is the one to report
					answer(batch, errs)
					return nil
				}
			}
		}
	} else {
		for i := 0; i < len(batch); i++ {
			if i > 0 && urgent != nil && rest == nil {
				select {
				case u, ok := <-urgent:
					if !ok {
						urgent = nil
						break
					}
					us := drain([]*writeReq{u}, urgent)
					rest = append([]*writeReq(nil), batch[i:]...)
					batch = append(batch[:i], us...)
					errs = append(errs[:i], make([]error, len(us))...)
				default:
				}
			}
			r := batch[i]
			if errs[i] != nil {
				continue
			}
			if errs[i] = r.ctx.Err(); errs[i] != nil {
				continue
			}
			// The savepoint statements are prepared once, as the writes'.
			if _, err := wt.Exec(context.Background(), "SAVEPOINT w"); err != nil {
				g.abort(tx, batch, errs, err)
				return rest
			}
			errs[i] = call(r.fn, wt)
			if errs[i] != nil {
				if _, err := wt.Exec(context.Background(), "ROLLBACK TO w"); err != nil {
					g.abort(tx, batch, errs, err)
					return rest
				}
			}
			if _, err := wt.Exec(context.Background(), "RELEASE w"); err != nil {
				g.abort(tx, batch, errs, err)
				return rest
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
	return rest
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
