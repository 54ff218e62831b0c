package gate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// binomial draws the passes of n runs that each pass with probability p.
func binomial(rng *rand.Rand, n int, p float64) int {
	k := 0
	for range n {
		if rng.Float64() < p {
			k++
		}
	}
	return k
}

// suite draws one side of a simulated comparison: scenarios s0..s(k-1),
// scenario i with n runs at true pass rate rates[i].
func suite(rng *rand.Rand, n int, rates ...float64) []Group {
	gs := make([]Group, len(rates))
	for i, rate := range rates {
		gs[i] = Group{Name: fmt.Sprintf("s%d", i), Runs: n, Passes: binomial(rng, n, rate)}
	}
	return gs
}

func repeat(k int, rate float64) []float64 {
	out := make([]float64, k)
	for i := range out {
		out[i] = rate
	}
	return out
}

// simulate runs trials comparisons of base against cand (true rates per
// scenario, n runs a scenario a side) with the pass-rate checks only, and
// returns the fractions of trials in which the whole gate, the overall row,
// and scenario s0 were flagged.
func simulate(t *testing.T, seed uint64, trials, n int, base, cand []float64) (gate, overall, first float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(len(base))))
	var g, o, f int
	for range trials {
		res, err := Compare(suite(rng, n, base...), suite(rng, n, cand...), Config{BootstrapIters: -1})
		if err != nil {
			t.Fatal(err)
		}
		g += b2i(res.Regressed())
		o += b2i(res.Overall.Regressed())
		f += b2i(res.Scenarios[0].Regressed())
	}
	return frac(g, trials), frac(o, trials), frac(f, trials)
}

// TestFalseAlarmRateAA compares suites with themselves (same true pass
// rates on both sides), 1,000 seeded trials per suite. At nominal α = 0.05
// the whole gate — overall row or any scenario flagged — must raise a false
// alarm in at most 6% of trials (issue 5). Seeded, so the measured rates are
// fixed numbers; the 6% bound leaves room for the noise of 1,000 trials
// (one standard error is 0.7 points at 5%).
func TestFalseAlarmRateAA(t *testing.T) {
	const trials = 1000
	cases := []struct {
		name  string
		runs  int
		rates []float64
	}{
		{"1x200 at 0.9", 200, []float64{0.9}},
		{"4x200 at 0.9", 200, repeat(4, 0.9)},
		{"4x200 at 0.5", 200, repeat(4, 0.5)},
		{"4x200 at 0.99", 200, repeat(4, 0.99)},
		{"5x50 mixed", 50, []float64{0.95, 0.9, 0.8, 0.6, 1}},
		{"10x30 at 0.9", 30, repeat(10, 0.9)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gate, overall, _ := simulate(t, 20240611+uint64(i), trials, c.runs, c.rates, c.rates)
			t.Logf("A/A false alarms: gate %.3f, overall %.3f", gate, overall)
			if gate > 0.06 {
				t.Errorf("gate false-alarm rate %.3f > 0.06", gate)
			}
		})
	}
}

// TestPowerTenPointDrop: a drop from 0.9 to 0.8 with 200 runs a side must
// fail the gate in at least 80% of 1,000 seeded trials (issue 5), both in a
// one-scenario suite and when the 200 runs a side are spread over four
// scenarios that all drop. For a one-scenario suite the z-test at α = 0.05
// predicts about 88%; with four scenarios the overall row is first tested
// at 0.8·α, about 85%.
//
// A drop confined to one scenario of four (200 runs each, the others
// unchanged) is a harder question: no test that keeps the gate's false
// alarms at α across four scenarios reaches 80% there (Bonferroni's α/4
// gives about 71%). It is measured and held to a floor so that a change in
// the weights cannot silently give it up.
func TestPowerTenPointDrop(t *testing.T) {
	const trials = 1000
	drop := repeat(4, 0.9)
	drop[0] = 0.8
	cases := []struct {
		name       string
		runs       int
		base, cand []float64
		min        float64
	}{
		{"one scenario, 200 runs", 200, []float64{0.9}, []float64{0.8}, 0.80},
		{"four scenarios of 50 runs, all drop", 50, repeat(4, 0.9), repeat(4, 0.8), 0.80},
		{"one of four scenarios of 200 runs drops", 200, repeat(4, 0.9), drop, 0.55},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gate, overall, first := simulate(t, 7+uint64(i), trials, c.runs, c.base, c.cand)
			t.Logf("power: gate %.3f, overall row %.3f, scenario s0 %.3f", gate, overall, first)
			if gate < c.min {
				t.Errorf("gate power %.3f < %.2f", gate, c.min)
			}
			if len(c.base) == 1 && overall != first {
				t.Errorf("one scenario: overall flagged in %.3f of trials, the scenario in %.3f; want the same", overall, first)
			}
		})
	}
}

