package sim

import (
	"strings"
	"testing"
)

// With a run key, the first request of two runs that share the key draws
// the same numbers in two simulators of the same seed (two invocations of a
// suite); without one, it does not.
func TestSetRunKey(t *testing.T) {
	body := []byte(`{"model":"m"}`)
	draw := func(id string, key bool) uint64 {
		s := New(Config{Seed: 3})
		if key {
			s.SetRunKey(func(id string) string { _, rest, _ := strings.Cut(id, "-"); return rest })
		}
		return s.requestRand("d", id, body).Uint64()
	}
	if draw("ev1-x-0", false) == draw("ev2-x-0", false) {
		t.Error("different run ids drew the same number without a run key")
	}
	if draw("ev1-x-0", true) != draw("ev2-x-0", true) {
		t.Error("run ids with the same key drew different numbers")
	}
}
