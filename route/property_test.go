package route

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
)

var propertyReasons = []failure.Reason{
	failure.RateLimited, failure.Overloaded, failure.ServerError, failure.Timeout,
	failure.ConnectionError, failure.QuotaExhausted, failure.ModelNotFound, failure.InvalidRequest,
}

// randomFailure returns nil (success) or a random failure, some with a
// server-requested delay or x-should-retry: false.
func randomFailure(rng *rand.Rand) error {
	if rng.IntN(5) == 0 {
		return nil
	}
	f := failure.New(propertyReasons[rng.IntN(len(propertyReasons))], "x")
	switch rng.IntN(4) {
	case 0:
		f.RetryAfter, f.HasRetryAfter = time.Duration(rng.Int64N(int64(30*time.Second))), true
	case 1:
		f.NoRetry = true
	}
	return f
}

// Property: whatever the policy, the failures and the deadline, Do never
// waits past the context's deadline (nor begins a wait the deadline would cut
// short), returns by it, and makes no more calls than its attempt budget.
func TestPropertyNeverWaitsPastDeadline(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 300 {
		base := time.Duration(1 + rng.Int64N(int64(2*time.Second)))
		cfg := Config{
			Deployments: deployments("a", "b", "c"),
			Aliases:     []Alias{{Name: "m", Deployments: []string{"a", "b", "c"}}},
			Retry: retry.Policy{
				MaxAttempts:   1 + rng.IntN(6),
				Base:          base,
				Cap:           base + time.Duration(rng.Int64N(int64(20*time.Second))),
				MaxRetryAfter: time.Duration(1 + rng.Int64N(int64(25*time.Second))),
				Jitter:        retry.Jitter(rng.IntN(3)),
			},
			Breaker:     breaker.Settings{ConsecutiveFailures: 1 + rng.IntN(5)},
			MaxAttempts: rng.IntN(12),
			Rand:        rng.Float64,
		}
		deadline := time.Duration(rng.Int64N(int64(40 * time.Second)))
		seed := rng.Uint64()
		synctest.Test(t, func(t *testing.T) {
			r, err := New(cfg)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			calls := rand.New(rand.NewPCG(seed, 1))
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			start := time.Now()
			n := 0
			res, err := r.Do(ctx, "m", func(ctx context.Context, d *Deployment) error {
				n++
				if time.Since(start) >= deadline {
					t.Errorf("case %d: call at %v, at or past the deadline %v", i, time.Since(start), deadline)
				}
				// The call itself takes up to 1s, or until ctx ends.
				tm := time.NewTimer(time.Duration(calls.Int64N(int64(time.Second))))
				defer tm.Stop()
				select {
				case <-tm.C:
					return randomFailure(calls)
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			elapsed := time.Since(start)
			var waited time.Duration
			for _, a := range res.Attempts() {
				waited += a.Wait
			}
			// Do returns as soon as the last call ends: it never begins a
			// wait that the deadline would cut short.
			if as := res.Attempts(); len(as) > 0 {
				last := as[len(as)-1]
				if end := last.Start.Add(last.Duration); !end.Equal(time.Now()) {
					t.Errorf("case %d: returned %v after the last call ended (%v)", i, time.Since(end), err)
				}
			} else if elapsed != 0 {
				t.Errorf("case %d: returned after %v with no call", i, elapsed)
			}
			if elapsed > deadline || waited > deadline {
				t.Errorf("case %d: returned after %v having waited %v, past the deadline %v (%v)", i, elapsed, waited, deadline, err)
			}
			limit := cfg.MaxAttempts
			if limit == 0 {
				limit = cfg.Retry.Attempts() + 2
			}
			if n > limit || n != len(res.Attempts()) {
				t.Errorf("case %d: %d calls, %d recorded, budget %d", i, n, len(res.Attempts()), limit)
			}
			if (err == nil) != (res.Deployment != nil) {
				t.Errorf("case %d: err %v with deployment %v", i, err, res.Deployment)
			}
			if fe, ok := err.(*failure.Error); ok && fe == nil {
				t.Errorf("case %d: a nil *failure.Error as a non-nil error", i)
			}
			// Every Begin and TryRetry of the retry budgets, revisits
			// included, was matched by its End and DoneRetry.
			for name, m := range r.deployments {
				if req, ret := m.budget.InFlight(); req != 0 || ret != 0 {
					t.Errorf("case %d: %s's retry budget holds %d requests and %d retries after Do returned", i, name, req, ret)
				}
			}
		})
	}
}

// Property: concurrent calls over shared breakers and tight retry budgets,
// with deployments disabled now and then, stay within their attempt
// budgets, return a real failure or a deployment, and leave every retry
// budget balanced.
func TestPropertyConcurrentCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 100 {
		base := time.Duration(1 + rng.Int64N(int64(time.Second)))
		var skipB atomic.Bool
		cfg := Config{
			Deployments: deployments("a", "b", "c"),
			Aliases:     []Alias{{Name: "m", Deployments: []string{"a", "b", "c"}}},
			Retry: retry.Policy{MaxAttempts: 1 + rng.IntN(4), Base: base, Cap: base * 4,
				MaxRetryAfter: time.Duration(1 + rng.Int64N(int64(5*time.Second))), Jitter: retry.Jitter(rng.IntN(3))},
			Breaker:     breaker.Settings{ConsecutiveFailures: 1 + rng.IntN(3), OpenFor: time.Duration(1 + rng.Int64N(int64(3*time.Second)))},
			RetryBudget: retry.BudgetSettings{MinConcurrency: 1, Ratio: 0.01},
			MaxAttempts: rng.IntN(14),
			Skip:        func(_ string, d *Deployment) bool { return d.Name == "b" && skipB.Load() },
		}
		// Config.Rand must be safe for concurrent use.
		jitter, jmu := rand.New(rand.NewPCG(rng.Uint64(), 2)), new(sync.Mutex)
		cfg.Rand = func() float64 {
			jmu.Lock()
			defer jmu.Unlock()
			return jitter.Float64()
		}
		limit := cfg.MaxAttempts
		if limit == 0 {
			limit = cfg.Retry.Attempts() + 2
		}
		seed := rng.Uint64()
		deadline := time.Duration(5+rng.Int64N(30)) * time.Second
		synctest.Test(t, func(t *testing.T) {
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			draws := rand.New(rand.NewPCG(seed, 1))
			var wg sync.WaitGroup
			for range 6 {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(t.Context(), deadline)
					defer cancel()
					var n atomic.Int64
					res, err := r.Do(ctx, "m", func(ctx context.Context, d *Deployment) error {
						n.Add(1)
						mu.Lock()
						took := time.Duration(draws.Int64N(int64(300 * time.Millisecond)))
						f := randomFailure(draws)
						skipB.Store(draws.IntN(3) == 0)
						mu.Unlock()
						tm := time.NewTimer(took)
						defer tm.Stop()
						select {
						case <-tm.C:
							return f
						case <-ctx.Done():
							return ctx.Err()
						}
					})
					if got := int(n.Load()); got > limit || got != len(res.Attempts()) {
						t.Errorf("case %d: %d calls, %d recorded, budget %d", i, got, len(res.Attempts()), limit)
					}
					if fe, ok := err.(*failure.Error); (ok && fe == nil) || (err == nil) != (res.Deployment != nil) {
						t.Errorf("case %d: Do = %v, %#v", i, res.Deployment, err)
					}
				})
			}
			wg.Wait()
			for name, m := range r.deployments {
				if req, ret := m.budget.InFlight(); req != 0 || ret != 0 {
					t.Errorf("case %d: %s's retry budget holds %d requests and %d retries after every call returned", i, name, req, ret)
				}
			}
		})
	}
}
