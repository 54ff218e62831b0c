package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestNormalHelpers(t *testing.T) {
	if z := NormalQuantile(0.975); !near(z, 1.959964, 1e-6) {
		t.Errorf("NormalQuantile(0.975) = %v", z)
	}
	if p := NormalUpperTail(1.6448536269514715); !near(p, 0.05, 1e-12) {
		t.Errorf("NormalUpperTail(z_.95) = %v", p)
	}
	if p := NormalUpperTail(10); !(p > 0 && p < 1e-22) {
		t.Errorf("NormalUpperTail(10) = %v, want tiny positive", p)
	}
}

func TestWilsonEdges(t *testing.T) {
	if lo, hi := Wilson(0, 0, 0.95); lo != 0 || hi != 1 {
		t.Errorf("Wilson(0, 0) = [%v, %v], want [0, 1]", lo, hi)
	}
	// Exact bounds at the ends, and the interval holds the point estimate.
	for n := 1; n <= 300; n += 7 {
		for s := 0; s <= n; s++ {
			lo, hi := Wilson(s, n, 0.95)
			p := float64(s) / float64(n)
			if !(lo >= 0 && lo <= p && p <= hi && hi <= 1) {
				t.Fatalf("Wilson(%d, %d) = [%v, %v] does not hold %v", s, n, lo, hi, p)
			}
			if (s == 0 && lo != 0) || (s == n && hi != 1) {
				t.Fatalf("Wilson(%d, %d) = [%v, %v]: end not exact", s, n, lo, hi)
			}
		}
	}
	// Higher confidence, wider interval.
	lo90, hi90 := Wilson(168, 200, 0.90)
	lo99, hi99 := Wilson(168, 200, 0.99)
	if !(lo99 < lo90 && hi99 > hi90) {
		t.Errorf("99%% [%v, %v] not wider than 90%% [%v, %v]", lo99, hi99, lo90, hi90)
	}
}

func TestTwoProportionZDegenerate(t *testing.T) {
	cases := []struct{ bs, bn, cs, cn int }{{0, 30, 0, 40}, {30, 30, 40, 40}, {0, 0, 3, 10}, {0, 0, 0, 0}}
	for _, c := range cases {
		if z := TwoProportionZ(c.bs, c.bn, c.cs, c.cn); z != 0 {
			t.Errorf("TwoProportionZ(%v) = %v, want 0", c, z)
		}
	}
	// Antisymmetric: swapping the groups flips the sign.
	if a, b := TwoProportionZ(177, 200, 148, 200), TwoProportionZ(148, 200, 177, 200); !near(a, -b, 1e-12) {
		t.Errorf("not antisymmetric: %v vs %v", a, b)
	}
}

func TestFisherOneSided(t *testing.T) {
	// Values worked by hand from the hypergeometric tail; each agrees with
	// R's fisher.test(..., alternative = "greater").
	cases := []struct {
		name           string
		bs, bn, cs, cn int
		want           float64
	}{
		// 3/3 vs 0/3: only the observed table is this extreme: 1/C(6,3).
		{"3of3 vs 0of3", 3, 3, 0, 3, 1.0 / 20},
		// 3/4 vs 1/4 (the tea-tasting table): (C(4,0)C(4,4)+C(4,1)C(4,3))/C(8,4) = 17/70.
		{"3of4 vs 1of4", 3, 4, 1, 4, 17.0 / 70},
		// 5/5 vs 2/5: X ≥ 2 forced, so P(X=2) = C(7,2)C(3,3)/C(10,5) = 21/252.
		{"5of5 vs 2of5", 5, 5, 2, 5, 21.0 / 252},
		// 10/10 vs 7/10: C(17,7)/C(20,10) = 19448/184756.
		{"10of10 vs 7of10", 10, 10, 7, 10, 19448.0 / 184756},
		// Candidate better: the whole distribution up to a high value.
		{"0of3 vs 3of3", 0, 3, 3, 3, 1},
		// All succeed on both sides: one possible table, p = 1.
		{"all pass", 20, 20, 20, 20, 1},
		{"no runs", 0, 0, 3, 5, 1},
		// Larger tables, exact values from rational arithmetic.
		{"177/200 vs 148/200", 177, 200, 148, 200, 0.0001472152642193706},
		{"99/100 vs 95/100", 99, 100, 95, 100, 0.10582392634786585},
		{"9000/10000 vs 8900/10000", 9000, 10000, 8900, 10000, 0.011189437400240079},
	}
	for _, c := range cases {
		got := FisherOneSided(c.bs, c.bn, c.cs, c.cn)
		if !near(got, c.want, 1e-9*max(1, c.want)) || math.Abs(got-c.want)/c.want > 1e-7 {
			t.Errorf("%s: FisherOneSided = %.12g, want %.12g", c.name, got, c.want)
		}
	}
}

