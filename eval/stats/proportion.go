// Package stats holds the statistics behind `belay eval` and `belay gate`:
// intervals and tests for pass rates, the pass^k estimate, Holm's correction,
// latency quantiles, a seeded bootstrap for ratios, and the number of runs
// needed to detect a drop.
//
// Every function is pure and safe for concurrent use. Randomness is passed in
// as a *rand.Rand (math/rand/v2), so results are reproducible from a seed.
// Normal-distribution quantiles and tails come from gonum
// (gonum.org/v1/gonum/stat/distuv); quantiles of samples from gonum/stat.
//
// Functions panic on arguments outside their mathematical domain (for
// example more successes than trials), as gonum does: such arguments are
// programming errors, and callers that take counts from files or flags
// validate them first. The exception is RunsToDetect, whose arguments usually
// come straight from a command-line flag; it returns an error.
package stats

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// ErrInvalid is returned (wrapped) for arguments outside a function's domain.
var ErrInvalid = errors.New("stats: invalid argument")

// NormalQuantile returns z such that P(Z ≤ z) = p for a standard normal Z;
// for example NormalQuantile(0.975) ≈ 1.959964. It panics unless 0 < p < 1.
func NormalQuantile(p float64) float64 {
	if !(p > 0 && p < 1) {
		panic(fmt.Sprintf("stats: NormalQuantile(%v): p must be in (0, 1)", p))
	}
	return distuv.UnitNormal.Quantile(p)
}

// NormalUpperTail returns P(Z ≥ z) for a standard normal Z: the one-sided
// p-value of a z statistic whose large values are evidence. It is accurate
// far into the tail: it is computed as Φ(−z), which gonum evaluates with
// erfc, rather than gonum's Survival, which is 1−erf and rounds to 0 past
// z ≈ 8.3.
func NormalUpperTail(z float64) float64 {
	return distuv.UnitNormal.CDF(-z)
}

// Wilson returns the Wilson score interval for a binomial proportion from
// successes out of trials, at the two-sided confidence level confidence (0.95
// for a 95% interval). Both bounds lie in [0, 1]; with zero successes the low
// bound is exactly 0, with all successes the high bound is exactly 1. With
// zero trials nothing is known and it returns (0, 1).
//
// Source: E. B. Wilson, "Probable inference, the law of succession, and
// statistical inference", JASA 22 (1927); the form used is
// (p̂ + z²/2n ± z·sqrt(p̂q̂/n + z²/4n²)) / (1 + z²/n).
//
// It panics if trials < 0, successes is outside [0, trials], or confidence
// is outside (0, 1).
func Wilson(successes, trials int, confidence float64) (low, high float64) {
	if trials < 0 || successes < 0 || successes > trials {
		panic(fmt.Sprintf("stats: Wilson(%d, %d): need 0 ≤ successes ≤ trials", successes, trials))
	}
	if !(confidence > 0 && confidence < 1) {
		panic(fmt.Sprintf("stats: Wilson confidence %v: must be in (0, 1)", confidence))
	}
	if trials == 0 {
		return 0, 1
	}
	z := NormalQuantile(1 - (1-confidence)/2)
	n := float64(trials)
	p := float64(successes) / n
	z2 := z * z
	den := 1 + z2/n
	center := (p + z2/(2*n)) / den
	half := z / den * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	low, high = max(0, center-half), min(1, center+half)
	if successes == 0 {
		low = 0
	}
	if successes == trials {
		high = 1
	}
	return low, high
}

