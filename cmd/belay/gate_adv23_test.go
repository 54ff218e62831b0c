package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// reportAdv23 writes a belay.eval/v1 report whose scenarios all passed
// every run: name → (runs, cost per run in USD).
func reportAdv23(t *testing.T, dir, file string, scen []struct {
	name string
	runs int
	cost float64
}) string {
	t.Helper()
	type sample struct {
		Passed    bool    `json:"passed"`
		CostUSD   float64 `json:"cost_usd"`
		LatencyMS float64 `json:"latency_ms"`
	}
	type sc struct {
		Name    string   `json:"name"`
		Runs    int      `json:"runs"`
		Passes  int      `json:"passes"`
		Samples []sample `json:"samples"`
	}
	rep := struct {
		Format    string `json:"format"`
		Suite     string `json:"suite"`
		Scenarios []sc   `json:"scenarios"`
	}{Format: "belay.eval/v1", Suite: "shop"}
	for _, s := range scen {
		x := sc{Name: s.name, Runs: s.runs, Passes: s.runs}
		for range s.runs {
			x.Samples = append(x.Samples, sample{Passed: true, CostUSD: s.cost, LatencyMS: 100})
		}
		rep.Scenarios = append(rep.Scenarios, x)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return writeText(t, dir, file, string(b))
}

// belay gate exits 1 ("regression: overall", cost_per_success) on two
// reports whose every scenario has a 100% pass rate and exactly the same
// cost per run on both sides; only how many runs each scenario had
// differs (baseline run with --runs 100 for checkout and the suite's 10
// for bulk-export, the candidate the other way round). CI reads exit 1 as
// "the candidate costs more"; nothing got more expensive. The gate
// stratifies the pass rate by scenario for exactly this reason (gate.go,
// stratify: "an edited runs:, a scenario run more in one report"), not the
// cost. Right: exit 0.
func TestAdv23GateCostExitOneOnRunMixOnly(t *testing.T) {
	dir := t.TempDir()
	type s = struct {
		name string
		runs int
		cost float64
	}
	base := reportAdv23(t, dir, "base.json", []s{{"checkout", 100, 0.01}, {"bulk-export", 10, 1.00}})
	cand := reportAdv23(t, dir, "cand.json", []s{{"checkout", 10, 0.01}, {"bulk-export", 100, 1.00}})
	out, err := run(t, "gate", base, cand)
	if code := exitCode(err); code != 0 {
		t.Errorf("belay gate exit %d (%v), want 0: no scenario's pass rate or cost changed\n%s", code, err, out)
	}
}

// A scenario the candidate has but ran 0 times fails the gate (right), and
// the verdict line says "a (not run in the candidate)" (gate.Result.String),
// but the error belay gate prints for CI (cmd/belay/gate.go, gateFailure)
// says it "is in the baseline but not in the candidate: a removed or
// renamed scenario": the scenario is in the candidate, neither removed
// nor renamed. The message must say it was not run.
func TestAdv23GateFailureNamesNotRunScenario(t *testing.T) {
	dir := t.TempDir()
	base := writeText(t, dir, "base.json", `{"format": "belay.eval/v1", "suite": "shop", "scenarios": [`+
		`{"name": "a", "runs": 20, "passes": 18}, {"name": "b", "runs": 20, "passes": 18}]}`)
	cand := writeText(t, dir, "cand.json", `{"format": "belay.eval/v1", "suite": "shop", "scenarios": [`+
		`{"name": "a", "runs": 0, "passes": 0}, {"name": "b", "runs": 20, "passes": 18}]}`)
	out, err := run(t, "gate", base, cand)
	if code := exitCode(err); code != 1 {
		t.Fatalf("exit %d (%v), want 1", code, err)
	}
	if !strings.Contains(out, "a (not run in the candidate)") {
		t.Fatalf("verdict line lacks the not-run wording:\n%s", out)
	}
	if msg := err.Error(); strings.Contains(msg, "not in the candidate") || strings.Contains(msg, "removed or renamed") {
		t.Errorf("error for CI: %q; the scenario is in the candidate (0 runs), not removed or renamed", msg)
	}
}