func TestFisherTailIsMonotoneAndSumsToOne(t *testing.T) {
	// P(X ≤ x) rises with x and reaches 1 at the largest possible x.
	prev := 0.0
	const bn, cn, total = 15, 12, 14 // 14 successes in all
	for cs := max(0, total-bn); cs <= min(total, cn); cs++ {
		p := FisherOneSided(total-cs, bn, cs, cn)
		if p < prev {
			t.Fatalf("tail fell at cs=%d: %v < %v", cs, p, prev)
		}
		prev = p
	}
	if !near(prev, 1, 1e-12) {
		t.Errorf("full tail = %v, want 1", prev)
	}
}

func TestPassHatK(t *testing.T) {
	if _, ok := PassHatK(3, 4, 5); ok {
		t.Error("k > n: ok = true")
	}
	if v, ok := PassHatK(3, 4, 0); !ok || v != 1 {
		t.Errorf("k = 0: %v, %v", v, ok)
	}
	// Large n, compared with exact rational arithmetic.
	big := []struct {
		c, n, k int
		want    float64
	}{
		{99000, 100000, 50, 0.6049311850717303},
		{60000, 100000, 1000, 4.921171493688424e-224},
		{100000, 100000, 100000, 1},
		{99999, 100000, 100000, 0},
	}
	for _, b := range big {
		v, ok := PassHatK(b.c, b.n, b.k)
		if !ok || math.Abs(v-b.want) > 1e-9*b.want {
			t.Errorf("PassHatK(%d, %d, %d) = %.16g, want %.16g", b.c, b.n, b.k, v, b.want)
		}
	}
}

func TestHolm(t *testing.T) {
	p := []float64{0.01, 0.04, 0.03, 0.005}
	// Sorted: 0.005 ≤ .05/4 yes, 0.01 ≤ .05/3 yes, 0.03 ≤ .05/2 no: stop.
	want := []bool{true, false, false, true}
	got := Holm(p, 0.05)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Holm = %v, want %v", got, want)
		}
	}
	adj := HolmAdjust(p)
	wantAdj := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range wantAdj {
		if !near(adj[i], wantAdj[i], 1e-12) {
			t.Fatalf("HolmAdjust = %v, want %v", adj, wantAdj)
		}
	}
	// Step-down stops at the first failure even when a later p is below its
	// own threshold: 0.03 > .05/2, so 0.04 ≤ .05/1 is not rejected either.
	if got := Holm([]float64{0.03, 0.04}, 0.05); got[0] || got[1] {
		t.Errorf("Holm([.03 .04]) = %v, want none", got)
	}
	if got := Holm([]float64{0.02, 0.04}, 0.05); !got[0] || !got[1] {
		t.Errorf("Holm([.02 .04]) = %v, want both", got)
	}
	// Single test: Holm is the test itself. NaN is never rejected.
	if got := Holm([]float64{0.05, math.NaN()}, 0.1); !got[0] || got[1] {
		t.Errorf("Holm with NaN = %v", got)
	}
	if got := Holm(nil, 0.05); len(got) != 0 {
		t.Errorf("Holm(nil) = %v", got)
	}
}

func TestQuantileNearestRank(t *testing.T) {
	seq := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[n-1-i] = float64(i + 1) // reversed: Quantile must sort
		}
		return xs
	}
	cases := []struct {
		n       int
		q, want float64
	}{
		{4, 0.5, 2}, {5, 0.5, 3}, {20, 0.95, 19}, {100, 0.95, 95}, {100, 0.99, 99},
		{10, 0.99, 10}, {1, 0.5, 1}, {7, 0, 1}, {7, 1, 7},
	}
	for _, c := range cases {
		xs := seq(c.n)
		if got := Quantile(xs, c.q); got != c.want {
			t.Errorf("Quantile(1..%d, %v) = %v, want %v", c.n, c.q, got, c.want)
		}
		if xs[0] != float64(c.n) {
			t.Fatal("Quantile modified its input")
		}
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("Quantile(nil) is not NaN")
	}
}

