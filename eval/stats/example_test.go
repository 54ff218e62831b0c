package stats_test

import (
	"fmt"

	"github.com/belay-run/belay/eval/stats"
)

func ExampleWilson() {
	low, high := stats.Wilson(168, 200, 0.95)
	fmt.Printf("168/200 passed: 84.0%% [%.1f%%, %.1f%%]\n", 100*low, 100*high)
	low, high = stats.Wilson(10, 10, 0.95)
	fmt.Printf("10/10 passed: [%.3f, %.3f]\n", low, high)
	// Output:
	// 168/200 passed: 84.0% [78.3%, 88.4%]
	// 10/10 passed: [0.722, 1.000]
}

func ExamplePassHatK() {
	for _, k := range []int{1, 2, 4, 8, 16} {
		v, ok := stats.PassHatK(6, 8, k)
		if !ok {
			fmt.Printf("pass^%d: needs at least %d runs\n", k, k)
			continue
		}
		fmt.Printf("pass^%d = %.6f\n", k, v)
	}
	// Output:
	// pass^1 = 0.750000
	// pass^2 = 0.535714
	// pass^4 = 0.214286
	// pass^8 = 0.000000
	// pass^16: needs at least 16 runs
}

func ExampleRunsToDetect() {
	n, err := stats.RunsToDetect(0.9, 0.1, 0.05, 0.8)
	fmt.Println(n, err)
	// Output: 157 <nil>
}
