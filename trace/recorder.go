package trace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// SpanWriter stores batches of spans (store.Spans satisfies it). WriteSpans
// must not keep spans after it returns: the Recorder reuses the slice.
type SpanWriter interface {
	WriteSpans(ctx context.Context, spans []Span) error
}

// ErrClosed is returned by Flush and Close on a closed Recorder.
var ErrClosed = errors.New("trace: recorder closed")

// ErrDropped is wrapped by the error Flush and Close return when spans were
// dropped since the previous Flush.
var ErrDropped = errors.New("trace: spans dropped")

// DropReason says why spans were dropped.
type DropReason string

const (
	DropQueueFull   DropReason = "queue_full"   // the queue stayed full for BlockTimeout
	DropWriteFailed DropReason = "write_failed" // the writer failed every retry
	DropClosed      DropReason = "closed"       // Record after Close
)

// Drop reports dropped spans to RecorderOptions.OnDrop.
type Drop struct {
	Reason DropReason
	Spans  int   // how many spans this report covers
	Err    error // the last write error, for DropWriteFailed
}

// RecorderOptions configure a Recorder. The zero value of each field means
// its default.
type RecorderOptions struct {
	// BatchSize is the most spans per WriteSpans call. Default 256.
	BatchSize int
	// FlushInterval is how long a partial batch waits for more spans before
	// it is written anyway. Default 100 ms.
	FlushInterval time.Duration
	// QueueSize bounds the spans held at once, waiting or being written.
	// Default 8192.
	QueueSize int
	// BlockTimeout is how long Record waits for room in a full queue before
	// it drops the span. Default 5 ms. Ignored when DropWhenFull is set.
	BlockTimeout time.Duration
	// DropWhenFull makes Record drop at once when the queue is full, never
	// blocking the caller.
	DropWhenFull bool
	// MaxRetries is how many times a failed write is retried before its
	// batch is dropped. Default 3; negative means no retry. Once Close
	// is called, a write is retried at most 3 times.
	MaxRetries int
	// RetryBackoff is the wait before the first retry, doubled for each
	// further one (at most 2 s). Default 50 ms.
	RetryBackoff time.Duration
	// WriteTimeout bounds each WriteSpans call. Default 10 s.
	WriteTimeout time.Duration
	// Payload decides what payload attributes survive; the zero value
	// removes them (CaptureOff). Applied before writing and fan-out.
	Payload PayloadPolicy
	// Fanout receives every span after the payload policy, from the
	// Recorder's goroutine, in order (an OTLP exporter wrapped in its own
	// Recorder, for example).
	Fanout []Sink
	// OnDrop, if set, is called for every drop, on the goroutine that
	// dropped (Record's caller for queue_full and closed, the writer
	// goroutine for write_failed), never under a lock. It must be fast.
	OnDrop func(Drop)
	// Logger receives a warning for every failed batch and a summary of
	// queue_full drops. Default slog.Default().
	Logger *slog.Logger
}

