package breaker

import (
	"time"

	"github.com/belay-run/belay/failure"
)

// The methods below run with b.mu held. They return the state change to
// report, which the caller passes to notify after unlocking.

// since returns now as a duration since the breaker was made (monotonic
// when both readings have one), never negative.
func (b *Breaker) since(now time.Time) time.Duration { return max(now.Sub(b.epoch), 0) }

// tick moves an open breaker whose open duration has passed to half-open.
func (b *Breaker) tick(now time.Time) change {
	if b.state == Open && !now.Before(b.openUntil) {
		return b.setState(HalfOpen, now)
	}
	return change{}
}

// setState moves to state to, starting a new generation.
func (b *Breaker) setState(to State, now time.Time) change {
	from := b.state
	b.state = to
	b.gen++
	b.consecutive = 0
	b.probes, b.successes = 0, 0
	switch to {
	case Open:
		b.trips++
		b.openUntil = now.Add(b.s.openFor(b.trips))
	case Closed:
		b.trips = 0
		b.window.reset()
	}
	return change{true, from, to}
}

func (b *Breaker) record(t Ticket, k failure.Kind, now time.Time) {
	var ch change
	switch k {
	case failure.OK:
		ch = b.success(t, now)
	case failure.Transient, failure.Degraded:
		ch = b.failure(t, now)
	default: // Permanent, Fatal: the caller's doing, not the dependency's.
		b.mu.Lock()
		if t.gen == b.gen && b.state == HalfOpen {
			b.probes-- // free the slot for another probe
		}
		b.mu.Unlock()
		return
	}
	b.notify(ch)
}

func (b *Breaker) success(t Ticket, now time.Time) change {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		return change{}
	}
	switch b.state {
	case Closed:
		b.consecutive = 0
		b.window.add(b.since(now), false)
	case HalfOpen:
		b.successes++
		if b.successes >= b.s.HalfOpenProbes {
			return b.setState(Closed, now)
		}
	}
	return change{}
}

func (b *Breaker) failure(t Ticket, now time.Time) change {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		return change{}
	}
	switch b.state {
	case Closed:
		b.consecutive++
		b.window.add(b.since(now), true)
		if b.consecutive >= b.s.ConsecutiveFailures || b.rateTripped(now) {
			return b.setState(Open, now)
		}
	case HalfOpen:
		return b.setState(Open, now)
	}
	return change{}
}

func (b *Breaker) rateTripped(now time.Time) bool {
	req, fail := b.window.totals(b.since(now))
	return req >= b.s.MinRequests && float64(fail) >= b.s.FailureRate*float64(req)
}

// window counts results over a sliding window of fixed time buckets. Bucket
// i holds the results of the time slot number slot (elapsed / width) with
// slot % len(buckets) == i; a bucket whose slot is older than the window is
// stale and counts as empty.
type window struct {
	width   time.Duration
	buckets []bucket
}

type bucket struct {
	slot           int64
	total, failure int
}

func newWindow(length time.Duration, n int) window {
	w := window{width: length / time.Duration(n), buckets: make([]bucket, n)}
	w.reset()
	return w
}

func (w *window) reset() {
	for i := range w.buckets {
		w.buckets[i] = bucket{slot: -1}
	}
}

func (w *window) add(elapsed time.Duration, failed bool) {
	slot := int64(elapsed / w.width)
	bk := &w.buckets[slot%int64(len(w.buckets))]
	if bk.slot != slot {
		*bk = bucket{slot: slot}
	}
	bk.total++
	if failed {
		bk.failure++
	}
}

func (w *window) totals(elapsed time.Duration) (total, failures int) {
	slot := int64(elapsed / w.width)
	oldest := slot - int64(len(w.buckets)) + 1
	for _, bk := range w.buckets {
		if bk.slot >= oldest && bk.slot <= slot {
			total += bk.total
			failures += bk.failure
		}
	}
	return total, failures
}
