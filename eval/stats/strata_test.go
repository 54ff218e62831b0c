package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// With equal weights WeightedQuantile is Quantile's nearest rank; with
// unequal ones the cumulative weight decides.
func TestWeightedQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		n := 1 + rng.IntN(300)
		xs, w := make([]float64, n), make([]float64, n)
		for i := range xs {
			xs[i], w[i] = float64(rng.IntN(50)), 0.25
		}
		for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
			if got, want := WeightedQuantile(xs, w, q), Quantile(xs, q); got != want {
				t.Fatalf("n %d q %v: weighted %v, unweighted %v", n, q, got, want)
			}
		}
	}
	xs, w := []float64{3, 1, 2}, []float64{0.25, 0.5, 0.25}
	for q, want := range map[float64]float64{0.5: 1, 0.6: 2, 0.75: 2, 0.8: 3} {
		if got := WeightedQuantile(xs, w, q); got != want {
			t.Errorf("q %v: %v, want %v", q, got, want)
		}
	}
	if got := WeightedQuantile(xs, []float64{0, 0, 0}, 0.5); !math.IsNaN(got) {
		t.Errorf("no weight: %v, want NaN", got)
	}
	if xs[0] != 3 || w[0] != 0.25 {
		t.Errorf("inputs reordered: %v %v", xs, w)
	}
}

// The stratified bootstrap resamples within strata: two sides with the
// same strata give an interval around 1 whatever the strata's sizes, and
// strata that do not line up give no interval.
func TestBootstrapRatioStrata(t *testing.T) {
	mean := func(strata [][]float64) float64 {
		var s float64
		for _, st := range strata {
			m := 0.0
			for _, x := range st {
				m += x
			}
			s += m / float64(len(st)) / float64(len(strata))
		}
		return s
	}
	cheap, dear := []float64{1, 1, 1, 1}, []float64{100, 100, 100}
	lo, hi := BootstrapRatioStrata([][]float64{cheap, dear}, [][]float64{cheap, dear}, mean, 200, 0.9, rand.New(rand.NewPCG(1, 2)))
	if lo != 1 || hi != 1 {
		t.Errorf("same constant strata: [%v, %v], want [1, 1]", lo, hi)
	}
	lo, _ = BootstrapRatioStrata([][]float64{cheap}, [][]float64{cheap, dear}, mean, 10, 0.9, rand.New(rand.NewPCG(1, 2)))
	if !math.IsNaN(lo) {
		t.Errorf("unequal strata: %v, want NaN", lo)
	}
	lo, _ = BootstrapRatioStrata([][]float64{cheap, {}}, [][]float64{cheap, dear}, mean, 10, 0.9, rand.New(rand.NewPCG(1, 2)))
	if !math.IsNaN(lo) {
		t.Errorf("an empty stratum: %v, want NaN", lo)
	}
}