// TwoProportionZ returns the pooled two-proportion z statistic comparing a
// baseline (baseSucc of baseN) with a candidate (candSucc of candN):
//
//	z = (p̂_base − p̂_cand) / sqrt(p̂(1−p̂)(1/baseN + 1/candN)),  p̂ = (baseSucc+candSucc)/(baseN+candN)
//
// z is positive when the candidate is worse; NormalUpperTail(z) is the
// one-sided p-value for "the candidate's rate is lower". It returns 0 when
// the pooled rate is 0 or 1 (both groups all failures or all successes: no
// evidence either way) or when either group has no trials.
//
// The normal approximation needs enough successes and failures in each
// group; FisherOneSided is the exact test for small cells.
// It panics if a count is negative or successes exceed trials.
func TwoProportionZ(baseSucc, baseN, candSucc, candN int) float64 {
	checkCounts("TwoProportionZ", baseSucc, baseN, candSucc, candN)
	if baseN == 0 || candN == 0 {
		return 0
	}
	nb, nc := float64(baseN), float64(candN)
	pooled := float64(baseSucc+candSucc) / (nb + nc)
	if pooled <= 0 || pooled >= 1 {
		return 0
	}
	se := math.Sqrt(pooled * (1 - pooled) * (1/nb + 1/nc))
	return (float64(baseSucc)/nb - float64(candSucc)/nc) / se
}

// FisherOneSided returns the one-sided p-value of Fisher's exact test that
// the candidate's success rate is lower than the baseline's: given the
// margins of the 2×2 table (group sizes and total successes), the
// probability that the candidate has candSucc successes or fewer. Under the
// null hypothesis the candidate's successes follow the hypergeometric
// distribution with population baseN+candN, baseSucc+candSucc marked items
// and candN draws; the tail is summed exactly in log space (log-binomial
// coefficients via math.Lgamma), so it stays accurate for groups of 100,000
// runs.
//
// Source: R. A. Fisher, Statistical Methods for Research Workers (1925);
// matches R's fisher.test(matrix(c(baseSucc, baseFail, candSucc, candFail), 2),
// alternative = "greater").
//
// It returns 1 when either group has no trials. It panics if a count is
// negative or successes exceed trials.
func FisherOneSided(baseSucc, baseN, candSucc, candN int) float64 {
	checkCounts("FisherOneSided", baseSucc, baseN, candSucc, candN)
	if baseN == 0 || candN == 0 {
		return 1
	}
	total := baseN + candN
	marked := baseSucc + candSucc
	lo := max(0, marked-baseN) // fewest successes the candidate can have
	logDen := logChoose(total, candN)
	logTerm := func(x int) float64 {
		return logChoose(marked, x) + logChoose(total-marked, candN-x) - logDen
	}
	// Log-sum-exp over the lower tail, scaled by its largest term.
	peak := math.Inf(-1)
	for x := lo; x <= candSucc; x++ {
		peak = max(peak, logTerm(x))
	}
	var sum float64
	for x := lo; x <= candSucc; x++ {
		sum += math.Exp(logTerm(x) - peak)
	}
	return min(1, math.Exp(peak+math.Log(sum)))
}

// logChoose returns log C(n, k) for 0 ≤ k ≤ n.
func logChoose(n, k int) float64 {
	if k == 0 || k == n {
		return 0
	}
	a, _ := math.Lgamma(float64(n) + 1)
	b, _ := math.Lgamma(float64(k) + 1)
	c, _ := math.Lgamma(float64(n-k) + 1)
	return a - b - c
}

func checkCounts(fn string, baseSucc, baseN, candSucc, candN int) {
	if baseN < 0 || candN < 0 || baseSucc < 0 || candSucc < 0 || baseSucc > baseN || candSucc > candN {
		panic(fmt.Sprintf("stats: %s(%d, %d, %d, %d): need 0 ≤ successes ≤ trials",
			fn, baseSucc, baseN, candSucc, candN))
	}
}

