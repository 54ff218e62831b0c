package retry_test

import (
	"fmt"
	"time"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
)

func ExamplePolicy() {
	p := retry.Policy{MaxAttempts: 4, Base: 500 * time.Millisecond, Cap: 2 * time.Second, MaxRetryAfter: 20 * time.Second}
	if err := p.Validate(); err != nil {
		panic(err)
	}
	// Backoff before jitter doubles from Base up to Cap; with full jitter
	// the wait is u times that, for a draw u in [0, 1).
	for n := 1; n <= 4; n++ {
		fmt.Printf("retry %d: up to %v, with u=0.5 %v\n", n, retry.Policy{Base: p.Base, Cap: p.Cap, Jitter: retry.NoJitter}.Backoff(n, 0), p.Backoff(n, 0.5))
	}

	overloaded := failure.New(failure.Overloaded, "529 overloaded_error")
	fmt.Println(p.Decide(1, overloaded, 0.5, retry.NoDeadline).Action)
	fmt.Println(p.Decide(4, overloaded, 0.5, retry.NoDeadline).Action) // attempts used up

	limited := failure.New(failure.RateLimited, "429")
	limited.RetryAfter, limited.HasRetryAfter = time.Minute, true
	d := p.Decide(1, limited, 0.5, retry.NoDeadline)
	fmt.Println(d.Action, d.Failure.Reason)

	d = p.Decide(1, overloaded, 0.5, 100*time.Millisecond) // 250ms wait, 100ms left
	fmt.Println(d.Action, d.Failure.Reason)
	// Output:
	// retry 1: up to 500ms, with u=0.5 250ms
	// retry 2: up to 1s, with u=0.5 500ms
	// retry 3: up to 2s, with u=0.5 1s
	// retry 4: up to 2s, with u=0.5 1s
	// retry
	// next
	// next retry_after_too_long
	// stop deadline_exceeded
}
