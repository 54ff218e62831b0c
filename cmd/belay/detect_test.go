package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// belay eval SUITE --detect D --baseline REPORT refuses a baseline of
// another suite, as belay gate refuses the pair (adversarial review: the
// suite was loaded and ignored, and the runs were computed for the other
// suite's scenarios); a scenario of the suite the baseline lacks is named.
func TestDetectRefusesAnotherSuitesBaseline(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "mine.yaml", "version: 1\nname: mine\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\n"+
		"scenarios: [{name: alpha}, {name: beta}]\n")
	// The baseline of another suite, with four scenarios none of which is this suite's.
	base := writeText(t, dir, "other.json", `{"format": "belay.eval/v1", "suite": "other", "scenarios": [`+
		`{"name": "w", "runs": 20, "passes": 18}, {"name": "x", "runs": 20, "passes": 18},`+
		`{"name": "y", "runs": 20, "passes": 18}, {"name": "z", "runs": 20, "passes": 18}]}`)
	out, err := run(t, "eval", suite, "--detect", "0.1", "--baseline", base, "--store", "sqlite://"+filepath.Join(dir, "b.db"))
	if err == nil {
		t.Fatalf("a baseline of suite \"other\" was accepted for suite \"mine\" (exit 0):\n%s", out)
	}
	wantCode(t, err, 2, `is a report of suite "other", not of `+suite+` (suite "mine")`)

	// The same suite, with one scenario the baseline lacks.
	base = writeText(t, dir, "mine.json", `{"format": "belay.eval/v1", "suite": "mine", "scenarios": [{"name": "alpha", "runs": 20, "passes": 18}]}`)
	out, err = run(t, "eval", suite, "--detect", "0.1", "--baseline", base, "--store", "memory://")
	if err != nil {
		t.Fatal(err)
	}
	none := writeText(t, dir, "none.json", `{"format": "belay.eval/v1", "suite": "mine", "scenarios": [{"name": "gamma", "runs": 20, "passes": 18}]}`)
	_, err = run(t, "eval", suite, "--detect", "0.1", "--baseline", none, "--run-detected", "--store", "memory://")
	wantCode(t, err, 2, "has none of mine's scenarios: nothing to detect a drop from")
	wantLines(t, out, "beta                             not in the baseline: belay gate does not compare it",
		"belay gate tests a scenario of these 1 at one-sided α=0.05", "alpha                            baseline 0.900:")
}

// A scenario whose baseline rate equals the drop (0.10 → 0.00) can be
// tested for it (adversarial review: it was called "not possible").
func TestDetectDropToZero(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "s.yaml", "version: 1\nname: s\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\nscenarios: [{name: a}]\n")
	base := writeText(t, dir, "b.json", `{"format": "belay.eval/v1", "suite": "s", "scenarios": [{"name": "a", "runs": 20, "passes": 2}]}`)
	out, err := run(t, "eval", suite, "--detect", "0.1", "--baseline", base, "--store", "memory://")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "not possible") {
		t.Fatalf("a drop from 0.10 to 0.00 reported as impossible:\n%s", out)
	}
	if !regexp.MustCompile(`a +baseline 0\.100: \d+ runs`).MatchString(out) {
		t.Fatalf("no runs given for a drop to 0:\n%s", out)
	}
}
