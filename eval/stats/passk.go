package stats

import "fmt"

// PassHatK returns the unbiased estimate of pass^k — the chance that k
// independent runs of a scenario all succeed — from c successes in n runs:
//
//	pass^k = C(c, k) / C(n, k) = ∏_{i<k} (c−i)/(n−i)
//
// (the estimator of Chen et al., "Evaluating Large Language Models Trained on
// Code", 2021, applied to all-k-succeed; τ-bench's pass^k). It is 0 when
// c < k, 1 when k = 0 or c = n. The product form keeps every factor in
// [0, 1], so it neither overflows nor loses precision for n up to millions.
//
// ok is false, and the value 0, when k > n: n runs cannot estimate pass^k.
// It panics if k < 0, n < 0 or c is outside [0, n].
func PassHatK(c, n, k int) (value float64, ok bool) {
	if n < 0 || c < 0 || c > n || k < 0 {
		panic(fmt.Sprintf("stats: PassHatK(%d, %d, %d): need 0 ≤ c ≤ n and k ≥ 0", c, n, k))
	}
	if k > n {
		return 0, false
	}
	if c < k {
		return 0, true
	}
	v := 1.0
	for i := range k {
		v *= float64(c-i) / float64(n-i)
	}
	return v, true
}
