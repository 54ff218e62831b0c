package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalCreatesStoreDirectory: belay eval creates the missing directory
// of its SQLite store, as belay serve does (newcomer finding: serve made
// sqlite://dir/x.db, eval refused it).
func TestEvalCreatesStoreDirectory(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\nscenarios: [{name: a}]\n")
	db := filepath.Join(dir, "new", "sub", "belay.db")
	_, err := run(t, "eval", suite, "--quiet", "--no-progress", "--store", "sqlite://"+db)
	wantCode(t, err, 0, "")
	if _, err := os.Stat(db); err != nil {
		t.Errorf("the store file: %v", err)
	}

	plain := writeText(t, dir, "plain", "")
	_, err = run(t, "eval", suite, "--quiet", "--no-progress", "--store", "sqlite://"+filepath.Join(plain, "belay.db"))
	wantCode(t, err, 2, "cannot create the directory of the store file "+filepath.Join(plain, "belay.db"))
}

// belay eval given a gateway config says so and exits 2 (newcomer
// finding: no hint that the file was the wrong kind).
func TestEvalGatewayConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := writeText(t, dir, "belay.yaml", "models:\n  - alias: m\n    deployments: [{name: d, provider: openai, model: m, api_key: env:K}]\ntenants: [{name: a, key: k}]\n")
	_, err := run(t, "eval", cfg, "--quiet", "--no-progress", "--store", "sqlite://"+filepath.Join(dir, "belay.db"))
	wantCode(t, err, 2, cfg+":1: this looks like a gateway config (models, tenants, and no scenarios), the file of belay serve --config; "+
		"belay eval takes a suite file, which needs version: 1, agent")
}

// A command agent's scenario that expects no_unapproved_irreversible: true
// is bad input (exit 2): belay cannot see a command agent's tools.
func TestEvalCommandAgentNoUnapprovedIrreversible(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\n"+
		"scenarios:\n  - name: refund\n    expect: {no_unapproved_irreversible: true}\n")
	_, err := run(t, "eval", suite, "--quiet", "--no-progress", "--store", "sqlite://"+filepath.Join(dir, "belay.db"))
	wantCode(t, err, 2, suite+":6: scenarios.0.expect.no_unapproved_irreversible: checks the tool calls of an in-process Go agent")
}

