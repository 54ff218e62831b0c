package gate_test

import (
	"fmt"
	"os"

	"github.com/belay-run/belay/eval/gate"
)

func ExampleCompare() {
	baseline := []gate.Group{
		{Name: "checkout", Runs: 200, Passes: 177},
		{Name: "search", Runs: 200, Passes: 174},
		{Name: "refund", Runs: 12, Passes: 12},
	}
	candidate := []gate.Group{
		{Name: "checkout", Runs: 200, Passes: 148},
		{Name: "search", Runs: 200, Passes: 175},
		{Name: "refund", Runs: 12, Passes: 11},
		{Name: "cancel", Runs: 20, Passes: 20},
	}
	res, err := gate.Compare(baseline, candidate, gate.Config{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	res.WriteText(os.Stdout)
	// Output:
	// belay gate: REGRESSED: checkout, overall
	// pass rate: one-sided tests at α = 0.05, weighted Holm over overall (weight 0.8) and 3 scenarios (0.0667 each)
	// cost per success, p95 latency: not checked (needs ≥ 10 per-run samples on both sides)
	//
	// SCENARIO  BASELINE       CANDIDATE      TEST    Z      P       P(HOLM)  COST×  P95×  VERDICT
	// cancel    -              20/20 100.0%   -       -      -       -        -      -     new
	// checkout  177/200 88.5%  148/200 74.0%  z       3.71   0.0001  0.0015   -      -     REGRESSED pass_rate
	// refund    12/12 100.0%   11/12 91.7%    fisher  1.02   0.5000  1.0000   -      -     ok
	// search    174/200 87.0%  175/200 87.5%  z       -0.15  0.5596  1.0000   -      -     ok
	// overall   363/412 88.1%  334/412 81.1%  cmh     2.71   0.0034  0.0039   -      -     REGRESSED pass_rate
	//
	// why:
	//   cancel: only in the candidate (new scenario): not compared
	//   checkout: pass rate fell 88.5% → 74.0% (z = 3.71, one-sided p = 0.0001, Holm-adjusted p = 0.0015 ≤ α = 0.05)
	//   refund: pass rate 100.0% → 91.7%: no significant drop (Fisher exact test for small counts, one-sided p = 0.5000, Holm-adjusted p = 1.0000 > α = 0.05)
	//   search: pass rate 87.0% → 87.5%: no significant drop (z = -0.15, one-sided p = 0.5596, Holm-adjusted p = 1.0000 > α = 0.05)
	//   overall: pass rate fell 88.1% → 81.1% (stratified by scenario (Cochran–Mantel–Haenszel) z = 2.71, one-sided p = 0.0034, Holm-adjusted p = 0.0039 ≤ α = 0.05)
}