// RunsToDetect returns how many runs each of baseline and candidate need for
// a one-sided test at level alpha to detect, with the given power, a drop of
// drop in success rate from baseRate (to baseRate − drop). It uses the
// standard sample-size formula for two proportions (Fleiss, Statistical
// Methods for Rates and Proportions, §4.2, without continuity correction):
//
//	n = ( z_{1−α}·sqrt(2·p̄·q̄) + z_{power}·sqrt(p1·q1 + p2·q2) )² / drop²,  p̄ = (p1+p2)/2
//
// rounded up. For example baseRate 0.9, drop 0.1, alpha 0.05, power 0.8
// gives 157 runs per group.
//
// It returns an error wrapping ErrInvalid unless 0 < drop ≤ baseRate ≤ 1,
// 0 < alpha < 1 and 0 < power < 1.
func RunsToDetect(baseRate, drop, alpha, power float64) (int, error) {
	switch {
	case !(baseRate >= 0 && baseRate <= 1):
		return 0, fmt.Errorf("%w: baseline rate %v: must be in [0, 1]", ErrInvalid, baseRate)
	case !(drop > 0 && drop <= baseRate):
		return 0, fmt.Errorf("%w: drop %v: must be in (0, baseline rate %v]", ErrInvalid, drop, baseRate)
	case !(alpha > 0 && alpha < 1):
		return 0, fmt.Errorf("%w: alpha %v: must be in (0, 1)", ErrInvalid, alpha)
	case !(power > 0 && power < 1):
		return 0, fmt.Errorf("%w: power %v: must be in (0, 1)", ErrInvalid, power)
	}
	p1, p2 := baseRate, baseRate-drop
	pbar := (p1 + p2) / 2
	root := NormalQuantile(1-alpha)*math.Sqrt(2*pbar*(1-pbar)) +
		NormalQuantile(power)*math.Sqrt(p1*(1-p1)+p2*(1-p2))
	n := root * root / (drop * drop)
	// Guard against 157.0000000001 from rounding becoming 158.
	return max(1, int(math.Ceil(n-1e-9))), nil
}

// Stratum is one 2×2 table of a stratified comparison: a baseline's and a
// candidate's successes and trials in one stratum (one scenario).
type Stratum struct {
	BaseSucc, BaseN, CandSucc, CandN int
}

// CMHZ returns the signed Cochran–Mantel–Haenszel statistic over strata,
// positive when the candidate is worse, like TwoProportionZ; NormalUpperTail
// of it is the one-sided p-value for "the candidate's rate is lower within
// the strata". Each stratum compares only with itself, so a change in how
// many trials each stratum has (more runs of a hard scenario) moves
// nothing, where pooling the counts would (Simpson's paradox). With the
// baseline's successes a_k, stratum size N_k = n1_k + n2_k and successes
// M_k, E[a_k] = n1_k·M_k/N_k and Var[a_k] = n1_k·n2_k·M_k·(N_k−M_k) /
// (N_k²·(N_k−1)) (the hypergeometric variance: N. Mantel and W. Haenszel,
// J. Natl. Cancer Inst. 22, 1959); with D = Σ(a_k − E[a_k]),
// z = sign(D)·max(|D| − ½, 0) / √ΣVar[a_k], Mantel and Haenszel's
// continuity correction: without it, strata of one or two runs read as a
// drop an exact test would not see (four strata 1/1 → 0/1: p 0.023
// uncorrected, 0.067 corrected, 0.0625 exact; an adversarial review). A stratum with no trials on a side, or
// all successes or all failures, adds nothing; tested is false, and z 0,
// when no stratum adds variance. It panics on a negative count or
// successes above trials.
func CMHZ(strata []Stratum) (z float64, tested bool) {
	var diff, variance float64
	for _, s := range strata {
		checkCounts("CMHZ", s.BaseSucc, s.BaseN, s.CandSucc, s.CandN)
		n1, n2 := float64(s.BaseN), float64(s.CandN)
		n := n1 + n2
		m := float64(s.BaseSucc + s.CandSucc)
		if s.BaseN == 0 || s.CandN == 0 || m == 0 || m == n {
			continue
		}
		diff += float64(s.BaseSucc) - n1*m/n
		variance += n1 * n2 * m * (n - m) / (n * n * (n - 1))
	}
	if variance <= 0 {
		return 0, false
	}
	return math.Copysign(max(math.Abs(diff)-0.5, 0), diff) / math.Sqrt(variance), true
}
