package gate

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/belay-run/belay/eval/stats"
)

// Presence says on which sides of the comparison a scenario ran.
type Presence int

const (
	Both          Presence = iota // compared
	BaselineOnly                  // removed or renamed in the candidate; not compared, fails the gate unless Config.AllowMissing
	CandidateOnly                 // new in the candidate; not compared
)

func (p Presence) String() string {
	switch p {
	case Both:
		return "both"
	case BaselineOnly:
		return "baseline only"
	case CandidateOnly:
		return "candidate only"
	}
	return fmt.Sprintf("Presence(%d)", int(p))
}

// Test names the pass-rate test behind a row's p-value.
type Test string

const (
	TestNone   Test = ""       // not tested: one side missing or without runs
	TestZ      Test = "z"      // one-sided pooled two-proportion z-test
	TestFisher Test = "fisher" // one-sided Fisher exact test
	// TestCMH is the overall row's test when two or more scenarios have
	// runs on both sides: the one-sided Cochran–Mantel–Haenszel test
	// (stats.CMHZ), stratified by scenario, so that a change in how many
	// runs each scenario has does not read as a change in pass rate.
	TestCMH Test = "cmh"
)

// Flag names one kind of regression.
type Flag string

const (
	FlagPassRate       Flag = "pass_rate"        // pass rate significantly lower
	FlagCostPerSuccess Flag = "cost_per_success" // cost per successful run up by more than the tolerance
	FlagLatencyP95     Flag = "p95_latency"      // p95 latency up by more than the tolerance
	// FlagMissing: the scenario is in the baseline but not in the candidate
	// (removed or renamed), or the candidate has it with 0 runs where the
	// baseline ran it, and Config.AllowMissing is false.
	FlagMissing Flag = "missing"
)

// Counts are one side's runs and passes; Rate is NaN without runs.
type Counts struct {
	Runs, Passes int
	Rate         float64
}

// RatioCheck is a bootstrap comparison of one statistic, candidate over
// baseline.
type RatioCheck struct {
	Checked    bool    // false when samples were missing, too few, or the check is off
	Base, Cand float64 // the statistic on each side (USD per success, or ms)
	Low, High  float64 // (1−2·Alpha) percentile-bootstrap interval of Cand/Base
	Regressed  bool    // Low > 1 + tolerance
}

// Row is the comparison of one scenario, or of the suite overall.
type Row struct {
	Name       string
	Presence   Presence
	Base, Cand Counts
	Test       Test    // which test gave PValue
	Z          float64 // pooled z statistic (the CMH statistic for TestCMH), positive when the candidate is worse (also shown for Fisher rows)
	PValue     float64 // one-sided p-value; NaN when not tested
	AdjustedP  float64 // weighted-Holm-adjusted p-value (see the package doc); flagged when ≤ Alpha; NaN when not tested
	// holm: AdjustedP is weighted Holm's over two or more hypotheses;
	// otherwise it is the row's own p-value (tested alone, or unable to
	// reject), and the explanation does not call it adjusted.
	holm bool
	// cmhTested: a TestCMH row had a stratum with variance (a scenario
	// with both passes and failures over its two sides).
	cmhTested bool
	// ratioAlpha is the one-sided level of this row's cost and latency
	// checks: Alpha shared by the rows checked (Result.ratioRows).
	ratioAlpha float64
	Cost       RatioCheck // cost per successful run
	Latency    RatioCheck // p95 latency
	Flags      []Flag     // the regressions found; empty when the row passes
	Warnings   []Flag     // rises reported without failing the gate (p95 latency unless Config.LatencyFails)
	Why        string     // one or more sentences explaining the verdict
}

// Regressed reports whether the row has any flag.
func (r Row) Regressed() bool { return len(r.Flags) > 0 }

func counts(g Group) Counts {
	rate := math.NaN()
	if g.Runs > 0 {
		rate = float64(g.Passes) / float64(g.Runs)
	}
	return Counts{Runs: g.Runs, Passes: g.Passes, Rate: rate}
}

// newRow fills the name, presence and counts; the test comes later.
func newRow(name string, b, c Group, inB, inC bool) Row {
	row := Row{Name: name, Base: counts(b), Cand: counts(c), PValue: math.NaN(), AdjustedP: math.NaN()}
	switch {
	case !inC:
		row.Presence = BaselineOnly
	case !inB:
		row.Presence = CandidateOnly
	}
	return row
}

