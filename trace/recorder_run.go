package trace

import (
	"context"
	"time"
)

// run is the Recorder's writer goroutine: it takes batches off the queue,
// applies the payload policy, fans out, writes with retries, and frees the
// queue slots.
func (r *Recorder) run() {
	defer close(r.done)
	batch := make([]Span, 0, r.opts.BatchSize)
	timer := time.NewTimer(r.opts.FlushInterval)
	timer.Stop()
	defer timer.Stop()
	var tick <-chan time.Time
	for {
		var pending int
		var stop bool
		batch, pending, stop = r.take(batch[:0])
		if len(batch) > 0 {
			r.process(batch)
			r.release(len(batch))
			clear(batch)
			continue
		}
		if stop {
			r.logQueueFull()
			return
		}
		if pending > 0 && tick == nil {
			timer.Reset(r.opts.FlushInterval)
			tick = timer.C
		}
		select {
		case <-r.wake:
		case <-tick:
			tick = nil
			r.mu.Lock()
			r.drainTo = max(r.drainTo, r.enq)
			r.mu.Unlock()
		}
	}
}

// take copies the next batch into buf: a full batch, or a partial one when
// a flush, a close or the flush interval asks for it. It also returns how
// many spans are held and whether the writer should stop.
func (r *Recorder) take(buf []Span) ([]Span, int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := 0
	if r.n >= r.opts.BatchSize || (r.n > 0 && r.processed < r.drainTo) {
		k = min(r.n, r.opts.BatchSize)
	}
	for i := range k {
		buf = append(buf, r.ring[(r.head+i)%len(r.ring)])
	}
	return buf, r.n, r.closed && r.n == 0
}

// release frees the k slots at the head of the queue, then wakes the
// flushes this completes and the Records waiting for room.
func (r *Recorder) release(k int) {
	r.mu.Lock()
	for i := range k {
		r.ring[(r.head+i)%len(r.ring)] = Span{} // drop references for the GC
	}
	r.head = (r.head + k) % len(r.ring)
	r.n -= k
	r.processed += uint64(k)
	var ready []chan struct{}
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if w.target <= r.processed {
			ready = append(ready, w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
	space, waiting := r.space, r.spaceWait
	if waiting {
		r.space, r.spaceWait = make(chan struct{}), false
	}
	r.mu.Unlock()
	for _, ch := range ready {
		close(ch)
	}
	if waiting {
		close(space)
	}
}

func (r *Recorder) process(batch []Span) {
	for i := range batch {
		batch[i] = r.opts.Payload.Apply(batch[i])
	}
	for _, sink := range r.opts.Fanout {
		for _, s := range batch {
			sink.Record(s)
		}
	}
	if attempts, err := r.write(batch); err != nil {
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
		r.opts.Logger.Warn("trace: spans dropped: write failed",
			"spans", len(batch), "attempts", attempts, "err", err)
		r.drop(Drop{Reason: DropWriteFailed, Spans: len(batch), Err: err})
	} else {
		r.written.Add(uint64(len(batch)))
	}
	r.logQueueFull()
}

// closingRetries bounds the retries of a write once Close was called: a
// long MaxRetries (a store away for a minute) must not hold Close for
// that long per batch.
const closingRetries = 3

// write calls WriteSpans, retrying MaxRetries times with doubling backoff
// (closingRetries at most once the Recorder is closing).
func (r *Recorder) write(batch []Span) (attempts int, err error) {
	backoff := r.opts.RetryBackoff
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.WriteTimeout)
		err := r.w.WriteSpans(ctx, batch)
		cancel()
		if err == nil {
			return attempt + 1, nil
		}
		r.writeErrors.Add(1)
		r.mu.Lock()
		closing := r.closed
		r.mu.Unlock()
		if attempt >= r.opts.MaxRetries || closing && attempt >= closingRetries {
			return attempt + 1, err
		}
		t := time.NewTimer(backoff)
		<-t.C
		backoff = min(2*backoff, 2*time.Second)
	}
}

// logQueueFull logs the queue_full drops since the last report. Only the
// writer goroutine calls it, so Record never does I/O.
func (r *Recorder) logQueueFull() {
	n := r.queueFull.Load()
	if prev := r.queueFullLogged.Swap(n); n > prev {
		r.opts.Logger.Warn("trace: spans dropped: queue full",
			"spans", n-prev, "queue_size", r.opts.QueueSize, "total_dropped", r.dropped.Load())
	}
}