// belay eval takes --store memory:// as belay serve does (helper finding:
// eval refused it): the report is whole, and it says no traces are kept.
func TestEvalMemoryStore(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nruns: 2\nscenarios: [{name: a}]\n")
	out, err := run(t, "eval", suite, "--no-progress", "--store", "memory://")
	wantCode(t, err, 0, "")
	for _, want := range []string{"a         2     2     1.000", "traces: none kept (--store memory:// holds them in memory until belay eval exits)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// An explicit 0 for a suite setting whose zero means its default is bad
// input (exit 2), not the default (adversary finding: runs: 0 ran 10).
func TestEvalExplicitZero(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\n"+
		"scenarios:\n  - name: a\n    runs: 0\n")
	_, err := run(t, "eval", suite, "--quiet", "--no-progress", "--store", "memory://")
	wantCode(t, err, 2, suite+":5: scenarios.0.runs: must be ≥ 1, not 0 (leave it out for the default, the suite's runs)")
}

// Sizes past their bounds are bad input (exit 2) with a one-line error
// naming the field or flag and its range, not an out-of-memory crash
// (adversary finding: providers.sim.deployments: 100000000).
func TestEvalSizeBounds(t *testing.T) {
	dir := t.TempDir()
	big := writeText(t, dir, "big.yaml", "version: 1\nagent: {go: refund-agent}\nruns: 1\n"+
		"providers: {sim: {deployments: 100000000}}\nscenarios: [{name: a}]\n")
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\nscenarios: [{name: a}]\n")
	base := writeText(t, dir, "base.json", `{"format": "belay.eval/v1", "suite": "suite", "scenarios": [{"name": "a", "runs": 20, "passes": 10, "pass_rate": 0.5}]}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{big}, "bad suite: " + big + ":4: providers.sim.deployments: must be between 1 and 64, not 100000000"},
		{[]string{suite, "--runs", "100001"}, "--runs 100001: must be between 1 and 100000 (runs per scenario)"},
		{[]string{suite, "--detect", "0.001", "--baseline", base, "--run-detected"},
			"--run-detected: detecting a drop of 0.001 takes 3091275 runs per scenario, more than belay eval runs (100000); detect a larger drop"},
	} {
		_, err := run(t, append(append([]string{"eval"}, c.args...), "--quiet", "--no-progress", "--store", "memory://")...)
		wantCode(t, err, 2, c.want)
		if got := err.Error(); got != c.want {
			t.Errorf("error %q, want %q", got, c.want)
		}
	}
}

// A scenario name that cannot form a run id is bad input (exit 2), named
// with the rule (adversary finding: every run of "happy path" failed as a
// crash, unexplained).
func TestEvalScenarioNameRunID(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {go: refund-agent}\nruns: 1\n"+
		"scenarios: [{name: \"happy path\", input: hi}]\n")
	_, err := run(t, "eval", suite, "--quiet", "--no-progress", "--store", "memory://")
	wantCode(t, err, 2, "bad suite: "+suite+`:4: scenarios.0.name: "happy path" has " ": a scenario name is part of its runs' ids `+
		"(evXXXXXXXXXX-NAME-N, sent as X-Belay-Run-Id), so it may use only letters, digits and . _ : -, at most 109 characters")
}

// --detect reads the baseline's counts, as the gate does, not its
// pass_rate field (adversarial review: a hand-edited pass_rate changed the
// answer).
func TestDetectReadsCounts(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\nscenarios: [{name: a}]\n")
	base := writeText(t, dir, "base.json", `{"format": "belay.eval/v1", "suite": "suite", "scenarios": [{"name": "a", "runs": 20, "passes": 18, "pass_rate": 0.25}]}`)
	out, err := run(t, "eval", suite, "--detect", "0.1", "--baseline", base, "--no-progress", "--store", "memory://")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "baseline 0.900:") {
		t.Errorf("--detect output:\n%s\nwant the rate from the counts, baseline 0.900", out)
	}
	bad := writeText(t, dir, "bad.json", `{"format": "belay.eval/v1", "suite": "suite", "scenarios": [{"name": "a", "runs": 20, "passes": 21}]}`)
	_, err = run(t, "eval", suite, "--detect", "0.1", "--baseline", bad, "--no-progress", "--store", "memory://")
	wantCode(t, err, 2, "passes 21, runs 20: need 0 ≤ passes ≤ runs")
}

// A providers config whose deployments wait longer than the suite's
// timeout is noted on stderr before the runs, and not under --quiet.
func TestEvalTimeoutNote(t *testing.T) {
	dir := t.TempDir()
	writeText(t, dir, "belay.yaml", "models:\n  - alias: m\n    deployments:\n      - {name: d, provider: openai, model: gpt-4o-mini, base_url: \"sim://\"}\n")
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nmodel: m\nproviders: {config: belay.yaml}\n"+
		"timeout: 90s\nruns: 1\nscenarios: [{name: a}]\n")
	_, errOut, err := belayArgs(t, "eval", suite, "--no-progress", "--store", "memory://")
	wantCode(t, err, 0, "")
	want := "belay eval: note: providers.config belay.yaml: attempt timeouts not shorter than the suite's timeout 1m30s, on deployment d (first_byte 2m0s): "
	if !strings.HasPrefix(errOut, want) || strings.Count(errOut, "note:") != 1 {
		t.Errorf("stderr:\n%s\nwant one note, beginning %q", errOut, want)
	}
	_, errOut, err = belayArgs(t, "eval", suite, "--no-progress", "--quiet", "--store", "memory://")
	wantCode(t, err, 0, "")
	if errOut != "" {
		t.Errorf("stderr under --quiet: %q", errOut)
	}
}