// test runs the pass-rate test if both sides have runs.
func (r *Row) test(minCell int) {
	b, c := r.Base, r.Cand
	if r.Presence != Both || b.Runs == 0 || c.Runs == 0 {
		return
	}
	r.Z = stats.TwoProportionZ(b.Passes, b.Runs, c.Passes, c.Runs)
	if minExpected(b, c) < float64(minCell) {
		r.Test = TestFisher
		r.PValue = stats.FisherOneSided(b.Passes, b.Runs, c.Passes, c.Runs)
		return
	}
	r.Test = TestZ
	r.PValue = stats.NormalUpperTail(r.Z)
}

// minExpected is the smallest expected count, under equal rates, among the
// four cells (passes and failures on each side).
func minExpected(b, c Counts) float64 {
	n := float64(b.Runs + c.Runs)
	pass := float64(b.Passes + c.Passes)
	fail := n - pass
	small := float64(min(b.Runs, c.Runs))
	return small * min(pass, fail) / n
}

// inFamily reports whether a tested row joins the Holm family. A row whose
// runs all passed, or all failed, on both sides is left out: given its
// margins only one table is possible, its exact p-value is 1 whatever
// happens, and counting it would only make the real tests stricter. Leaving
// out hypotheses that cannot reach significance keeps the family-wise error
// rate (R. E. Tarone, "A modified Bonferroni method for discrete data",
// Biometrics 46, 1990).
func (r Row) inFamily() bool {
	if r.Test == TestCMH {
		return r.cmhTested
	}
	pass := r.Base.Passes + r.Cand.Passes
	return r.Test != TestNone && pass > 0 && pass < r.Base.Runs+r.Cand.Runs
}

func (r *Row) decidePassRate(alpha float64) {
	if r.Test != TestNone && r.AdjustedP <= alpha {
		r.Flags = append(r.Flags, FlagPassRate)
	}
}

// checkRatios runs the cost and latency bootstraps; key separates the
// random streams of different rows ("" for overall).
func (r *Row) checkRatios(b, c Group, cfg Config, key string, alpha float64) {
	if !ratioCheckable(b, c, cfg) {
		return
	}
	r.ratioAlpha = alpha
	conf := 1 - 2*alpha
	if base := costPerSuccess(b.Samples); base == 0 {
		// Nothing cost anything in the baseline (unpriced deployments,
		// the simulator): no ratio says how much worse a candidate's
		// cost is, and any cost at all would be "×+Inf" (adversarial
		// review: $0 against $1e-9 failed the gate). Not checked.
		r.Cost = RatioCheck{Base: 0, Cand: costPerSuccess(c.Samples), Low: math.NaN(), High: math.NaN()}
	} else {
		r.Cost = ratioCheck(b.Samples, c.Samples, costPerSuccess, cfg, conf, cfg.CostTolerance, stream(cfg.Seed, "cost", key))
	}
	r.Latency = ratioCheck(b.Samples, c.Samples, p95Latency(), cfg, conf, cfg.LatencyTolerance, stream(cfg.Seed, "latency", key))
	r.flagRatios(cfg)
}

// flagRatios flags (or warns of) the regressions the cost and latency
// checks found.
func (r *Row) flagRatios(cfg Config) {
	if r.Cost.Regressed {
		r.Flags = append(r.Flags, FlagCostPerSuccess)
	}
	switch {
	case r.Latency.Regressed && cfg.LatencyFails:
		r.Flags = append(r.Flags, FlagLatencyP95)
	case r.Latency.Regressed:
		r.Warnings = append(r.Warnings, FlagLatencyP95)
	}
}

