package gate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/belay-run/belay/eval/stats"
)

// allPass returns a scenario of n runs that all passed, each costing
// costUSD and taking latencyMS.
func allPassAdv23(name string, n int, costUSD, latencyMS float64) Group {
	g := Group{Name: name, Runs: n, Passes: n}
	for range n {
		g.Samples = append(g.Samples, Sample{Passed: true, CostUSD: costUSD, LatencyMS: latencyMS})
	}
	return g
}

// The overall cost check pools the raw samples of all scenarios, so a
// change in how many runs each scenario had (an edited runs:, belay eval
// --runs on one side only) reads as a change in cost per success: the
// same Simpson's paradox the package avoids for the pass rate by
// stratifying the overall row (Row.stratify, TestOverallStratifiedByScenario).
//
// Here every scenario has exactly the same pass rate (100%) and exactly
// the same cost per run on both sides: cheap $0.01, dear $1.00. Only the
// mix changes: baseline 100 cheap + 10 dear runs, candidate 10 cheap + 100
// dear. Each scenario's cost ratio is exactly 1 (its bootstrap interval is
// [1, 1]), so no scenario's cost per success rose; the gate must pass.
// It fails instead: the overall row pools $11/110 = $0.10 against
// $100.10/110 = $0.91 per success (×9.1) and flags cost_per_success, so
// `belay gate` exits 1 on a build whose costs did not change.
func TestAdv23OverallCostNotFooledByRunMix(t *testing.T) {
	base := []Group{allPassAdv23("cheap", 100, 0.01, 100), allPassAdv23("dear", 10, 1.00, 100)}
	cand := []Group{allPassAdv23("cheap", 10, 0.01, 100), allPassAdv23("dear", 100, 1.00, 100)}
	res, err := Compare(base, cand, Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Scenarios {
		if r.Cost.Checked && (math.Abs(r.Cost.Low-1) > 1e-9 || math.Abs(r.Cost.High-1) > 1e-9) {
			t.Fatalf("%s: per-scenario cost interval %v–%v, want exactly 1–1 (same cost both sides)", r.Name, r.Cost.Low, r.Cost.High)
		}
	}
	if res.Regressed() {
		t.Errorf("gate regressed (%s) although every scenario has the same pass rate and the same cost per run on both sides; "+
			"overall cost %v → %v, interval %.2f–%.2f, flags %v",
			res, res.Overall.Cost.Base, res.Overall.Cost.Cand, res.Overall.Cost.Low, res.Overall.Cost.High, res.Overall.Flags)
	}
}

// Same for p95 latency with --fail-on-latency: scenarios of 100 ms and
// 5,000 ms, each unchanged, run in a different mix (baseline 400 fast + 10
// slow, candidate 10 fast + 100 slow). The pooled nearest-rank p95 moves
// from 100 ms (the 390th of 410) to 5,000 ms (the 105th of 110); no
// scenario got slower, so the gate must pass.
func TestAdv23OverallLatencyNotFooledByRunMix(t *testing.T) {
	base := []Group{allPassAdv23("fast", 400, 0.01, 100), allPassAdv23("slow", 10, 0.01, 5000)}
	cand := []Group{allPassAdv23("fast", 10, 0.01, 100), allPassAdv23("slow", 100, 0.01, 5000)}
	res, err := Compare(base, cand, Config{Seed: 1, LatencyFails: true})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(res.Overall.Flags, FlagLatencyP95) {
		t.Errorf("overall flagged p95_latency (p95 %v → %v ms, interval %.2f–%.2f) although no scenario's latency changed",
			res.Overall.Latency.Base, res.Overall.Latency.Cand, res.Overall.Latency.Low, res.Overall.Latency.High)
	}
}

// `belay eval --detect 0.1 --baseline B` advised, for a scenario at 90%,
// stats.RunsToDetect(0.9, 0.1, 0.05, 0.8) = 157 runs "(80% power,
// one-sided α=0.05)": the Fleiss sample size for ONE test at level 0.05.
// The gate never tests a scenario of a multi-scenario suite at 0.05:
// weighted Holm gives each scenario (1−0.8)/m of α first (0.0025 for
// m = 4), and at 157 runs a 10-point drop in one scenario of four was
// caught in about half of seeded trials. The advice is now computed at
// Config.ScenarioAlpha; at the runs it advises the gate must reach the
// promised power (allowing 5 points of simulation noise, SE ≈ 1.3
// points over 1,000 trials).
func TestAdv23DetectRunsDeliverPromisedPower(t *testing.T) {
	alpha := Config{}.ScenarioAlpha(4)
	if math.Abs(alpha-0.0025) > 1e-12 {
		t.Fatalf("ScenarioAlpha(4) = %v; want (1−0.8)·0.05/4 = 0.0025", alpha)
	}
	if a := (Config{}).ScenarioAlpha(1); a != 0.05 {
		t.Fatalf("ScenarioAlpha(1) = %v; want the full 0.05", a)
	}
	n, err := stats.RunsToDetect(0.9, 0.1, alpha, 0.8)
	if err != nil || n <= 157 {
		t.Fatalf("RunsToDetect at %v = %d, %v; want more than the 157 of α = 0.05", alpha, n, err)
	}
	const trials = 1000
	rng := rand.New(rand.NewPCG(23, 4))
	flagged := 0
	for range trials {
		base := suite(rng, n, 0.9, 0.9, 0.9, 0.9)
		cand := suite(rng, n, 0.8, 0.9, 0.9, 0.9)
		res, err := Compare(base, cand, Config{BootstrapIters: -1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Regressed() {
			flagged++
		}
	}
	power := float64(flagged) / trials
	t.Logf("gate power at the advised %d runs: %.3f", n, power)
	if power < 0.75 {
		t.Errorf("gate caught the 10-point drop in %.1f%% of trials at the %d runs per scenario --detect advises for 80%% power", 100*power, n)
	}
}
