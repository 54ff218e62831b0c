package stats

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Quantile returns the q-quantile of xs (q = 0.5 for p50, 0.95 for p95,
// 0.99 for p99) by the nearest-rank method: the smallest sample x such that
// at least a fraction q of the samples are ≤ x, that is the ⌈q·n⌉-th
// smallest (type 1 of Hyndman and Fan, 1996; gonum stat.Quantile with
// stat.Empirical). The result is always one of the samples — a latency that
// really happened — and p95 of 20 samples is the 19th smallest.
//
// xs is not modified. It returns NaN when xs is empty and panics unless
// 0 ≤ q ≤ 1.
func Quantile(xs []float64, q float64) float64 {
	if !(q >= 0 && q <= 1) {
		panic(fmt.Sprintf("stats: Quantile q %v: must be in [0, 1]", q))
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return stat.Quantile(q, stat.Empirical, sorted, nil)
}

// BootstrapRatio returns a percentile-bootstrap interval, at two-sided
// confidence conf, for the ratio stat(cand)/stat(base) — for example the
// ratio of p95 latencies or of cost per successful run between a candidate
// and a baseline. Each of iters rounds resamples base and cand with
// replacement (each to its own size, independently), computes stat on both
// and records the ratio; the bounds are the (1−conf)/2 and 1−(1−conf)/2
// empirical quantiles of the recorded ratios (B. Efron and R. Tibshirani,
// An Introduction to the Bootstrap, 1993, ch. 13). A one-sided test at
// level α reads the low bound of the interval at conf = 1−2α.
//
// Samples are of any type, so a sample can carry several fields of one run
// (its cost and whether it passed). stat may reorder the slice it is given
// but must not keep it; it is called 2·iters times.
//
// Ratios: x/0 with x > 0 is +Inf; 0/0 and Inf/Inf count as 1 (the two sides
// are equal); a round in which stat returns NaN is dropped. The result is
// (NaN, NaN) when base or cand is empty or every round was dropped.
//
// All randomness comes from rng, so the same seed gives the same interval.
// It panics if iters < 1, conf is outside (0, 1) or rng is nil.
func BootstrapRatio[T any](base, cand []T, stat func([]T) float64, iters int, conf float64, rng *rand.Rand) (low, high float64) {
	if iters < 1 {
		panic(fmt.Sprintf("stats: BootstrapRatio iters %d: must be ≥ 1", iters))
	}
	if !(conf > 0 && conf < 1) {
		panic(fmt.Sprintf("stats: BootstrapRatio conf %v: must be in (0, 1)", conf))
	}
	if rng == nil {
		panic("stats: BootstrapRatio: nil rng")
	}
	if len(base) == 0 || len(cand) == 0 {
		return math.NaN(), math.NaN()
	}
	bufB := make([]T, len(base))
	bufC := make([]T, len(cand))
	ratios := make([]float64, 0, iters)
	for range iters {
		resample(bufB, base, rng)
		resample(bufC, cand, rng)
		r := Ratio(stat(bufC), stat(bufB))
		if !math.IsNaN(r) {
			ratios = append(ratios, r)
		}
	}
	if len(ratios) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(ratios)
	tail := (1 - conf) / 2
	return percentile(ratios, tail), percentile(ratios, 1-tail)
}

// BootstrapRatioStrata is BootstrapRatio for samples in strata (the runs
// of each scenario): each round resamples every stratum of each side
// within itself, to its own size, so that stat, which sees the strata,
// can weigh them alike on both sides (a stratified bootstrap: Efron and
// Tibshirani, 1993, ch. 8.3 "two-sample and more general problems").
// base and cand hold the same strata in the same order; a stratum empty
// on either side, or unequal numbers of strata, give (NaN, NaN), as do
// no strata at all. Conventions and panics are BootstrapRatio's.
func BootstrapRatioStrata[T any](base, cand [][]T, stat func([][]T) float64, iters int, conf float64, rng *rand.Rand) (low, high float64) {
	if iters < 1 {
		panic(fmt.Sprintf("stats: BootstrapRatioStrata iters %d: must be ≥ 1", iters))
	}
	if !(conf > 0 && conf < 1) {
		panic(fmt.Sprintf("stats: BootstrapRatioStrata conf %v: must be in (0, 1)", conf))
	}
	if rng == nil {
		panic("stats: BootstrapRatioStrata: nil rng")
	}
	if len(base) == 0 || len(base) != len(cand) {
		return math.NaN(), math.NaN()
	}
	for i := range base {
		if len(base[i]) == 0 || len(cand[i]) == 0 {
			return math.NaN(), math.NaN()
		}
	}
	bufB, bufC := strataBuf(base), strataBuf(cand)
	ratios := make([]float64, 0, iters)
	for range iters {
		for i := range base {
			resample(bufB[i], base[i], rng)
			resample(bufC[i], cand[i], rng)
		}
		r := Ratio(stat(bufC), stat(bufB))
		if !math.IsNaN(r) {
			ratios = append(ratios, r)
		}
	}
	if len(ratios) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(ratios)
	tail := (1 - conf) / 2
	return percentile(ratios, tail), percentile(ratios, 1-tail)
}

// strataBuf returns buffers the shape of strata.
func strataBuf[T any](strata [][]T) [][]T {
	out := make([][]T, len(strata))
	for i, s := range strata {
		out[i] = make([]T, len(s))
	}
	return out
}

// WeightedQuantile returns the nearest-rank q-quantile of xs where xs[i]
// has weight w[i] ≥ 0: the smallest x whose cumulative weight, in
// ascending order of x, reaches q of the total (gonum's weighted Empirical
// quantile). With equal weights it is Quantile. It reorders neither
// slice; NaN when xs is empty or has no weight.
func WeightedQuantile(xs, w []float64, q float64) float64 {
	idx := make([]int, len(xs))
	total := 0.0
	for i := range idx {
		idx[i] = i
		total += w[i]
	}
	if !(total > 0) {
		return math.NaN()
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	sx, sw := make([]float64, len(xs)), make([]float64, len(xs))
	for k, i := range idx {
		sx[k], sw[k] = xs[i], w[i]
	}
	return stat.Quantile(q, stat.Empirical, sx, sw)
}

// percentile is Quantile over already sorted data; gonum's Empirical
// quantile handles +Inf samples.
func percentile(sorted []float64, q float64) float64 {
	return stat.Quantile(q, stat.Empirical, sorted, nil)
}

func resample[T any](dst, src []T, rng *rand.Rand) {
	for i := range dst {
		dst[i] = src[rng.IntN(len(src))]
	}
}

// Ratio returns num/den with the conventions of BootstrapRatio: 0/0 and
// ±Inf/±Inf of the same sign are 1, x/0 for x > 0 is +Inf, and NaN in
// either is NaN.
func Ratio(num, den float64) float64 {
	switch {
	case math.IsNaN(num) || math.IsNaN(den):
		return math.NaN()
	case num == den:
		return 1 // 0/0, Inf/Inf and every ordinary equal pair
	}
	return num / den
}

// QuantileInPlace returns the same value as Quantile(xs, q) but reorders xs
// instead of copying and sorting it: it selects the ⌈q·n⌉-th smallest by
// quickselect, in expected O(n) time, for inner loops such as a bootstrap
// statistic. It returns NaN when xs is empty or holds a NaN, and panics
// unless 0 ≤ q ≤ 1.
func QuantileInPlace(xs []float64, q float64) float64 {
	if !(q >= 0 && q <= 1) {
		panic(fmt.Sprintf("stats: QuantileInPlace q %v: must be in [0, 1]", q))
	}
	if len(xs) == 0 || slices.ContainsFunc(xs, math.IsNaN) {
		return math.NaN()
	}
	// gonum's Empirical rule: the first index i with i+1 ≥ q·n.
	k := max(0, int(math.Ceil(q*float64(len(xs))))-1)
	return selectKth(xs, k)
}

// selectKth reorders xs so that xs[k] is the k-th smallest (from 0) and
// returns it (Hoare's selection with a median-of-three pivot).
func selectKth(xs []float64, k int) float64 {
	lo, hi := 0, len(xs)-1
	for hi-lo > 16 {
		mid := lo + (hi-lo)/2
		// Median of three into xs[mid].
		if xs[mid] < xs[lo] {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if xs[hi] < xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] < xs[mid] {
			xs[hi], xs[mid] = xs[mid], xs[hi]
		}
		pivot := xs[mid]
		i, j := lo, hi
		for i <= j {
			for xs[i] < pivot {
				i++
			}
			for xs[j] > pivot {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		// Now xs[lo..j] ≤ pivot ≤ xs[i..hi], and xs[j+1..i-1] == pivot.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	slices.Sort(xs[lo : hi+1])
	return xs[k]
}