// checkOverallRatios is checkRatios for the overall row, whose samples
// come from several scenarios (the strata, in the same order on both
// sides): cost per success and p95 latency are standardized to one mix of
// scenarios on both sides, each scenario weighted by its runs on both
// sides together, and the bootstrap resamples within each scenario
// (stats.BootstrapRatioStrata). A scenario run 100 times cheaply in the
// baseline and 10 times in the candidate, another the other way round,
// each at its old cost, then reads ×1, not the pooled ×9 (an adversarial
// review). Base and Cand show the standardized values. With one stratum
// it is checkRatios over the pooled samples.
func (r *Row) checkOverallRatios(b, c Group, strataB, strataC [][]Sample, cfg Config, alpha float64) {
	if len(strataB) < 2 {
		r.checkRatios(b, c, cfg, "", alpha)
		return
	}
	if !ratioCheckable(b, c, cfg) {
		return
	}
	w := make([]float64, len(strataB))
	total := 0.0
	for i := range strataB {
		w[i] = float64(len(strataB[i]) + len(strataC[i]))
		total += w[i]
	}
	for i := range w {
		w[i] /= total
	}
	r.ratioAlpha = alpha
	conf := 1 - 2*alpha
	check := func(stat func([][]Sample) float64, tol float64, rng *rand.Rand) RatioCheck {
		lo, hi := stats.BootstrapRatioStrata(strataB, strataC, stat, cfg.BootstrapIters, conf, rng)
		return RatioCheck{Checked: !math.IsNaN(lo), Base: stat(strataB), Cand: stat(strataC), Low: lo, High: hi, Regressed: lo > 1+tol}
	}
	cost := stdCostPerSuccess(w)
	if base := cost(strataB); base == 0 {
		r.Cost = RatioCheck{Base: 0, Cand: cost(strataC), Low: math.NaN(), High: math.NaN()}
	} else {
		r.Cost = check(cost, cfg.CostTolerance, stream(cfg.Seed, "cost", ""))
	}
	r.Latency = check(stdP95Latency(w), cfg.LatencyTolerance, stream(cfg.Seed, "latency", ""))
	r.flagRatios(cfg)
}

// stdCostPerSuccess returns a statistic: cost per successful run over
// strata weighted by w (Σw = 1): Σ w·(mean cost of the stratum) over
// Σ w·(pass rate of the stratum); +Inf when nothing passed.
func stdCostPerSuccess(w []float64) func([][]Sample) float64 {
	return func(strata [][]Sample) float64 {
		var cost, pass float64
		for i, s := range strata {
			var c float64
			p := 0
			for _, x := range s {
				c += x.CostUSD
				if x.Passed {
					p++
				}
			}
			n := float64(len(s))
			cost += w[i] * c / n
			pass += w[i] * float64(p) / n
		}
		if pass == 0 {
			return math.Inf(1)
		}
		return cost / pass
	}
}

// stdP95Latency returns a statistic: the nearest-rank p95 of the runs'
// latencies, in ms, each run weighted by its stratum's weight over the
// stratum's runs (stats.WeightedQuantile). It reuses its buffers, so it
// must not be shared between goroutines.
func stdP95Latency(w []float64) func([][]Sample) float64 {
	var xs, ws []float64
	return func(strata [][]Sample) float64 {
		xs, ws = xs[:0], ws[:0]
		for i, s := range strata {
			each := w[i] / float64(len(s))
			for _, x := range s {
				xs, ws = append(xs, x.LatencyMS), append(ws, each)
			}
		}
		return stats.WeightedQuantile(xs, ws, 0.95)
	}
}

// ratioCheckable reports whether checkRatios checks b against c: the
// bootstrap is on and each side has minBootstrapSamples samples.
func ratioCheckable(b, c Group, cfg Config) bool {
	return cfg.BootstrapIters >= 0 && len(b.Samples) >= minBootstrapSamples && len(c.Samples) >= minBootstrapSamples
}

func ratioCheck(b, c []Sample, stat func([]Sample) float64, cfg Config, conf, tol float64, rng *rand.Rand) RatioCheck {
	lo, hi := stats.BootstrapRatio(b, c, stat, cfg.BootstrapIters, conf, rng)
	return RatioCheck{
		Checked: !math.IsNaN(lo), Base: stat(b), Cand: stat(c),
		Low: lo, High: hi, Regressed: lo > 1+tol,
	}
}

// stream returns the random source for one check of one row.
func stream(seed int64, check, key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(check + "\x00" + key))
	return rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
}

// costPerSuccess is the total cost divided by the runs that passed; +Inf
// when nothing passed.
func costPerSuccess(runs []Sample) float64 {
	var cost float64
	passed := 0
	for _, s := range runs {
		cost += s.CostUSD
		if s.Passed {
			passed++
		}
	}
	if passed == 0 {
		return math.Inf(1)
	}
	return cost / float64(passed)
}

// p95Latency returns a statistic: the nearest-rank p95 (stats.Quantile) of
// the runs' latencies, in ms, found by selection. The statistic reuses one
// buffer, so it must not be shared between goroutines.
func p95Latency() func([]Sample) float64 {
	var buf []float64
	return func(runs []Sample) float64 {
		buf = buf[:0]
		for _, s := range runs {
			buf = append(buf, s.LatencyMS)
		}
		return stats.QuantileInPlace(buf, 0.95)
	}
}