func (o *RecorderOptions) defaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 100 * time.Millisecond
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 8192
	}
	o.BatchSize = min(o.BatchSize, o.QueueSize)
	if o.BlockTimeout <= 0 {
		o.BlockTimeout = 5 * time.Millisecond
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 3
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 50 * time.Millisecond
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Stats are a Recorder's counters. Once Flush or Close has returned and no
// Record runs concurrently, Recorded == Written + Dropped + Queued.
type Stats struct {
	Recorded    uint64 // Record calls
	Written     uint64 // spans WriteSpans accepted
	Dropped     uint64 // spans dropped, for any DropReason
	WriteErrors uint64 // failed WriteSpans calls, retries included
	Queued      int    // spans held now, waiting or being written
	MaxQueued   int    // the most spans ever held at once (≤ QueueSize)
}

// Recorder is a Sink that batches spans and writes them from one background
// goroutine. Memory is bounded: at most QueueSize spans are held; when the
// queue is full Record waits up to BlockTimeout (or not at all with
// DropWhenFull) and then drops the span. Every drop is counted in Stats,
// passed to OnDrop and logged; a failed write is retried MaxRetries times
// before its batch is dropped.
//
// Record takes ownership of the span's Attrs and Events: the caller must not
// modify them afterwards. All methods are safe for concurrent use.
type Recorder struct {
	w    SpanWriter
	opts RecorderOptions

	mu         sync.Mutex
	ring       []Span // QueueSize slots; head..head+n are held
	head, n    int
	enq        uint64 // spans ever enqueued; the next span's sequence number
	processed  uint64 // spans ever taken off the queue (written or dropped)
	drainTo    uint64 // write every span with sequence < drainTo, full batch or not
	closed     bool
	maxQueued  int
	space      chan struct{} // closed when room frees up, if spaceWait
	spaceWait  bool
	waiters    []flushWaiter
	lastErr    error
	lastFlushD uint64 // Dropped at the previous Flush

	wake chan struct{} // cap 1: the writer has something to do
	done chan struct{} // closed when the writer goroutine exits

	recorded, written, dropped, writeErrors atomic.Uint64
	queueFull, queueFullLogged              atomic.Uint64
}

type flushWaiter struct {
	target uint64
	ch     chan struct{}
}

var _ Sink = (*Recorder)(nil)

// NewRecorder starts a Recorder writing to w. Call Close to stop it.
func NewRecorder(w SpanWriter, opts RecorderOptions) *Recorder {
	opts.defaults()
	r := &Recorder{
		w:     w,
		opts:  opts,
		ring:  make([]Span, opts.QueueSize),
		space: make(chan struct{}),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	go r.run()
	return r
}

// Record queues s for writing. It returns at once when there is room, waits
// up to BlockTimeout when the queue is full, and then drops s (counted,
// reported). After Close it drops s with reason closed.
func (r *Recorder) Record(s Span) {
	r.recorded.Add(1)
	var deadline <-chan time.Time
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			r.drop(Drop{Reason: DropClosed, Spans: 1, Err: ErrClosed})
			return
		}
		if r.n < len(r.ring) {
			r.ring[(r.head+r.n)%len(r.ring)] = s
			r.n++
			r.enq++
			r.maxQueued = max(r.maxQueued, r.n)
			signal := r.n == 1 || r.n == r.opts.BatchSize
			r.mu.Unlock()
			if signal {
				r.signal()
			}
			return
		}
		if r.opts.DropWhenFull {
			r.mu.Unlock()
			r.dropFull()
			return
		}
		r.spaceWait = true
		space := r.space
		r.mu.Unlock()
		if deadline == nil {
			t := time.NewTimer(r.opts.BlockTimeout)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-space:
		case <-deadline:
			r.dropFull()
			return
		}
	}
}

func (r *Recorder) dropFull() {
	r.queueFull.Add(1)
	r.drop(Drop{Reason: DropQueueFull, Spans: 1})
}

func (r *Recorder) drop(d Drop) {
	r.dropped.Add(uint64(d.Spans))
	if r.opts.OnDrop != nil {
		r.opts.OnDrop(d)
	}
}

func (r *Recorder) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Flush waits until every span recorded before the call has been written or
// dropped. It returns an error wrapping ErrDropped (and the last write error)
// if any span was dropped since the previous Flush, ctx.Err() if ctx ends
// first, and ErrClosed after Close.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	ch := r.waitFor(r.enq)
	r.mu.Unlock()
	r.signal()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.dropErr()
}

// waitFor asks the writer to drain up to target and returns a channel closed
// when it has. Called with r.mu held.
func (r *Recorder) waitFor(target uint64) chan struct{} {
	ch := make(chan struct{})
	if r.processed >= target {
		close(ch)
		return ch
	}
	r.drainTo = max(r.drainTo, target)
	r.waiters = append(r.waiters, flushWaiter{target: target, ch: ch})
	return ch
}

func (r *Recorder) dropErr() error {
	d := r.dropped.Load()
	r.mu.Lock()
	prev, last := r.lastFlushD, r.lastErr
	r.lastFlushD = max(prev, d)
	r.mu.Unlock()
	if d <= prev {
		return nil
	}
	if last != nil {
		return fmt.Errorf("%w: %d since the last flush (last write error: %w)", ErrDropped, d-prev, last)
	}
	return fmt.Errorf("%w: %d since the last flush", ErrDropped, d-prev)
}

// Close stops accepting spans, writes every queued span and stops the
// writer goroutine. It returns like Flush; a second Close returns ErrClosed.
// If ctx ends first Close returns ctx.Err() and the writer finishes in the
// background.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.closed = true
	r.drainTo = r.enq
	space, waiting := r.space, r.spaceWait
	if waiting {
		r.space, r.spaceWait = make(chan struct{}), false
	}
	r.mu.Unlock()
	if waiting {
		close(space) // blocked Records wake up and see closed
	}
	r.signal()
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return r.dropErr()
}

// Stats returns the current counters.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	q, mq := r.n, r.maxQueued
	r.mu.Unlock()
	return Stats{
		Recorded:    r.recorded.Load(),
		Written:     r.written.Load(),
		Dropped:     r.dropped.Load(),
		WriteErrors: r.writeErrors.Load(),
		Queued:      q,
		MaxQueued:   mq,
	}
}
