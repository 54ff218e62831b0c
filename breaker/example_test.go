package breaker_test

import (
	"errors"
	"fmt"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/failure"
)

func ExampleBreaker() {
	b, err := breaker.New("openai-gpt-4o", breaker.Settings{
		ConsecutiveFailures: 2,
		OnStateChange: func(name string, from, to breaker.State) {
			fmt.Printf("%s: %v -> %v\n", name, from, to)
		},
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		ticket, err := b.Allow()
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Println("refused:", err)
			continue
		}
		ticket.Done(failure.New(failure.Overloaded, "529"))
	}
	// Output:
	// openai-gpt-4o: closed -> open
	// refused: degraded: circuit_open from openai-gpt-4o: breaker "openai-gpt-4o" is open
}
