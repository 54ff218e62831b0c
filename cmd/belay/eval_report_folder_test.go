package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A report path that names an existing folder is refused before the
// suite runs, as any path that cannot be written is (a third review: it
// passed the check, the whole suite ran, and the write failed at its end,
// leaving PATH.tmp behind).
func TestEvalReportPathIsAFolder(t *testing.T) {
	dir := t.TempDir()
	suite := writeText(t, dir, "suite.yaml", "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nruns: 1\nscenarios: [{name: a}]\n")
	report := filepath.Join(dir, "reports")
	if err := os.Mkdir(report, 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := belayArgs(t, "eval", suite, "--store", "memory://", "--json", report)
	if err == nil || !strings.Contains(err.Error(), "cannot write the --json report: "+report+" is a folder; want a file name in it") {
		t.Fatalf("--json onto a folder: %v", err)
	}
	if strings.Contains(stdout, "overall") {
		t.Errorf("--json %s (a folder): expected refusal before the suite runs; got the suite run, then %q", report, err)
	}
	if _, serr := os.Stat(report + ".tmp"); serr == nil {
		t.Errorf("--json %s: expected no temporary file left after the failed write; got %s.tmp left behind", report, report)
	}
}
