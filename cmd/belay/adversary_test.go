package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/belay-run/belay/eval"
)

// run runs the real root command with args as they are.
func run(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), err
}

// writeText writes text to name in dir and returns the path.
func writeText(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdversary12EvalInput: flags that were silently ignored, a NaN
// min_pass_rate and a report that cannot be written all exit 2 (bad input
// or environment), never 0 or 1, which CI reads as a verdict on the suite
// (adversary finding 12).
func TestAdversary12EvalInput(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\nscenarios: [{name: a}]\n")
	nanSuite := writeText(t, dir, "nan.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nmin_pass_rate: .nan\nscenarios: [{name: a}]\n")
	base := writeText(t, dir, "base.json", `{"format": "belay.eval/v1", "suite": "suite", "scenarios": [{"name": "a", "runs": 20, "passes": 18, "pass_rate": 0.9}]}`)
	store := "sqlite://" + filepath.Join(dir, "belay.db")
	cases := []struct {
		name string
		args []string
		says string
	}{
		{"runs 0", []string{"eval", suite, "--runs", "0"}, "--runs 0: must be between 1 and 100000"},
		{"runs -1", []string{"eval", suite, "--runs", "-1"}, "--runs -1: must be between 1 and 100000"},
		{"detect NaN", []string{"eval", suite, "--detect", "NaN", "--baseline", base}, "--detect NaN: must be a drop in pass rate between 0 and 1"},
		{"detect negative", []string{"eval", suite, "--detect", "-0.05", "--baseline", base}, "--detect -0.05"},
		{"detect 2", []string{"eval", suite, "--detect", "2", "--baseline", base}, "--detect 2"},
		{"detect 1", []string{"eval", suite, "--detect", "1", "--baseline", base}, "--detect 1"},
		{"detect 0", []string{"eval", suite, "--detect", "0", "--baseline", base}, "--detect 0"},
		{"run-detected alone", []string{"eval", suite, "--run-detected"}, "--run-detected needs --detect"},
		{"NaN min_pass_rate", []string{"eval", nanSuite}, "min_pass_rate: must be a number between 0 and 1, not NaN"},
		{"unwritable --json", []string{"eval", suite, "--quiet", "--json", filepath.Join(dir, "no-such-dir", "r.json")}, "cannot write the --json report: " + filepath.Join(dir, "no-such-dir", "r.json") + ": folder " + filepath.Join(dir, "no-such-dir") + " does not exist"},
		{"unwritable --markdown", []string{"eval", suite, "--quiet", "--markdown", filepath.Join(dir, "no-such-dir", "r.md")}, "cannot write the --markdown report"},
		{"--baseline without --detect", []string{"eval", suite, "--quiet", "--baseline", base}, "--baseline is read by --detect DROP only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := run(t, append(c.args, "--store", store, "--no-progress")...)
			wantCode(t, err, 2, c.says)
		})
	}
	// A drop that is possible is still answered (exit 0).
	out, err := run(t, "eval", suite, "--detect", "0.05", "--baseline", base, "--store", store)
	wantCode(t, err, 0, "")
	wantLines(t, out, "runs per scenario to detect a drop of 0.050")
}

// report writes an eval report with the given scenarios to dir/name.
func report(t *testing.T, dir, name string, scenarios ...eval.ScenarioReport) string {
	t.Helper()
	r := &eval.Report{Format: eval.ReportFormat, Suite: "s", Scenarios: scenarios}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	return writeText(t, dir, name, buf.String())
}

func scenario(name string, runs, passes int, samples ...eval.Sample) eval.ScenarioReport {
	return eval.ScenarioReport{Summary: eval.Summary{Name: name, Runs: runs, Passes: passes}, Samples: samples}
}

