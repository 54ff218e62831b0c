package main

import (
	"strings"
	"testing"
)

// belay --version prints the build's version (newcomer finding: it was an
// unknown flag, reported as "belay: belay: unknown flag").
func TestVersionFlag(t *testing.T) {
	out, err := run(t, "--version")
	if err != nil || !strings.HasPrefix(out, "belay version ") || strings.TrimSpace(strings.TrimPrefix(out, "belay version ")) != version() {
		t.Errorf("belay --version: %q, %v; want \"belay version %s\"", out, err, version())
	}
	_, err = run(t, "--bogus")
	if err == nil || !strings.HasPrefix(err.Error(), "belay: unknown flag: --bogus") {
		t.Errorf("belay --bogus: %v; want it to begin \"belay: unknown flag: --bogus\" (main adds no second prefix)", err)
	}
}
