package gate

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/belay-run/belay/eval/stats"
)

func rowByName(t *testing.T, res Result, name string) Row {
	t.Helper()
	for _, r := range res.Scenarios {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no row %q", name)
	return Row{}
}

func TestCompareRegressionAndNoise(t *testing.T) {
	base := []Group{{Name: "checkout", Runs: 200, Passes: 177}, {Name: "search", Runs: 200, Passes: 174}}
	cand := []Group{{Name: "checkout", Runs: 200, Passes: 148}, {Name: "search", Runs: 200, Passes: 175}}
	res, err := Compare(base, cand, Config{})
	if err != nil {
		t.Fatal(err)
	}
	co := rowByName(t, res, "checkout")
	if co.Test != TestZ || math.Abs(co.Z-3.715) > 5e-4 || !slices.Equal(co.Flags, []Flag{FlagPassRate}) {
		t.Errorf("checkout: test %q z %.4f flags %v; want z, 3.715, [pass_rate]", co.Test, co.Z, co.Flags)
	}
	// Weights: overall 0.8, each scenario 0.1. Checkout has the smallest
	// p/w, so it is tested first at α·0.1: adjusted p = 10·p.
	if math.Abs(co.AdjustedP-10*co.PValue) > 1e-15 {
		t.Errorf("checkout adjusted p %v, want 10×%v", co.AdjustedP, co.PValue)
	}
	se := rowByName(t, res, "search")
	if se.Regressed() || math.Abs(se.Z+0.1499) > 5e-4 {
		t.Errorf("search: z %.4f flags %v; want -0.1499 and no flags", se.Z, se.Flags)
	}
	if !res.Regressed() || !slices.Equal(res.Flagged(), []string{"checkout"}) {
		t.Errorf("Regressed %v, Flagged %v", res.Regressed(), res.Flagged())
	}
	if res.Overall.Base.Runs != 400 || res.Overall.Base.Passes != 351 || res.Overall.Cand.Passes != 323 {
		t.Errorf("overall counts %+v %+v", res.Overall.Base, res.Overall.Cand)
	}
	if !strings.Contains(co.Why, "pass rate fell 88.5% → 74.0%") {
		t.Errorf("checkout why: %s", co.Why)
	}
}

// Two scenarios each with one-sided p ≈ 0.037: significant alone, not
// after Holm (0.037 > 0.05/2); the overall row pools both and catches it at
// its weight (p/0.8 ≤ α), which leaves the two scenarios plain Holm at α.
func TestHolmAcrossScenariosAndPooledOverall(t *testing.T) {
	base := []Group{{Name: "a", Runs: 200, Passes: 180}, {Name: "b", Runs: 200, Passes: 180}}
	cand := []Group{{Name: "a", Runs: 200, Passes: 168}, {Name: "b", Runs: 200, Passes: 168}}
	res, err := Compare(base, cand, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Scenarios {
		if !(r.PValue < 0.05 && r.PValue > 0.025) || r.Regressed() {
			t.Errorf("%s: p %v flags %v: want 0.025 < p < 0.05 and not flagged", r.Name, r.PValue, r.Flags)
		}
		if r.AdjustedP != stats.HolmAdjust([]float64{r.PValue, r.PValue})[0] {
			t.Errorf("%s: adjusted %v", r.Name, r.AdjustedP)
		}
	}
	if ov := res.Overall; !ov.Regressed() || math.Abs(ov.AdjustedP-ov.PValue/0.8) > 1e-15 {
		t.Errorf("overall: p %v adj %v flags %v; want flagged, adjusted p/0.8", ov.PValue, ov.AdjustedP, ov.Flags)
	}
}

// A scenario that passed every run on both sides cannot show a drop, so it
// does not dilute the family: with three of them beside scenario a (p ≈
// 0.019), the family is overall (weight 0.8) and a (0.2). The overall row
// (p ≈ 0.025) falls first, then a is tested at the full α and flagged.
// Were the three counted (0.05 each), a would get α/4 after the overall
// fell and would pass.
func TestAllPassScenariosLeaveHolmFamily(t *testing.T) {
	base := []Group{{Name: "a", Runs: 200, Passes: 180}}
	cand := []Group{{Name: "a", Runs: 200, Passes: 166}}
	for _, n := range []string{"p", "q", "r"} {
		base = append(base, Group{Name: n, Runs: 50, Passes: 50})
		cand = append(cand, Group{Name: n, Runs: 50, Passes: 50})
	}
	res, err := Compare(base, cand, Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, ov := rowByName(t, res, "a"), res.Overall
	if !(a.PValue > 0.0125 && a.PValue < 0.05) || !(ov.PValue < 0.04) {
		t.Fatalf("a: p %v, overall p %v: the example needs 0.0125 < p_a < 0.05, p_overall < 0.04", a.PValue, ov.PValue)
	}
	if want := max(ov.PValue/0.8, a.PValue); math.Abs(a.AdjustedP-want) > 1e-15 || !a.Regressed() {
		t.Errorf("a: p %v adjusted %v flags %v; want adjusted %v and flagged", a.PValue, a.AdjustedP, a.Flags, want)
	}
	if p := rowByName(t, res, "p"); p.Test != TestFisher || p.AdjustedP != 1 || p.Regressed() {
		t.Errorf("p: %+v", p)
	}
	if in, out := res.family(); in != 1 || out != 3 {
		t.Errorf("family %d in, %d out; want 1, 3", in, out)
	}
}

// In a one-scenario suite the overall row is the scenario's table: one
// hypothesis at the full α, not two at α/2. Regression test for the power
// loss that counting it twice would cause.
func TestOneScenarioSuiteIsOneTest(t *testing.T) {
	base := []Group{{Name: "only", Runs: 200, Passes: 180}}
	cand := []Group{{Name: "only", Runs: 200, Passes: 168}}
	res, err := Compare(base, cand, Config{})
	if err != nil {
		t.Fatal(err)
	}
	sc, ov := res.Scenarios[0], res.Overall
	if sc.AdjustedP != sc.PValue || ov.AdjustedP != ov.PValue || sc.PValue != ov.PValue {
		t.Errorf("scenario p %v adj %v, overall p %v adj %v: want all equal", sc.PValue, sc.AdjustedP, ov.PValue, ov.AdjustedP)
	}
	// p ≈ 0.037: above α/2, below α.
	if !(sc.PValue > 0.025 && sc.PValue < 0.05) || !sc.Regressed() || !ov.Regressed() {
		t.Errorf("p %v, flags %v / %v: want 0.025 < p < 0.05 and both flagged", sc.PValue, sc.Flags, ov.Flags)
	}
}

func TestWeightedHolm(t *testing.T) {
	// Equal weights: Holm's procedure.
	ps := []float64{0.04, 0.001, 0.03, 0.5}
	eq := []float64{0.25, 0.25, 0.25, 0.25}
	if got, want := weightedHolm(ps, eq), stats.HolmAdjust(ps); !slices.EqualFunc(got, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-15 }) {
		t.Errorf("equal weights: %v, want Holm %v", got, want)
	}
	ws := []float64{0.8, 0.1, 0.1}
	for _, c := range []struct{ ps, want []float64 }{
		// p/w = 0.025, 0.04, 0.3: the first at 0.02/0.8; the second, now
		// with weight 0.1 of 0.2 left, at 0.004·2 = 0.008 (raised to the
		// running 0.025); the last alone at 0.03.
		{[]float64{0.02, 0.004, 0.03}, []float64{0.025, 0.025, 0.03}},
		// p/w = 0.375, 0.01, 0.2: the second first at 0.001/0.1; the third
		// at 0.02·0.9/0.1 = 0.18; the first last at 0.3.
		{[]float64{0.3, 0.001, 0.02}, []float64{0.3, 0.01, 0.18}},
	} {
		got := weightedHolm(c.ps, ws)
		if !slices.EqualFunc(got, c.want, func(a, b float64) bool { return math.Abs(a-b) < 1e-15 }) {
			t.Errorf("weightedHolm(%v, %v) = %v, want %v", c.ps, ws, got, c.want)
		}
	}
	// A large p stays capped at 1.
	if got := weightedHolm([]float64{0.9, 0.6}, []float64{0.8, 0.2}); got[0] != 1 || got[1] != 1 {
		t.Errorf("capping: %v", got)
	}
}

func TestFisherForSmallCells(t *testing.T) {
	base := []Group{{Name: "few", Runs: 10, Passes: 10}, {Name: "many", Runs: 20, Passes: 20}, {Name: "all", Runs: 30, Passes: 30}}
	cand := []Group{{Name: "few", Runs: 10, Passes: 7}, {Name: "many", Runs: 20, Passes: 12}, {Name: "all", Runs: 30, Passes: 30}}
	res, err := Compare(base, cand, Config{})
	if err != nil {
		t.Fatal(err)
	}
	few, many, all := rowByName(t, res, "few"), rowByName(t, res, "many"), rowByName(t, res, "all")
	if few.Test != TestFisher || math.Abs(few.PValue-19448.0/184756) > 1e-9 || few.Regressed() {
		t.Errorf("few: %q p %v flags %v", few.Test, few.PValue, few.Flags)
	}
	if many.Test != TestFisher || !many.Regressed() {
		t.Errorf("many: %q p %v flags %v", many.Test, many.PValue, many.Flags)
	}
	// No failures anywhere: expected failure count 0 < 5, Fisher gives p = 1.
	if all.Test != TestFisher || all.PValue != 1 || all.Z != 0 {
		t.Errorf("all: %q p %v z %v", all.Test, all.PValue, all.Z)
	}
	// The smallest expected cell of "few" is 10·3/20 = 1.5: MinCell 1 keeps the z-test.
	res, _ = Compare(base, cand, Config{MinCell: 1})
	if r := rowByName(t, res, "few"); r.Test != TestZ || r.PValue != stats.NormalUpperTail(r.Z) {
		t.Errorf("MinCell 1: %q p %v", r.Test, r.PValue)
	}
}

func TestScenarioOnOneSideIsReportedNotFailed(t *testing.T) {
	base := []Group{{Name: "kept", Runs: 50, Passes: 45}, {Name: "old", Runs: 50, Passes: 50}}
	cand := []Group{{Name: "kept", Runs: 50, Passes: 45}, {Name: "new", Runs: 50, Passes: 0}}
	// Without AllowMissing the removed scenario fails the gate
	// (TestAdversary13MissingScenarioFailsGate).
	res, err := Compare(base, cand, Config{AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Regressed() {
		t.Fatalf("regressed: %v", res)
	}
	if got := []string{res.Scenarios[0].Name, res.Scenarios[1].Name, res.Scenarios[2].Name}; !slices.Equal(got, []string{"kept", "new", "old"}) {
		t.Errorf("rows %v", got)
	}
	if p := rowByName(t, res, "new").Presence; p != CandidateOnly {
		t.Errorf("new: %v", p)
	}
	if p := rowByName(t, res, "old").Presence; p != BaselineOnly {
		t.Errorf("old: %v", p)
	}
	if res.Overall.Cand.Runs != 50 || res.Overall.Cand.Passes != 45 {
		t.Errorf("overall should pool only 'kept': %+v", res.Overall.Cand)
	}
}

func TestInvalidInput(t *testing.T) {
	ok := []Group{{Name: "a", Runs: 3, Passes: 2}}
	cases := map[string]struct {
		base []Group
		cfg  Config
	}{
		"passes > runs":   {[]Group{{Name: "a", Runs: 3, Passes: 4}}, Config{}},
		"negative runs":   {[]Group{{Name: "a", Runs: -1}}, Config{}},
		"empty name":      {[]Group{{Runs: 3, Passes: 2}}, Config{}},
		"duplicate":       {[]Group{{Name: "a", Runs: 3, Passes: 2}, {Name: "a", Runs: 1}}, Config{}},
		"sample count":    {[]Group{{Name: "a", Runs: 3, Passes: 2, Samples: make([]Sample, 2)}}, Config{}},
		"sample passes":   {[]Group{{Name: "a", Runs: 2, Passes: 2, Samples: []Sample{{Passed: true}, {}}}}, Config{}},
		"alpha":           {ok, Config{Alpha: 0.5}},
		"cost tolerance":  {ok, Config{CostTolerance: -0.1}},
		"min cell":        {ok, Config{MinCell: -1}},
		"overall weight":  {ok, Config{OverallWeight: 1}},
		"latency NaN tol": {ok, Config{LatencyTolerance: math.NaN()}},
		// Each round keeps a float64: 1e11 rounds ran out of memory
		// (adversary finding).
		"bootstrap iters": {ok, Config{BootstrapIters: 1e11}},
	}
	for name, c := range cases {
		if _, err := Compare(c.base, ok, c.cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

// samples makes n runs; passes are the first k; cost and latency vary a
// little around costUSD and latencyMS, deterministically.
func samples(n, k int, costUSD, latencyMS float64) []Sample {
	out := make([]Sample, n)
	for i := range out {
		wiggle := 1 + float64(i%7-3)/20 // 0.85 … 1.15
		out[i] = Sample{Passed: i < k, CostUSD: costUSD * wiggle, LatencyMS: latencyMS * wiggle}
	}
	return out
}

func TestCostAndLatencyRatios(t *testing.T) {
	base := []Group{
		{Name: "pricier", Runs: 60, Passes: 54, Samples: samples(60, 54, 0.010, 1000)},
		{Name: "same", Runs: 60, Passes: 54, Samples: samples(60, 54, 0.010, 1000)},
		{Name: "slower", Runs: 60, Passes: 54, Samples: samples(60, 54, 0.010, 1000)},
	}
	cand := []Group{
		{Name: "pricier", Runs: 60, Passes: 54, Samples: samples(60, 54, 0.015, 1000)},
		{Name: "same", Runs: 60, Passes: 54, Samples: samples(60, 54, 0.010, 1000)},
		{Name: "slower", Runs: 60, Passes: 54, Samples: samples(60, 54, 0.010, 1400)},
	}
	cfg := Config{BootstrapIters: 500, Seed: 3}
	res, err := Compare(base, cand, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pr, sa, sl := rowByName(t, res, "pricier"), rowByName(t, res, "same"), rowByName(t, res, "slower")
	if !slices.Equal(pr.Flags, []Flag{FlagCostPerSuccess}) || math.Abs(pr.Cost.Cand/pr.Cost.Base-1.5) > 1e-9 {
		t.Errorf("pricier: flags %v cost %+v", pr.Flags, pr.Cost)
	}
	if !(pr.Cost.Low > 1.1 && pr.Cost.Low < 1.5 && pr.Cost.High > 1.5) {
		t.Errorf("pricier interval [%v, %v] should hold 1.5 and exceed 1.1", pr.Cost.Low, pr.Cost.High)
	}
	if sa.Regressed() || !sa.Cost.Checked || sa.Cost.Low > 1 || sa.Cost.High < 1 || sa.Latency.Low > 1 {
		t.Errorf("same: flags %v cost %+v latency %+v", sa.Flags, sa.Cost, sa.Latency)
	}
	// A latency rise warns by default: it does not fail the gate.
	if sl.Regressed() || !slices.Equal(sl.Warnings, []Flag{FlagLatencyP95}) || math.Abs(sl.Latency.Cand/sl.Latency.Base-1.4) > 1e-9 {
		t.Errorf("slower: flags %v warnings %v latency %+v", sl.Flags, sl.Warnings, sl.Latency)
	}
	// Four rows checked (three scenarios and overall): each at α/4, a
	// 97.5% two-sided interval.
	if !strings.Contains(sl.Why, "warning (does not fail the gate; --fail-on-latency): p95 latency ×1.40 (1150 ms → 1610 ms; 97.5% interval") {
		t.Errorf("slower why: %s", sl.Why)
	}
	fails := cfg
	fails.LatencyFails = true
	if res, err := Compare(base, cand, fails); err != nil {
		t.Fatal(err)
	} else if sl := rowByName(t, res, "slower"); !slices.Equal(sl.Flags, []Flag{FlagLatencyP95}) || len(sl.Warnings) != 0 ||
		!strings.Contains(sl.Why, "; p95 latency ×1.40") {
		t.Errorf("slower with LatencyFails: flags %v warnings %v why %s", sl.Flags, sl.Warnings, sl.Why)
	}
	// Overall pools the 180 runs: cost per success ×(1.5+1+1)/3; the slow
	// scenario holds the top third of latencies: pooled p95 (171st of 180)
	// is 1.4×1100 ms against 1150 ms.
	ov := res.Overall
	if math.Abs(ov.Cost.Cand/ov.Cost.Base-3.5/3) > 1e-9 || !ov.Cost.Checked {
		t.Errorf("overall cost %+v, want ratio 1.1667", ov.Cost)
	}
	if !ov.Latency.Regressed || math.Abs(ov.Latency.Cand/ov.Latency.Base-1540.0/1150) > 1e-9 {
		t.Errorf("overall latency %+v, want flagged at ×1.339", ov.Latency)
	}

	// Deterministic: the same seed gives the same intervals; another seed differs.
	again, _ := Compare(base, cand, cfg)
	if rowByName(t, again, "pricier").Cost != pr.Cost || again.Overall.Latency != res.Overall.Latency {
		t.Error("same seed, different intervals")
	}
	other, _ := Compare(base, cand, Config{BootstrapIters: 500, Seed: 4})
	if rowByName(t, other, "pricier").Cost == pr.Cost {
		t.Error("different seed, identical interval")
	}
	// A row's interval depends on the other scenarios only through its
	// level: alone (one check, the full α) the same resamples give a
	// narrower interval inside the suite's.
	alone, _ := Compare(base[:1], cand[:1], cfg)
	if a := alone.Scenarios[0].Cost; !(a.Low >= pr.Cost.Low && a.High <= pr.Cost.High && a.Low > pr.Cost.Low) || a.Base != pr.Cost.Base {
		t.Errorf("alone %+v should lie inside the suite's %+v", a, pr.Cost)
	}
	// Checks off: nothing checked, nothing flagged for cost or latency.
	off, _ := Compare(base, cand, Config{BootstrapIters: -1})
	if off.Regressed() || rowByName(t, off, "pricier").Cost.Checked {
		t.Errorf("bootstrap off: %v", off)
	}
}

func TestTooFewSamplesSkipsBootstrap(t *testing.T) {
	base := []Group{{Name: "a", Runs: 5, Passes: 5, Samples: samples(5, 5, 0.01, 100)}}
	cand := []Group{{Name: "a", Runs: 5, Passes: 5, Samples: samples(5, 5, 0.05, 900)}}
	res, err := Compare(base, cand, Config{BootstrapIters: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Regressed() || res.Scenarios[0].Cost.Checked {
		t.Errorf("5 runs: %v %+v", res, res.Scenarios[0].Cost)
	}
}

func TestWriteText(t *testing.T) {
	base := []Group{{Name: "checkout", Runs: 200, Passes: 177}, {Name: "old", Runs: 10, Passes: 10}}
	cand := []Group{{Name: "checkout", Runs: 200, Passes: 148}}
	res, err := Compare(base, cand, Config{AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"belay gate: REGRESSED: checkout, overall",
		"pass rate: one-sided tests at α = 0.05, one scenario: it and overall are one test at α",
		"overall   177/200 88.5%  148/200 74.0%  z     3.71  0.0001  0.0001",
		"checkout  177/200 88.5%  148/200 74.0%  z     3.71",
		"REGRESSED pass_rate",
		"removed",
		"old: only in the baseline (removed or renamed, accepted): not compared",
		// One test at α (the header says so): the p-value is not called adjusted.
		"checkout: pass rate fell 88.5% → 74.0% (z = 3.71, one-sided p = 0.0001 ≤ α = 0.05)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Holm-adjusted") {
		t.Errorf("a suite with one scenario calls a p-value Holm-adjusted:\n%s", out)
	}
}

// Small costs keep 3 significant digits (a simulated run costs $0.00003;
// "$0.0000 → $0.0000" compared nothing).
func TestUSDFormat(t *testing.T) {
	for v, want := range map[float64]string{0: "$0.0000", 1.5: "$1.5000", 0.0123: "$0.0123", 0.0000312: "$0.0000312", 0.00431: "$0.00431"} {
		if got := usd(v); got != want {
			t.Errorf("usd(%v) = %q; want %q", v, got, want)
		}
	}
}

// The pass-rate line of the text report says which correction was
// applied, in every case (newcomer finding: with overall the only row
// able to reject, it claimed weighted Holm over "0 scenarios (+Inf
// each)" while overall was tested alone at α; with no scenario on both
// sides it gave the all-pass reason). The adjusted p-values show what was
// applied.
func TestWriteTextSaysTheCorrection(t *testing.T) {
	g := func(name string, runs, passes int) Group { return Group{Name: name, Runs: runs, Passes: passes} }
	cases := []struct {
		name       string
		base, cand []Group
		header     string
		corrected  bool // some row's adjusted p-value differs from its p-value
	}{
		{"weighted Holm", []Group{g("a", 100, 90), g("b", 100, 85), g("c", 20, 20)}, []Group{g("a", 100, 80), g("b", 100, 84), g("c", 20, 20)},
			"weighted Holm over overall (weight 0.8) and 2 scenarios (0.1 each); 1 more all-pass or all-fail on both sides, not counted", true},
		{"weighted Holm, one scenario", []Group{g("a", 100, 90), g("c", 20, 20)}, []Group{g("a", 100, 80), g("c", 20, 20)},
			"weighted Holm over overall (weight 0.8) and 1 scenario (0.2); 1 more all-pass or all-fail on both sides, not counted", true},
		{"no row can reject", []Group{g("a", 20, 20), g("b", 20, 20)}, []Group{g("a", 20, 20), g("b", 20, 20)},
			"no correction: every scenario passes all or fails all on both sides, so no test below can reject (their p-values are shown for reference)", false},
		// Pooled, a passing and a failing scenario look like a mixed
		// table; stratified by scenario (CMH) neither can move.
		{"overall alone", []Group{g("a", 20, 20), g("b", 20, 0)}, []Group{g("a", 20, 20), g("b", 20, 0)},
			"no correction: every scenario passes all or fails all on both sides, so no test below can reject (their p-values are shown for reference)", false},
		{"one scenario", []Group{g("a", 100, 90)}, []Group{g("a", 100, 80)},
			"one scenario: it and overall are one test at α", false},
		{"nothing tested", []Group{g("a", 20, 20)}, []Group{g("b", 20, 10)},
			"nothing tested: no scenario has runs on both sides", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Compare(c.base, c.cand, Config{AllowMissing: true})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := res.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			line := strings.Split(buf.String(), "\n")[1]
			if want := "pass rate: one-sided tests at α = 0.05, " + c.header; line != want {
				t.Errorf("got  %s\nwant %s", line, want)
			}
			corrected := false
			for _, row := range append(res.Scenarios, res.Overall) {
				if row.Test != TestNone && row.AdjustedP != row.PValue {
					corrected = true
				}
			}
			if corrected != c.corrected {
				t.Errorf("adjusted p-values differ from the p-values: %v, want %v (%+v)", corrected, c.corrected, res)
			}
		})
	}
}

// A negative BootstrapIters turns the cost and latency checks off, and the
// header says so, not that samples are missing (adversary finding:
// --bootstrap -1 said "needs ≥ 10 per-run samples" on reports that had them).
func TestWriteTextBootstrapOff(t *testing.T) {
	g := []Group{{Name: "a", Runs: 20, Passes: 20, Samples: samples(20, 20, 0.01, 100)}}
	for iters, want := range map[int]string{
		-1: "cost per success, p95 latency: not checked (turned off: --bootstrap -1, Config.BootstrapIters, is negative)\n",
		0:  "cost per success, p95 latency: 90% bootstrap interval of candidate/baseline (2000 rounds, seed 0); flagged above +10% cost, +10% latency (a warning)\n",
	} {
		res, err := Compare(g, g, Config{BootstrapIters: iters})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := res.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		if _, rest, _ := strings.Cut(buf.String(), "\n"); !strings.Contains(rest, "\n"+want) {
			t.Errorf("BootstrapIters %d: output lacks %q:\n%s", iters, want, buf.String())
		}
		if res.Overall.Cost.Checked != (iters >= 0) {
			t.Errorf("BootstrapIters %d: cost checked %v", iters, res.Overall.Cost.Checked)
		}
	}
}

// A side without a single run is invalid input, not a pass (adversary
// finding: a candidate whose scenarios all ran 0 times passed as "no
// regression in 2 scenarios").
func TestNoRunsIsInvalid(t *testing.T) {
	ran := []Group{{Name: "a", Runs: 20, Passes: 18}, {Name: "b", Runs: 20, Passes: 18}}
	none := []Group{{Name: "a"}, {Name: "b"}}
	for _, c := range []struct {
		base, cand []Group
		want       string
	}{
		{ran, none, "gate: invalid input: the candidate report has no runs (each of its 2 scenarios ran 0 times): it cannot show whether anything regressed"},
		{none, ran, "gate: invalid input: the baseline report has no runs (each of its 2 scenarios ran 0 times): it cannot show whether anything regressed"},
		{ran, nil, "gate: invalid input: the candidate report has no runs (it has no scenarios): it cannot show whether anything regressed"},
	} {
		_, err := Compare(c.base, c.cand, Config{AllowMissing: true})
		if !errors.Is(err, ErrInvalid) || err.Error() != c.want {
			t.Errorf("err = %v\nwant %s", err, c.want)
		}
	}
	// One scenario with runs is enough: the others are reported as not
	// compared.
	if _, err := Compare(ran, []Group{{Name: "a", Runs: 1, Passes: 1}, {Name: "b"}}, Config{}); err != nil {
		t.Error(err)
	}
}

// The overall row is stratified by scenario: the same pass rate in every
// scenario is no drop, however the runs per scenario moved (adversarial
// review: pooled counts read easy 95/100, hard 5/10 against easy 19/20,
// hard 50/100 as 90.9% → 57.5%, z 5.73, and failed the gate); a drop
// within the scenarios still fails it.
func TestOverallStratifiedByScenario(t *testing.T) {
	base := []Group{{Name: "easy", Runs: 100, Passes: 95}, {Name: "hard", Runs: 10, Passes: 5}}
	cand := []Group{{Name: "easy", Runs: 20, Passes: 19}, {Name: "hard", Runs: 100, Passes: 50}}
	res, err := Compare(base, cand, Config{BootstrapIters: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Regressed() || res.Overall.Test != TestCMH || math.Abs(res.Overall.Z) > 1e-9 {
		t.Errorf("same rates in every scenario: regressed %v, overall %s z %v (%s)", res.Regressed(), res.Overall.Test, res.Overall.Z, res.Overall.Why)
	}
	drop := []Group{{Name: "easy", Runs: 200, Passes: 160}, {Name: "hard", Runs: 200, Passes: 100}}
	res, err = Compare([]Group{{Name: "easy", Runs: 200, Passes: 180}, {Name: "hard", Runs: 200, Passes: 120}}, drop, Config{BootstrapIters: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Overall.Flags, FlagPassRate) || res.Overall.Test != TestCMH {
		t.Errorf("a drop of 0.1 in both scenarios: overall %s flags %v (%s)", res.Overall.Test, res.Overall.Flags, res.Overall.Why)
	}
}

// With --allow-missing, a scenario the candidate ran 0 times is left out of
// the overall row as a removed one is (adversarial review: its baseline
// runs were pooled into the baseline side only, and the gate failed).
func TestNotRunScenarioLeftOutOfOverall(t *testing.T) {
	base := []Group{{Name: "a", Runs: 100, Passes: 50}, {Name: "x", Runs: 100, Passes: 100}}
	notRun := []Group{{Name: "a", Runs: 100, Passes: 50}, {Name: "x", Runs: 0, Passes: 0}}
	res, err := Compare(base, notRun, Config{BootstrapIters: -1, AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Regressed() || res.Overall.Base.Runs != 100 || res.Overall.Cand.Runs != 100 {
		t.Errorf("overall %d/%d vs %d/%d, regressed %v: %s", res.Overall.Base.Passes, res.Overall.Base.Runs,
			res.Overall.Cand.Passes, res.Overall.Cand.Runs, res.Regressed(), res.Overall.Why)
	}
}

// A baseline whose runs cost nothing (unpriced deployments, the simulator)
// has no cost ratio to hold a candidate to: its cost is not checked and
// fails nothing, while latency still is (adversarial review: $0 against
// $1e-9 failed the gate "×+Inf").
func TestZeroCostBaselineIsNotACostRegression(t *testing.T) {
	base := []Group{{Name: "a", Runs: 60, Passes: 54, Samples: samples(60, 54, 0, 1000)}}
	cand := []Group{{Name: "a", Runs: 60, Passes: 54, Samples: samples(60, 54, 1e-9, 1000)}}
	res, err := Compare(base, cand, Config{BootstrapIters: 300, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := rowByName(t, res, "a")
	if res.Regressed() || a.Cost.Checked || a.Cost.Regressed || a.Cost.Base != 0 || a.Cost.Cand <= 0 || !a.Latency.Checked {
		t.Errorf("zero-cost baseline: regressed %v, cost %+v, latency %+v", res.Regressed(), a.Cost, a.Latency)
	}
}

// A ratio check's interval level is printed as the header prints it, to
// four digits, not as the float it is (newcomer finding: "96.66666666666667%
// interval" under a header of "96.67%").
func TestRatioWhyLevel(t *testing.T) {
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " ms" }
	got := ratioWhy("p95 latency", RatioCheck{Checked: true, Base: 1000, Cand: 1500, Low: 1.91, High: 9.97}, ms, 0.2, 0.05/3)
	want := "p95 latency ×1.50 (1000 ms → 1500 ms; 96.67% interval 1.91–9.97, low bound above 1.20)"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