// explain writes Why; overall says r is the overall row.
func (r *Row) explain(cfg Config, overall bool) {
	var parts []string
	switch {
	case r.Presence == BaselineOnly && slices.Contains(r.Flags, FlagMissing):
		parts = append(parts, "in the baseline but not in the candidate: a removed or renamed scenario can hide a regression; accept it with --allow-missing (Config.AllowMissing)")
	case r.Presence == Both && slices.Contains(r.Flags, FlagMissing):
		parts = append(parts, fmt.Sprintf("ran %d times in the baseline but not at all in the candidate: a scenario that did not run can hide a regression; accept it with --allow-missing (Config.AllowMissing)", r.Base.Runs))
	case r.Presence == BaselineOnly:
		parts = append(parts, "only in the baseline (removed or renamed, accepted): not compared")
	case r.Presence == CandidateOnly:
		parts = append(parts, "only in the candidate (new scenario): not compared")
	case r.Test == TestNone && overall:
		parts = append(parts, "no scenario has runs on both sides: not compared")
	case r.Test == TestNone:
		parts = append(parts, "no runs on one side: not compared")
	default:
		parts = append(parts, r.passRateWhy(cfg.Alpha))
	}
	if r.Cost.Regressed {
		parts = append(parts, ratioWhy("cost per success", r.Cost, usd, cfg.CostTolerance, r.ratioAlpha))
	}
	if r.Latency.Regressed {
		why := ratioWhy("p95 latency", r.Latency, ms, cfg.LatencyTolerance, r.ratioAlpha)
		if !cfg.LatencyFails {
			why = "warning (does not fail the gate; --fail-on-latency): " + why
		}
		parts = append(parts, why)
	}
	r.Why = strings.Join(parts, "; ")
}

func (r *Row) passRateWhy(alpha float64) string {
	test := fmt.Sprintf("z = %.2f, one-sided p %s", r.Z, prel(r.PValue))
	switch r.Test {
	case TestFisher:
		test = fmt.Sprintf("Fisher exact test for small counts, one-sided p %s", prel(r.PValue))
	case TestCMH:
		test = fmt.Sprintf("stratified by scenario (Cochran–Mantel–Haenszel) z = %.2f, one-sided p %s", r.Z, prel(r.PValue))
	}
	if r.holm {
		test += fmt.Sprintf(", Holm-adjusted p %s", prel(r.AdjustedP))
	}
	rates := fmt.Sprintf("%s → %s", pct(r.Base.Rate), pct(r.Cand.Rate))
	if r.AdjustedP <= alpha {
		return fmt.Sprintf("pass rate fell %s (%s ≤ α = %g)", rates, test, alpha)
	}
	return fmt.Sprintf("pass rate %s: no significant drop (%s > α = %g)", rates, test, alpha)
}

func ratioWhy(what string, c RatioCheck, unit func(float64) string, tol, alpha float64) string {
	return fmt.Sprintf("%s ×%.2f (%s → %s; %.4g%% interval %.2f–%.2f, low bound above %.2f)",
		what, stats.Ratio(c.Cand, c.Base), unit(c.Base), unit(c.Cand),
		100*(1-2*alpha), c.Low, c.High, 1+tol)
}

func pct(rate float64) string {
	if math.IsNaN(rate) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*rate)
}

// prel is p with its relation, for a sentence: "= 0.0123", "< 0.0001".
func prel(p float64) string {
	f := pfmt(p)
	if rest, ok := strings.CutPrefix(f, "<"); ok {
		return "< " + rest
	}
	return "= " + f
}

func pfmt(p float64) string {
	switch {
	case math.IsNaN(p):
		return "-"
	case p < 0.0001:
		return "<0.0001"
	}
	return fmt.Sprintf("%.4f", p)
}

// usd writes a dollar amount with 4 decimals, or 3 significant digits
// when smaller (a simulated run costs $0.00003: "$0.0000" compared
// nothing).
func usd(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		decimals := 2 - int(math.Floor(math.Log10(math.Abs(v))))
		return "$" + strconv.FormatFloat(v, 'f', decimals, 64)
	}
	return fmt.Sprintf("$%.4f", v)
}
func ms(v float64) string { return fmt.Sprintf("%.0f ms", v) }
