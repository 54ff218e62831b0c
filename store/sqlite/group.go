package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/sqlstore"
)

// Group commit. Every write of the process goes to one goroutine, the
// writer, which runs it in a BEGIN IMMEDIATE transaction shared with other
// writes and commits once for them all. A write whose function fails gets
// its own error at once and leaves nothing behind; the others commit
// (see mode: request-path writes run in a SAVEPOINT of their own;
// deferrable ones run under one savepoint for them all, and a failure
// rolls back to it and runs the writes before it again). A commit that
// fails reaches every write it held. A request-path write alone in its
// transaction runs without a savepoint.
//
// Request-path writes (the default) run as soon as the writer takes them,
// with the request-path writes queued behind them (up to maxBatch), and
// commit at once. Writes marked store.Deferrable (settles and records
// written in the background) run as they come, each when it comes, into a
// transaction left open for linger after its first one, so that many
// share one commit; their callers are answered at the commit. The commit
// comes earlier when lingerBatch of them have run, when a request-path
// write comes (it runs in the same transaction and commits it), and on
// Store.Hurry (a reader about to wait for them). A commit writes each
// page it dirtied once, so the more calls share it the fewer pages each
// costs; at 32 writes a commit the commits were a quarter of the writer's
// CPU in BenchmarkChatCompletion (gateway). Larger batches (128 to 512)
// lowered the process's CPU per call while settles ran in goroutines of
// their own, but with the settle in the handler neither that benchmark
// nor bench/gateway's -seq-only runs showed a gain from 256, so 32 stays. Running each write when it comes keeps the
// writer's CPU spread out, not in bursts that delay the requests around
// them. While
// the transaction is open, other processes' writes to the file wait (up
// to their busy timeout); readers do not. What a crash loses is the open
// transaction, up to linger of records and covered settles (a covered
// settle's reservation, in the ledger, expires after the reservation TTL),
// and the writes queued behind it: more while another process holds the
// file's lock or the writer falls behind.
const (
	maxBatch   = 128
	queueDepth = 1024
	linger     = 25 * time.Millisecond
	// lingerBatch deferrable writes in the open transaction commit it:
	// under a heavy load the linger would keep more writes (and their
	// callers) in flight without making the commit cheaper per write.
	lingerBatch = 32
	// rest is how long the writer leaves the file's write lock free after
	// a linger ran out, before it begins the next transaction for
	// deferrable writes (request-path writes do not wait): a process that
	// shares the file (`belay kill`, a second gateway) polls for the lock
	// while it waits, and would otherwise find it held nearly always.
	rest = 5 * time.Millisecond
)

// errWriterClosed is returned by writes after Close.
var errWriterClosed = errors.New("store/sqlite: writer is closed")

type writeReq struct {
	ctx  context.Context
	fn   func(sqlstore.Tx) error
	done chan error
}

type groupWriter struct {
	b      *backend
	mu     sync.RWMutex // held for reading while enqueueing; Close takes it
	closed bool
	queue  chan *writeReq // writes on a request path
	lazy   chan *writeReq // deferrable writes
	hurry  chan struct{}  // ends a linger (buffered: a signal waits for the next one)
	// reqs recycles write requests (with their answer channels) between
	// the writes of this writer.
	reqs   sync.Pool
	ctx    context.Context // the transactions' context; canceled after the queue is drained
	cancel context.CancelFunc
	done   chan struct{}
}

func startGroupWriter(b *backend) *groupWriter {
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupWriter{b: b, queue: make(chan *writeReq, queueDepth), lazy: make(chan *writeReq, queueDepth),
		hurry: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	g.reqs.New = func() any { return &writeReq{done: make(chan error, 1)} }
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
	r := g.reqs.Get().(*writeReq)
	r.ctx, r.fn = ctx, fn
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		g.reqs.Put(r)
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
		g.reqs.Put(r)
		return ctx.Err()
	}
	g.mu.RUnlock()
	err := <-r.done
	r.ctx, r.fn = nil, nil
	g.reqs.Put(r)
	return err
}

// hurryUp ends the writer's current or next linger.
func (g *groupWriter) hurryUp() {
	select {
	case g.hurry <- struct{}{}:
	default:
	}
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
	t := &openTx{g: g}
	commitAt := time.NewTimer(linger)
	commitAt.Stop()
	restEnd := time.NewTimer(rest)
	restEnd.Stop()
	resting := false
	queue, lazy := g.queue, g.lazy
	for queue != nil || lazy != nil {
		// No queue goes first: under a steady request-path load the other
		// would never be taken. A request-path write waits at most for one
		// deferrable write to run, and then commits the transaction.
		// A Hurry that comes while no transaction is open and none rests
		// waits for the next: its caller waits for a write not queued yet.
		take := lazy
		var due, rested <-chan time.Time
		var hurry <-chan struct{}
		if t.tx != nil {
			due, hurry = commitAt.C, g.hurry
		}
		if resting {
			take, rested, hurry = nil, restEnd.C, g.hurry
		}
		select {
		case r, ok := <-queue:
			queue = g.urgent(t, r, ok, queue)
		case r, ok := <-take:
			if !ok {
				lazy = nil
				continue
			}
			opened := t.tx == nil
			t.run(r, replay)
			switch {
			case t.tx == nil: // nothing is waiting for a commit
			case len(t.held) >= lingerBatch:
				t.commit()
			case opened:
				commitAt.Reset(linger)
			}
		case <-due:
			// A linger that ran out: the load is light, and the file's
			// write lock is free for rest before the next transaction.
			t.commit()
			resting = true
			restEnd.Reset(rest)
		case <-rested:
			resting = false
		case <-hurry:
			// What is queued now goes in the transaction, which commits.
			resting = false
			restEnd.Stop()
			t.runAll(drain(nil, lazy), replay)
			if t.tx != nil {
				t.commit()
			}
		}
		if t.tx == nil {
			commitAt.Stop()
		}
	}
	if t.tx != nil {
		t.commit()
	}
	if t.conn != nil {
		t.conn.close() //nolint:errcheck // nothing is left to write
	}
}