func frac(k, n int) float64 { return float64(k) / float64(n) }

// runs draws n runs passing with probability rate, with exponential cost
// (mean costUSD) and log-normal latency (median latencyMS, σ = 0.5).
func runs(rng *rand.Rand, n int, rate, costUSD, latencyMS float64) Group {
	g := Group{Name: "s", Runs: n, Samples: make([]Sample, n)}
	for i := range g.Samples {
		s := Sample{
			Passed:    rng.Float64() < rate,
			CostUSD:   costUSD * rng.ExpFloat64(),
			LatencyMS: latencyMS * math.Exp(0.5*rng.NormFloat64()),
		}
		if s.Passed {
			g.Passes++
		}
		g.Samples[i] = s
	}
	return g
}

// TestRatioChecksAAAndShift: with the same cost and latency distributions
// the cost and p95 checks (tolerance +10%, one-sided α = 0.05) fire in at
// most α of trials; with cost ×1.5 and latency ×1.5 they usually fire. 150
// seeded trials of 100 runs a side, 100 bootstrap rounds (few, to keep the
// test fast), one row each (Compare would repeat the work for the overall
// row).
func TestRatioChecksAAAndShift(t *testing.T) {
	const trials, n = 150, 100
	cfg := Config{BootstrapIters: 100, Seed: 5}.WithDefaults()
	rng := rand.New(rand.NewPCG(99, 100))
	check := func(b, c Group) Row {
		var r Row
		r.checkRatios(b, c, cfg, "s", cfg.Alpha)
		return r
	}
	var aaCost, aaLat, shiftCost, shiftLat int
	for range trials {
		base := runs(rng, n, 0.9, 0.02, 800)
		aa := check(base, runs(rng, n, 0.9, 0.02, 800))
		aaCost += b2i(aa.Cost.Regressed)
		aaLat += b2i(aa.Latency.Regressed)
		shift := check(base, runs(rng, n, 0.9, 0.03, 1200))
		shiftCost += b2i(shift.Cost.Regressed)
		shiftLat += b2i(shift.Latency.Regressed)
	}
	t.Logf("A/A flags: cost %.3f, p95 %.3f; ×1.5 caught: cost %.3f, p95 %.3f",
		frac(aaCost, trials), frac(aaLat, trials), frac(shiftCost, trials), frac(shiftLat, trials))
	if frac(aaCost, trials) > cfg.Alpha || frac(aaLat, trials) > cfg.Alpha {
		t.Errorf("A/A false alarms: cost %.3f, p95 %.3f; want ≤ α = %v", frac(aaCost, trials), frac(aaLat, trials), cfg.Alpha)
	}
	if frac(shiftCost, trials) < 0.5 || frac(shiftLat, trials) < 0.5 {
		t.Errorf("×1.5 shift caught: cost %.3f, p95 %.3f; want ≥ 0.5", frac(shiftCost, trials), frac(shiftLat, trials))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCostAAWholeGate: identical builds of a suite shaped like the
// README's example (7 scenarios of 20 runs, pass rate 0.9) fail the gate
// on cost per success in at most α of seeded trials, the checks sharing α
// over the rows (adversarial review: at α per row, 14% of trials, for
// exponential and for log-normal costs alike).
func TestCostAAWholeGate(t *testing.T) {
	for _, lognormal := range []bool{false, true} {
		const trials = 200
		rng := rand.New(rand.NewPCG(11, 12))
		side := func() []Group {
			gs := make([]Group, 7)
			for i := range gs {
				g := runs(rng, 20, 0.9, 0.0002, 500)
				g.Name = fmt.Sprintf("s%d", i)
				if lognormal {
					for j := range g.Samples {
						g.Samples[j].CostUSD = 0.0002 * math.Exp(0.5*rng.NormFloat64())
					}
				}
				gs[i] = g
			}
			return gs
		}
		flagged := 0
		for range trials {
			res, err := Compare(side(), side(), Config{BootstrapIters: 500, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			flagged += b2i(slices.ContainsFunc(append(res.Scenarios, res.Overall), func(r Row) bool { return r.Cost.Regressed }))
		}
		t.Logf("log-normal %v: A/A cost flags in %.3f of trials", lognormal, frac(flagged, trials))
		if frac(flagged, trials) > 0.05 {
			t.Errorf("log-normal %v: identical builds flagged on cost in %.3f of trials; want ≤ 0.05", lognormal, frac(flagged, trials))
		}
	}
}