// TestAdversary13GateMissingScenario: a renamed or removed scenario fails
// the gate unless --allow-missing; bad samples are bad input (adversary
// finding 13: renaming a scenario that fell to 0/20 passed the gate).
func TestAdversary13GateMissingScenario(t *testing.T) {
	dir := t.TempDir()
	base := report(t, dir, "base.json", scenario("a", 20, 20), scenario("b", 20, 20))
	renamed := report(t, dir, "renamed.json", scenario("a-renamed", 20, 0), scenario("b", 20, 20))
	removed := report(t, dir, "removed.json", scenario("b", 20, 20))
	added := report(t, dir, "added.json", scenario("a", 20, 20), scenario("b", 20, 20), scenario("c", 20, 0))

	const why = "scenario a is in the baseline but not in the candidate: a removed or renamed scenario can hide a regression; pass --allow-missing to accept"
	out, err := run(t, "gate", base, renamed)
	wantCode(t, err, 1, why)
	wantLines(t, out, "REGRESSED: a (missing in the candidate)", "MISSING", "new")
	_, err = run(t, "gate", base, removed)
	wantCode(t, err, 1, why)
	_, err = run(t, "gate", base, renamed, "--allow-missing")
	wantCode(t, err, 0, "")
	_, err = run(t, "gate", base, added)
	wantCode(t, err, 0, "")

	// Samples: negative cost or latency is bad input; an empty list means
	// no samples; a non-empty one must match the runs.
	ok := make([]eval.Sample, 20)
	for i := range ok {
		ok[i] = eval.Sample{Passed: true, CostUSD: 0.01, LatencyMS: 100}
	}
	negCost := append([]eval.Sample(nil), ok...)
	negCost[4].CostUSD = -0.01
	negLatency := append([]eval.Sample(nil), ok...)
	negLatency[4].LatencyMS = -5
	withSamples := report(t, dir, "samples.json", scenario("a", 20, 20, ok...), scenario("b", 20, 20, ok...))
	for name, cand := range map[string]string{
		"negative cost":    report(t, dir, "negcost.json", scenario("a", 20, 20, negCost...), scenario("b", 20, 20)),
		"negative latency": report(t, dir, "neglat.json", scenario("a", 20, 20, negLatency...), scenario("b", 20, 20)),
		"too few samples":  report(t, dir, "few.json", scenario("a", 20, 20, ok[:5]...), scenario("b", 20, 20)),
	} {
		_, err := run(t, "gate", withSamples, cand)
		if exitCode(err) != 2 {
			t.Errorf("%s: exit %d (%v), want 2", name, exitCode(err), err)
		}
	}
	empty := writeText(t, dir, "empty.json", strings.Replace(readText(t, base), `"samples": null`, `"samples": []`, -1))
	if !strings.Contains(readText(t, empty), `"samples": []`) {
		t.Fatalf("empty samples not written: %s", readText(t, empty))
	}
	_, err = run(t, "gate", withSamples, empty)
	wantCode(t, err, 0, "")
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A 0 given for a gate flag whose zero means "the default" is refused, not
// read as the default (review finding: --cost-tolerance 0 was +10%).
func TestGateExplicitZeroFlags(t *testing.T) {
	dir := t.TempDir()
	base := report(t, dir, "base.json", scenario("a", 20, 20))
	for _, c := range []struct{ flag, says string }{
		{"--alpha", "--alpha 0: want a significance level"},
		{"--cost-tolerance", "--cost-tolerance 0: want a rise above 0"},
		{"--latency-tolerance", "--latency-tolerance 0: want a rise above 0"},
		{"--bootstrap", "--bootstrap 0: want a number of rounds above 0"},
	} {
		_, err := run(t, "gate", base, base, c.flag, "0")
		wantCode(t, err, 2, c.says)
	}
	_, err := run(t, "gate", base, base, "--cost-tolerance", "0.001", "--bootstrap", "-1")
	wantCode(t, err, 0, "")
}

// Reports of two different suites are refused (newcomer finding: with
// --allow-missing the gate passed, comparing no scenario).
func TestGateDifferentSuites(t *testing.T) {
	dir := t.TempDir()
	base := report(t, dir, "base.json", scenario("a", 20, 20))
	r := &eval.Report{Format: eval.ReportFormat, Suite: "other", Scenarios: []eval.ScenarioReport{scenario("b", 20, 20)}}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	other := writeText(t, dir, "other.json", buf.String())
	_, err := run(t, "gate", base, other, "--allow-missing")
	wantCode(t, err, 2, `the reports are of different suites: "s"`)
}

// --bootstrap past its bound is bad input (exit 2), not an out-of-memory
// crash (adversary finding: --bootstrap 100000000000).
func TestGateBootstrapBound(t *testing.T) {
	dir := t.TempDir()
	base := report(t, dir, "base.json", scenario("a", 20, 20))
	_, err := run(t, "gate", base, base, "--bootstrap", "100000000000")
	wantCode(t, err, 2, "")
	if want := "--bootstrap 100000000000: want 1 to 1000000 rounds, or a negative number to turn the cost and latency checks off"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	_, err = run(t, "gate", base, base, "--bootstrap", "1000000")
	wantCode(t, err, 0, "")
}

// A candidate with no runs is bad input (exit 2), not a pass (adversary
// finding: every scenario at runs: 0 gave "OK: no regression").
func TestGateNoRuns(t *testing.T) {
	dir := t.TempDir()
	base := report(t, dir, "base.json", scenario("a", 20, 18), scenario("b", 20, 18))
	cand := report(t, dir, "cand.json", scenario("a", 0, 0), scenario("b", 0, 0))
	out, err := run(t, "gate", base, cand)
	wantCode(t, err, 2, "the candidate report has no runs (each of its 2 scenarios ran 0 times): it cannot show whether anything regressed")
	if out != "" {
		t.Errorf("a verdict was written:\n%s", out)
	}
	_, err = run(t, "gate", cand, base)
	wantCode(t, err, 2, "the baseline report has no runs")
}

// A scenario's own providers that cannot be built fail the command before
// the first run, exit 2, as the suite's do (adversarial review: every run
// of the scenario failed with reason harness, and eval exited 0).
func TestScenarioProvidersBuiltBeforeTheFirstRun(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ providers, want string }{
		{"{sim: {script: nosuch.yaml}}", `scenario "b": providers:`},
		{"{sim: {profile: no-such-profile}}", "no-such-profile"},
	} {
		suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\n"+
			"scenarios:\n  - name: a\n  - name: b\n    providers: "+c.providers+"\n")
		out, err := run(t, "eval", suite, "--no-progress", "--store", "memory://")
		wantCode(t, err, 2, c.want)
		if strings.Contains(out, "pass") {
			t.Errorf("providers %s: a report was printed:\n%s", c.providers, out)
		}
	}
}

// A world keyed by numbers reaches the agent as JSON (adversarial review:
// no world file was written, and every run failed).
func TestWorldWithNumberKeysReachesTheAgent(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'cat \"$BELAY_WORLD\"']}\nruns: 2\n"+
		"scenarios:\n  - name: a\n    world:\n      orders:\n        1001: {status: shipped}\n    expect: {output: '\"1001\":\\{\"status\":\"shipped\"\\}'}\n")
	out, err := run(t, "eval", suite, "--no-progress", "--store", "memory://")
	if err != nil {
		t.Fatalf("exit %d: %v\n%s", exitCode(err), err, out)
	}
	if !regexp.MustCompile(`(?m)^a\s+2\s+2\s+1\.000\s`).MatchString(out) {
		t.Errorf("the agent did not read its world in both runs:\n%s", out)
	}
}