// urgent runs r (received with ok from queue) and the request-path writes
// queued behind it, up to maxBatch, in the open transaction (or a new one)
// and commits it; it returns queue, or nil once it is closed.
func (g *groupWriter) urgent(t *openTx, r *writeReq, ok bool, queue chan *writeReq) chan *writeReq {
	if !ok {
		return nil
	}
	batch := drain([]*writeReq{r}, queue)
	m := savepoint
	if len(batch) == 1 && t.tx == nil {
		m = alone
	}
	t.runAll(batch, m)
	if t.tx != nil {
		t.commit()
	}
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

// openTx is the writer's transaction and the writes run in it, whose
// callers wait for its commit. Only the writer goroutine uses it.
type openTx struct {
	g    *groupWriter
	conn *wconn    // the writer's connection; nil before the first transaction or after it broke
	tx   driver.Tx // nil when none is open
	wt   writeTx
	held []*writeReq
	// outer is set while SAVEPOINT t, opened before the transaction's
	// first write in replay mode, is open; from is the number of writes
	// held before it.
	outer bool
	from  int
	// replayed is set once a failure in replay mode has run the writes
	// held again: the transaction's later writes run in savepoints, so
	// that no write runs more than twice.
	replayed bool
}

// mode is how a write runs in the writer's transaction.
type mode int

const (
	// alone: the only write of its transaction, which commits right after
	// it. A failure rolls the transaction back.
	alone mode = iota
	// savepoint: inside SAVEPOINT w, so that a failure is rolled back to
	// it and the transaction's other writes commit. Request-path writes
	// that share a transaction run so: a refusal (a budget exceeded, a
	// key claimed) is an answer they give often.
	savepoint
	// replay: with no savepoint of its own. Deferrable writes run so:
	// they rarely fail, and a savepoint per write cost two statements
	// and a copy, in SQLite's statement journal, of every page the write
	// was the first to change since its savepoint (BenchmarkModelCall,
	// the builds in turn in one run: 95/79/92/82/101 µs of the process's
	// CPU per call with a savepoint per write, 70/76/72/82/108 with one
	// per transaction as below). One savepoint, t, opened before the
	// transaction's first such write, covers them all: a failure rolls
	// back to t, keeping the transaction and the file's write lock (an
	// adversarial review found that a full rollback let another process
	// take the lock, failing the writes that had run), and the writes
	// held since t run again, each in a savepoint, as do the
	// transaction's later writes. So a write runs at most twice (the same
	// review: with every later failure running them all again, the
	// reruns grew with the square of the failures). A write function must
	// be safe to run again: store's are, each setting its results anew on
	// each run.
	replay
)

// run runs r in the open transaction, beginning one if none is open, as m
// says. A write whose context has ended is not run; a write that fails, or
// whose transaction cannot begin, is answered at once; the others wait for
// the commit. When the file stayed locked through the busy timeout, the
// writes queued are answered with the same error, and so is r; run
// returns that error for the caller's others.
func (t *openTx) run(r *writeReq, m mode) (locked error) {
	if err := r.ctx.Err(); err != nil {
		r.done <- err
		return nil
	}
	return t.start(r, m)
}

// start is run without the check of r's context: a write run again after
// another's failure runs although its caller left, as it had started.
func (t *openTx) start(r *writeReq, m mode) (locked error) {
	if t.tx == nil {
		// The transaction and its statements run under a context that is
		// never done: a write that started finishes (see writeTx), and
		// the driver then sets up no interrupt watcher per statement.
		tx, err := t.begin()
		if err != nil {
			r.done <- err
			if errors.Is(code(err), ErrLocked) {
				// The file stayed locked through the busy timeout: the
				// writes queued meanwhile fail with it too, rather than
				// each wait the timeout again in turn.
				for _, q := range drain(drain(nil, t.g.queue), t.g.lazy) {
					q.done <- err
				}
				return err
			}
			return nil
		}
		t.tx = tx
		t.wt = writeTx{w: t.conn, ctx: context.Background()}
	}
	if m == replay && t.replayed {
		m = savepoint
	}
	switch m {
	case alone:
		if err := call(r.fn, t.wt); err != nil {
			t.rollback(err)
			r.done <- err
			return nil
		}
	case replay:
		if !t.outer {
			if _, err := t.wt.Exec(context.Background(), "SAVEPOINT t"); err != nil {
				t.abort(r, err)
				return nil
			}
			t.outer, t.from = true, len(t.held)
		}
		if err := call(r.fn, t.wt); err != nil {
			return t.again(r, err)
		}
	default:
		// The savepoint statements are prepared once, as the writes'.
		if _, err := t.wt.Exec(context.Background(), "SAVEPOINT w"); err != nil {
			t.abort(r, err)
			return nil
		}
		ferr := call(r.fn, t.wt)
		if ferr != nil {
			if _, err := t.wt.Exec(context.Background(), "ROLLBACK TO w"); err != nil {
				t.abort(r, err)
				return nil
			}
		}
		if _, err := t.wt.Exec(context.Background(), "RELEASE w"); err != nil {
			t.abort(r, err)
			return nil
		}
		if ferr != nil {
			r.done <- ferr
			if len(t.held) == 0 { // nothing to commit: free the write lock
				t.rollback(nil)
			}
			return nil
		}
	}
	t.held = append(t.held, r)
	return nil
}

// begin opens the writer's connection if none is open, or if the driver
// reported it broken (driver.ErrBadConn) or no longer finds it usable
// (driver.Validator), as database/sql checks before it reuses a
// connection; then it begins a transaction on it (BEGIN
// IMMEDIATE, from its _txlock).
func (t *openTx) begin() (driver.Tx, error) {
	if t.conn != nil && (t.conn.bad || !t.conn.usable()) {
		t.conn.close() //nolint:errcheck // broken: a new connection replaces it
		t.conn = nil
	}
	if t.conn == nil {
		c, err := t.g.b.dialWriter()
		if err != nil {
			return nil, err
		}
		t.conn = c
	}
	return t.conn.begin(context.Background())
}

// again answers r, which failed with err in replay mode, rolls the
// transaction back to savepoint t, and runs the writes held since t again,
// each in a savepoint, in the same transaction. When the rollback to t
// fails (SQLite rolled the whole transaction back itself: a full disk, an
// I/O error), the writes held fail with that error. It returns the locked
// error of start.
func (t *openTx) again(r *writeReq, err error) (locked error) {
	if _, rerr := t.wt.Exec(context.Background(), "ROLLBACK TO t"); rerr != nil {
		t.abort(r, rerr)
		return nil
	}
	r.done <- err
	t.replayed = true
	rerun := append([]*writeReq(nil), t.held[t.from:]...)
	clear(t.held[t.from:])
	t.held = t.held[:t.from]
	for i, w := range rerun {
		if err := t.start(w, savepoint); err != nil {
			for _, w := range rerun[i+1:] {
				w.done <- err
			}
			return err
		}
	}
	return nil
}

// runAll runs the writes of batch in turn (see run); when the file stayed
// locked, the ones left fail with the same error.
func (t *openTx) runAll(batch []*writeReq, m mode) {
	for i, r := range batch {
		if err := t.run(r, m); err != nil {
			for _, r := range batch[i+1:] {
				r.done <- err
			}
			return
		}
	}
}

// commit commits the open transaction and answers the writes it held
// with the outcome.
func (t *openTx) commit() {
	err := t.conn.note(t.tx.Commit())
	if err == nil {
		t.g.b.ckpt.committed()
	} else if !t.conn.bad {
		// A COMMIT that failed can leave the transaction open (SQLITE_BUSY
		// with statements in progress): roll it back, so that the writer
		// does not keep the file's write lock, or replace the connection
		// (closing it ends the transaction) if that fails too.
		if rerr := t.tx.Rollback(); rerr != nil {
			t.conn.bad = true
		}
	}
	t.answer(err)
}

// abort rolls the whole transaction back after a savepoint statement
// failed: r and every write it held get err.
func (t *openTx) abort(r *writeReq, err error) {
	err = fmt.Errorf("batch rolled back: %w", err)
	t.rollback(err)
	r.done <- err
}

// rollback rolls the open transaction back; the writes it held get err.
func (t *openTx) rollback(err error) {
	if rerr := t.tx.Rollback(); rerr != nil {
		t.conn.bad = true // still in the transaction: the next one needs a new connection
	}
	t.answer(err)
}

// answer sends err to every write held and closes the transaction.
func (t *openTx) answer(err error) {
	for _, r := range t.held {
		r.done <- err
	}
	clear(t.held)
	t.held = t.held[:0]
	t.tx = nil
	t.wt = writeTx{}
	t.outer, t.from, t.replayed = false, 0, false
}

// call runs fn, turning a panic into an error so that the writer survives
// it and the transaction is rolled back (to the write's savepoint). Rows
// fn left open are closed when it returns or panics (see wconn.closeRows).
func call(fn func(sqlstore.Tx) error, tx writeTx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store/sqlite: write panicked: %v", p)
		}
		if cerr := tx.w.closeRows(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	return fn(tx)
}
