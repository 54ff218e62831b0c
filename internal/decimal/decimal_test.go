package decimal

import (
	"fmt"
	"testing"
)

func TestPlain(t *testing.T) {
	for _, s := range []string{"0", "90", "1.50", "0.0000375", ".5", "5.", "-2", "+2", "007"} {
		if !Plain(s) {
			t.Errorf("Plain(%q) = false, want true", s)
		}
	}
	// Go's and YAML's other spellings of numbers (adversary finding:
	// X-Belay-Max-Cost-Usd took 0x10, 0b1 and 1_000; X-Belay-Deadline
	// took 1_000).
	for _, s := range []string{"", "+", "-", ".", "1e3", "1E3", "1.5e-3", "1_000", "0x10", "0b1", "0o7", "0x1p4",
		"Inf", "-Inf", "NaN", "1.2.3", "1/2", " 1", "1 ", "--1", "+-1", "$1", "1,000", "١"} {
		if Plain(s) {
			t.Errorf("Plain(%q) = true, want false", s)
		}
	}
}

func ExamplePlain() {
	fmt.Println(Plain("1.50"), Plain("1e3"), Plain("1_000"))
	// Output: true false false
}
