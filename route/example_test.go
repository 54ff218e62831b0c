package route_test

import (
	"context"
	"fmt"
	"time"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/route"
)

func ExampleRouter() {
	r, err := route.New(route.Config{
		Deployments: []route.Deployment{
			{Name: "openai", Provider: "openai", Model: "gpt-4o", Dialect: "openai"},
			{Name: "azure", Provider: "azure", Model: "gpt-4o", Dialect: "openai"},
		},
		Aliases: []route.Alias{{Name: "smart", Deployments: []string{"openai", "azure"}}},
		Retry:   retry.Policy{MaxAttempts: 2, Base: 500 * time.Millisecond, Cap: 8 * time.Second},
		// Full jitter draws the wait from [0, backoff); a draw of 0 makes
		// the example wait nothing.
		Rand: func() float64 { return 0 },
	})
	if err != nil {
		panic(err)
	}
	// openai is rate limited twice; its retries are used up and azure serves.
	calls := 0
	res, err := r.Do(context.Background(), "smart", func(ctx context.Context, d *route.Deployment) error {
		calls++
		if d.Name == "openai" {
			return failure.New(failure.RateLimited, "429 rate_limit_exceeded")
		}
		return nil
	})
	fmt.Println("err:", err)
	fmt.Println("served by:", res.Deployment.Name, "degraded:", res.Degraded)
	for _, a := range res.Attempts() {
		fmt.Println(a.Deployment, a.Failure)
	}
	// Output:
	// err: <nil>
	// served by: azure degraded: true
	// openai transient: rate_limited from openai: 429 rate_limit_exceeded
	// openai transient: rate_limited from openai: 429 rate_limit_exceeded
	// azure <nil>
}
