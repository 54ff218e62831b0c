package eval

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A command's stdout is kept up to maxAgentOutput bytes (counted in full)
// and its stderr by its last maxAgentStderr: an agent that loops printing
// cannot exhaust belay's memory before its timeout (adversarial review:
// `yes` under a 2 s timeout held 2.6 GB).
func TestRunGroupBoundsWhatItKeeps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 8 << 20
	cmd := exec.CommandContext(ctx, "sh", "-c", "head -c 8388608 /dev/zero; head -c 8388608 /dev/zero >&2; echo last line >&2")
	stdout, total, stderr, err := runGroup(cmd, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(stdout) != maxAgentOutput || total != n {
		t.Errorf("stdout: kept %d bytes of %d, want %d of %d", len(stdout), total, maxAgentOutput, n)
	}
	if len(stderr) != maxAgentStderr || !strings.HasSuffix(string(stderr), "\x00last line\n") {
		t.Errorf("stderr: kept %d bytes ending %q, want the last %d", len(stderr), stderr[max(0, len(stderr)-12):], maxAgentStderr)
	}
}

// A run whose agent wrote more than belay keeps fails, saying so, and is
// not judged on the cut output.
func TestOutputPastTheBoundFailsTheRun(t *testing.T) {
	text := `version: 1
name: x
agent: {command: [sh, -c, 'head -c 2000000 /dev/zero | tr "\0" a; echo']}
runs: 1
scenarios:
  - {name: long, expect: {output: "^a+$"}}
`
	rep, err := Run(t.Context(), suiteFor(t, text, ""), (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Outcomes[0]
	if o.Passed || o.Reason != "output" || !strings.Contains(o.Failures[0], "the agent wrote 2000001 bytes on its stdout, more than the 1048576 belay keeps") {
		t.Fatalf("passed %v reason %q failures %.300q", o.Passed, o.Reason, o.Failures)
	}
}
