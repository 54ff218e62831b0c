package retry

import (
	"fmt"
	"sync/atomic"
)

// Defaults of BudgetSettings, those of Envoy's retry_budget
// (envoy.config.cluster.v3.CircuitBreakers.Thresholds.RetryBudget:
// budget_percent 20%, min_retry_concurrency 3).
const (
	DefaultBudgetRatio    = 0.2
	DefaultMinConcurrency = 3
)

// BudgetSettings configure a Budget. The zero value of each field means its
// default.
type BudgetSettings struct {
	// Ratio is the largest share of requests in flight that may be retries
	// in flight, in (0, 1]. Zero means DefaultBudgetRatio (0.2). A ratio of
	// 1 never limits (each retry belongs to a request in flight).
	Ratio float64

	// MinConcurrency is the number of retries in flight always allowed,
	// whatever the ratio gives, so that a lightly loaded dependency can
	// still be retried. Zero means DefaultMinConcurrency (3). Negative is
	// invalid.
	MinConcurrency int
}

// Validate reports the first invalid field.
func (s BudgetSettings) Validate() error {
	switch {
	case !(s.Ratio >= 0 && s.Ratio <= 1): // also rejects NaN
		return fmt.Errorf("retry: budget_ratio (%v) is outside [0, 1]; want a share such as 0.2 (0 means default %v)", s.Ratio, DefaultBudgetRatio)
	case s.MinConcurrency < 0:
		return fmt.Errorf("retry: budget_min_concurrency (%d) is negative; want 0 (default %d) or more", s.MinConcurrency, DefaultMinConcurrency)
	}
	return nil
}

// Budget limits retries in flight to max(MinConcurrency, Ratio × requests in
// flight), as Envoy's retry budget does, so that during an outage retries
// add at most a fixed share of load instead of multiplying it.
//
// A request is in flight from Begin to End; a retry from a successful
// TryRetry to DoneRetry. Callers take the retry after any backoff wait,
// just before the retried attempt, and release it when the attempt ends
// (package route does), so that only retry attempts in flight count, as in
// Envoy. A Budget is
// safe for concurrent use; its methods do not allocate.
type Budget struct {
	ratio    float64
	min      int64
	requests atomic.Int64
	retries  atomic.Int64
}

// NewBudget returns a Budget, or an error naming the invalid field.
func NewBudget(s BudgetSettings) (*Budget, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	b := &Budget{ratio: s.Ratio, min: int64(s.MinConcurrency)}
	if b.ratio == 0 {
		b.ratio = DefaultBudgetRatio
	}
	if b.min == 0 {
		b.min = DefaultMinConcurrency
	}
	return b, nil
}

// Begin records a request in flight. Every Begin needs one End.
func (b *Budget) Begin() { b.requests.Add(1) }

// End records the end of a request begun with Begin.
func (b *Budget) End() { b.requests.Add(-1) }

// TryRetry reserves a retry if the budget allows one now and reports whether
// it did. Every successful TryRetry needs one DoneRetry.
func (b *Budget) TryRetry() bool {
	for {
		n := b.retries.Load()
		if n >= b.limit() {
			return false
		}
		if b.retries.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Room reports whether TryRetry would reserve a retry now. Under
// concurrent use the answer may be out of date by the time TryRetry is
// called: it is for not beginning a wait that could not be followed by a
// retry, not for reserving one.
func (b *Budget) Room() bool { return b.retries.Load() < b.limit() }

// DoneRetry releases a retry reserved by TryRetry.
func (b *Budget) DoneRetry() { b.retries.Add(-1) }

// InFlight returns the requests and retries in flight now.
func (b *Budget) InFlight() (requests, retries int) {
	return int(b.requests.Load()), int(b.retries.Load())
}

func (b *Budget) limit() int64 {
	return max(b.min, int64(b.ratio*float64(b.requests.Load())))
}
