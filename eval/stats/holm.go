package stats

import (
	"fmt"
	"math"
	"slices"
)

// Holm decides which of a family of hypotheses to reject with Holm's
// step-down procedure, which keeps the family-wise error rate (the chance of
// any false rejection) at most alpha under any dependence between the tests.
// Sorted ascending, the i-th smallest p-value (i from 0) is rejected while
// p ≤ alpha/(m−i); the first failure stops the procedure.
//
// Source: S. Holm, "A simple sequentially rejective multiple test
// procedure", Scandinavian Journal of Statistics 6 (1979).
//
// The result is in the order of pvalues. A NaN p-value is never rejected and
// still counts in the family size. It panics unless 0 < alpha < 1.
func Holm(pvalues []float64, alpha float64) []bool {
	if !(alpha > 0 && alpha < 1) {
		panic(fmt.Sprintf("stats: Holm alpha %v: must be in (0, 1)", alpha))
	}
	adj := HolmAdjust(pvalues)
	out := make([]bool, len(adj))
	for i, p := range adj {
		out[i] = p <= alpha // false for NaN
	}
	return out
}

// HolmAdjust returns Holm-adjusted p-values, in the order of pvalues: the
// i-th smallest becomes max over j ≤ i of min(1, (m−j)·p_(j)). A hypothesis
// is rejected by Holm at level alpha exactly when its adjusted p-value is
// ≤ alpha, so the adjusted value can be shown next to the raw one. NaN
// p-values stay NaN, sort last, and do not lower the others' adjustment.
func HolmAdjust(pvalues []float64) []float64 {
	m := len(pvalues)
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		pa, pb := pvalues[a], pvalues[b]
		switch {
		case math.IsNaN(pa) && math.IsNaN(pb):
			return 0
		case math.IsNaN(pa):
			return 1
		case math.IsNaN(pb):
			return -1
		}
		return cmpFloat(pa, pb)
	})
	out := make([]float64, m)
	running := 0.0
	for rank, idx := range order {
		p := pvalues[idx]
		if math.IsNaN(p) {
			out[idx] = math.NaN()
			continue
		}
		running = max(running, min(1, float64(m-rank)*p))
		out[idx] = running
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