func TestRunsToDetect(t *testing.T) {
	// By hand: p̄ = 0.85, z_.95 = 1.644854, z_.80 = 0.841621;
	// (1.644854·sqrt(0.255) + 0.841621·sqrt(0.09+0.16))² / 0.01
	// = (0.830610 + 0.420811)² / 0.01 = 156.605 → 157.
	cases := []struct {
		base, drop float64
		want       int
	}{{0.9, 0.1, 157}, {0.9, 0.05, 540}, {0.5, 0.1, 305}, {0.99, 0.05, 167}}
	for _, c := range cases {
		n, err := RunsToDetect(c.base, c.drop, 0.05, 0.8)
		if err != nil || n != c.want {
			t.Errorf("RunsToDetect(%v, %v) = %d, %v; want %d", c.base, c.drop, n, err, c.want)
		}
	}
	// More power or a smaller alpha needs more runs.
	n80, _ := RunsToDetect(0.9, 0.1, 0.05, 0.8)
	n90, _ := RunsToDetect(0.9, 0.1, 0.05, 0.9)
	n01, _ := RunsToDetect(0.9, 0.1, 0.01, 0.8)
	if !(n90 > n80 && n01 > n80) {
		t.Errorf("n80=%d n90=%d n(α=.01)=%d", n80, n90, n01)
	}
	for _, bad := range [][4]float64{{0.9, 0, 0.05, 0.8}, {0.9, 0.95, 0.05, 0.8}, {1.2, 0.1, 0.05, 0.8},
		{0.9, 0.1, 0, 0.8}, {0.9, 0.1, 0.05, 1}, {math.NaN(), 0.1, 0.05, 0.8}} {
		if _, err := RunsToDetect(bad[0], bad[1], bad[2], bad[3]); !errors.Is(err, ErrInvalid) {
			t.Errorf("RunsToDetect%v: err = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestBootstrapRatio(t *testing.T) {
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	base := make([]float64, 100)
	cand := make([]float64, 100)
	for i := range base {
		base[i] = 10 + float64(i%10)       // mean 14.5
		cand[i] = 2 * (10 + float64(i%10)) // exactly twice
	}
	run := func(seed uint64) (float64, float64) {
		return BootstrapRatio(base, cand, mean, 500, 0.9, rand.New(rand.NewPCG(seed, 1)))
	}
	lo1, hi1 := run(7)
	lo2, hi2 := run(7)
	if lo1 != lo2 || hi1 != hi2 {
		t.Fatalf("same seed, different interval: [%v, %v] vs [%v, %v]", lo1, hi1, lo2, hi2)
	}
	if !(lo1 < 2 && hi1 > 2 && lo1 > 1.7 && hi1 < 2.3) {
		t.Errorf("interval [%v, %v] should hold 2 and be narrow", lo1, hi1)
	}
	lo3, hi3 := run(8)
	if lo3 == lo1 && hi3 == hi1 {
		t.Errorf("different seeds gave the identical interval [%v, %v]", lo1, hi1)
	}
	// Identical constant samples: every ratio is 1, including 0/0.
	zeros := []float64{0, 0, 0}
	if lo, hi := BootstrapRatio(zeros, zeros, mean, 50, 0.9, rand.New(rand.NewPCG(1, 1))); lo != 1 || hi != 1 {
		t.Errorf("0/0 interval = [%v, %v], want [1, 1]", lo, hi)
	}
	if lo, hi := BootstrapRatio(nil, cand, mean, 50, 0.9, rand.New(rand.NewPCG(1, 1))); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("empty base: [%v, %v], want NaN", lo, hi)
	}
}

func TestRatio(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct{ n, d, want float64 }{{0, 0, 1}, {inf, inf, 1}, {3, 0, inf}, {3, 2, 1.5}}
	for _, c := range cases {
		if got := Ratio(c.n, c.d); got != c.want {
			t.Errorf("Ratio(%v, %v) = %v, want %v", c.n, c.d, got, c.want)
		}
	}
	if !math.IsNaN(Ratio(math.NaN(), 1)) {
		t.Error("Ratio(NaN, 1) is not NaN")
	}
}

func TestPanicsOnBadCounts(t *testing.T) {
	for name, f := range map[string]func(){
		"Wilson s>n":      func() { Wilson(5, 4, 0.95) },
		"Wilson conf":     func() { Wilson(1, 4, 1) },
		"Z negative":      func() { TwoProportionZ(-1, 4, 1, 4) },
		"Fisher s>n":      func() { FisherOneSided(1, 4, 5, 4) },
		"PassHatK c>n":    func() { PassHatK(5, 4, 1) },
		"Holm alpha":      func() { Holm([]float64{0.1}, 0) },
		"Quantile q":      func() { Quantile([]float64{1}, 1.5) },
		"Bootstrap iters": func() { BootstrapRatio([]float64{1}, []float64{1}, p95, 0, 0.9, rand.New(rand.NewPCG(1, 1))) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// p95 is a bootstrap statistic for the tests.
func p95(xs []float64) float64 { return Quantile(xs, 0.95) }

// QuantileInPlace must agree with the gonum-based Quantile on every input.
func TestQuantileInPlaceMatchesQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	qs := []float64{0, 0.01, 0.5, 0.95, 0.99, 1}
	for trial := range 1000 {
		n := 1 + rng.IntN(300)
		xs := make([]float64, n)
		for i := range xs {
			switch trial % 3 {
			case 0:
				xs[i] = rng.NormFloat64()
			case 1:
				xs[i] = float64(rng.IntN(5)) // many ties
			default:
				xs[i] = float64(i) // already sorted
			}
		}
		for _, q := range qs {
			want := Quantile(xs, q)
			if got := QuantileInPlace(slices.Clone(xs), q); got != want {
				t.Fatalf("n=%d q=%v: QuantileInPlace %v, Quantile %v", n, q, got, want)
			}
		}
	}
	if !math.IsNaN(QuantileInPlace([]float64{1, math.NaN()}, 0.5)) || !math.IsNaN(QuantileInPlace(nil, 0.5)) {
		t.Error("NaN or empty input: want NaN")
	}
}

// CMHZ: one stratum, by hand (E = 100·170/200 = 85, a = 90, Var =
// 100·100·170·30/(200²·199), z = (5 − ½)/√Var); strata with the same rates
// on both sides give 0 however their sizes change (the pooled z sees a
// drop there: Simpson's paradox); a drop within every stratum is seen;
// four one-run strata that all fail on the candidate are not a drop at
// α = 0.05 (exact p 0.0625); degenerate strata add nothing.
func TestCMHZ(t *testing.T) {
	if got, want := cmh([]Stratum{{90, 100, 80, 100}}), 4.5/math.Sqrt(100.0*100*170*30/(200*200*199)); math.Abs(got-want) > 1e-12 {
		t.Errorf("one stratum: %v, want %v", got, want)
	}
	if got, want := cmh([]Stratum{{80, 100, 90, 100}}), -4.5/math.Sqrt(100.0*100*170*30/(200*200*199)); math.Abs(got-want) > 1e-12 {
		t.Errorf("one stratum, candidate better: %v, want %v", got, want)
	}
	tiny := []Stratum{{1, 1, 0, 1}, {1, 1, 0, 1}, {1, 1, 0, 1}, {1, 1, 0, 1}}
	if z := cmh(tiny); math.Abs(z-1.5) > 1e-12 || NormalUpperTail(z) < 0.05 {
		t.Errorf("four one-run strata: z %v (p %v), want 1.5 (p 0.067)", z, NormalUpperTail(z))
	}
	// easy 95% and hard 50% on both sides; the candidate ran hard more.
	simpson := []Stratum{{95, 100, 19, 20}, {5, 10, 50, 100}}
	if got := cmh(simpson); math.Abs(got) > 1e-12 {
		t.Errorf("same rates in every stratum: z %v, want 0", got)
	}
	if pooled := TwoProportionZ(100, 110, 69, 120); pooled < 5 {
		t.Errorf("the pooled z of the same counts is %v; the test above means nothing unless it is large", pooled)
	}
	// A drop of 0.1 in both strata: 90→80 (n 200 each), 60→50.
	if got := cmh([]Stratum{{180, 200, 160, 200}, {120, 200, 100, 200}}); got < 2.5 || got > 3.5 {
		t.Errorf("a drop in both strata: z %v, want about 3", got)
	}
	if got, tested := CMHZ([]Stratum{{10, 10, 20, 20}, {0, 5, 0, 5}, {3, 10, 0, 0}}); got != 0 || tested {
		t.Errorf("degenerate strata: %v, %v; want 0, not tested", got, tested)
	}
	if got, tested := CMHZ(nil); got != 0 || tested {
		t.Errorf("no strata: %v, %v; want 0, not tested", got, tested)
	}
}

func cmh(s []Stratum) float64 {
	z, _ := CMHZ(s)
	return z
}
