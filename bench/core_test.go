// Package bench compares belay's core (route + retry + breaker) with
// failsafe-go and sony/gobreaker v2 on the paths every call takes: a
// success, and a refusal by an open breaker. It is its own module so that
// the peers stay out of belay's dependencies.
package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/sony/gobreaker/v2"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/route"
)

// All three are configured alike: up to 4 attempts with exponential backoff
// from 500ms to 8s and jitter; a breaker over a 60s window that trips at a
// 50% failure rate once it holds 20 results (belay also trips on 5
// consecutive failures), open for 30s.

var errDown = errors.New("dependency down")

func belayRouter(b *testing.B) *route.Router {
	r, err := route.New(route.Config{
		Deployments: []route.Deployment{{Name: "primary", Provider: "openai", Model: "gpt-4o", Dialect: "openai"}},
		Aliases:     []route.Alias{{Name: "smart", Deployments: []string{"primary"}}},
		Retry:       retry.Policy{MaxAttempts: 4, Base: 500 * time.Millisecond, Cap: 8 * time.Second},
		Breaker:     breaker.Settings{ConsecutiveFailures: 5, FailureRate: 0.5, MinRequests: 20, Window: 60 * time.Second, OpenFor: 30 * time.Second},
	})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func failsafeExecutor() (failsafe.Executor[any], circuitbreaker.CircuitBreaker[any]) {
	rp := retrypolicy.NewBuilder[any]().
		WithMaxAttempts(4).
		WithBackoff(500*time.Millisecond, 8*time.Second).
		WithJitterFactor(0.5).
		AbortOnErrors(circuitbreaker.ErrOpen).
		Build()
	cb := circuitbreaker.NewBuilder[any]().
		WithFailureRateThreshold(0.5, 20, 60*time.Second).
		WithDelay(30 * time.Second).
		Build()
	return failsafe.With[any](rp, cb), cb
}

func gobreakerBreaker() *gobreaker.CircuitBreaker[any] {
	return gobreaker.NewCircuitBreaker[any](gobreaker.Settings{
		Name:     "primary",
		Interval: 60 * time.Second,
		Timeout:  30 * time.Second,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= 5 || c.Requests >= 20 && c.TotalFailures*2 >= c.Requests
		},
	})
}

func BenchmarkSuccessPath(b *testing.B) {
	b.Run("belay", func(b *testing.B) {
		r := belayRouter(b)
		ctx := context.Background()
		call := func(context.Context, *route.Deployment) error { return nil }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Do(ctx, "smart", call); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		ex, _ := failsafeExecutor()
		fn := func() error { return nil }
		b.ReportAllocs()
		for b.Loop() {
			if err := ex.Run(fn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := gobreakerBreaker()
		fn := func() (any, error) { return nil, nil }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cb.Execute(fn); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRejectionPath(b *testing.B) {
	b.Run("belay", func(b *testing.B) {
		r := belayRouter(b)
		for range 5 {
			tk, _ := r.Breaker("primary").Allow()
			tk.Done(failure.New(failure.ServerError, "500"))
		}
		ctx := context.Background()
		call := func(context.Context, *route.Deployment) error { return nil }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Do(ctx, "smart", call); !errors.Is(err, breaker.ErrOpen) {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		ex, cb := failsafeExecutor()
		cb.Open()
		fn := func() error { return nil }
		b.ReportAllocs()
		for b.Loop() {
			if err := ex.Run(fn); !errors.Is(err, circuitbreaker.ErrOpen) {
				b.Fatal(err)
			}
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := gobreakerBreaker()
		for range 5 {
			_, _ = cb.Execute(func() (any, error) { return nil, errDown })
		}
		fn := func() (any, error) { return nil, nil }
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cb.Execute(fn); !errors.Is(err, gobreaker.ErrOpenState) {
				b.Fatal(err)
			}
		}
	})
}
