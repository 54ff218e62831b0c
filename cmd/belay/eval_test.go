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
