package sim

import (
	"strings"
	"testing"
)

// With a run key, two run ids that share it draw the same numbers.
func TestSetRunKey(t *testing.T) {
	s := New(Config{Seed: 3})
	body := []byte(`{"model":"m"}`)
	a := s.requestRand("d", "ev1-x-0", body).Uint64()
	b := s.requestRand("d", "ev2-x-0", body).Uint64()
	if a == b {
		t.Fatal("different run ids drew the same number without a run key")
	}
	s = New(Config{Seed: 3})
	s.SetRunKey(func(id string) string { _, rest, _ := strings.Cut(id, "-"); return rest })
	a = s.requestRand("d", "ev1-x-0", body).Uint64()
	b = s.requestRand("d", "ev2-x-0", body).Uint64()
	if a != b {
		t.Fatal("run ids with the same key drew different numbers")
	}
}
