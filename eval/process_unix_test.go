//go:build unix

package eval

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pidFrom reads the process id a test agent wrote to path.
func pidFrom(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the agent wrote no child pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("child pid %q: %v", b, err)
	}
	return pid
}

// running reports whether process pid exists and is not a zombie, from
// /proc (Linux); elsewhere the test is skipped.
func running(t *testing.T, pid int) bool {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see whether a process still runs")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// gone waits (up to 5s, for the kernel to finish a kill already sent) for
// process pid to end, and reports whether it did.
func gone(t *testing.T, pid int) bool {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !running(t, pid) {
			return true
		}
	}
	return false
}

// groupSuite is a one-run suite whose command agent is `sh -c SCRIPT` with
// $PIDFILE set; check, when not empty, is the scenario's check.
func groupSuite(t *testing.T, script, timeout, expect string) (*Suite, string) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	text := fmt.Sprintf("version: 1\nagent:\n  command: [sh, -c, %q]\n  env: {PIDFILE: %q}\nruns: 1\ntimeout: %s\nscenarios:\n  - name: a\n    expect: %s\n",
		script, pidfile, timeout, expect)
	return suiteFor(t, text, ""), pidfile
}

// TestAdversary11TimeoutKillsProcessGroup: at its timeout a command agent
// is killed with everything it started (its process group), so nothing is
// left running and the timeout takes the timeout, not the timeout plus a
// wait for the orphan's pipes (adversary finding 11: `sh -c "sleep 100;
// echo done"` left sleep running and a 2s timeout took 4s).
func TestAdversary11TimeoutKillsProcessGroup(t *testing.T) {
	const timeout = 500 * time.Millisecond
	// sh waits for its child, as it would for a foreground sleep; the child
	// writes its pid so the test can look for it afterwards.
	s, pidfile := groupSuite(t, `sleep 100 & echo $! > "$PIDFILE"; wait $!; echo done`, timeout.String(), "{exit_code: 0}")
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Outcomes[0]
	if o.Passed || o.Reason != "timeout" {
		t.Errorf("passed %v reason %q (%v), want a timeout", o.Passed, o.Reason, o.Failures)
	}
	if o.Latency > timeout+time.Second {
		t.Errorf("the run took %s with a %s timeout: belay waited for the orphaned child", o.Latency, timeout)
	}
	if pid := pidFrom(t, pidfile); !gone(t, pid) {
		t.Errorf("the agent's child %d still runs after the timeout", pid)
	}
}

// TestAdversary11BackgroundChildDoesNotHoldTheRun: an agent that exits 0
// but leaves a child holding its stdout is judged by its own exit, at once,
// and the child is killed (adversary finding 11: `sh -c "sleep 100 & echo
// started"` was reported as a timeout).
func TestAdversary11BackgroundChildDoesNotHoldTheRun(t *testing.T) {
	s, pidfile := groupSuite(t, `sleep 100 & echo $! > "$PIDFILE"; echo started`, "20s", `{exit_code: 0, output: "^started\n$"}`)
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Outcomes[0]
	if !o.Passed || o.ExitCode != 0 || o.Output != "started\n" {
		t.Errorf("passed %v reason %q exit %d output %q (%v), want a pass", o.Passed, o.Reason, o.ExitCode, o.Output, o.Failures)
	}
	if o.Latency > 5*time.Second {
		t.Errorf("the run took %s: belay waited for the agent's background child", o.Latency)
	}
	if pid := pidFrom(t, pidfile); !gone(t, pid) {
		t.Errorf("the agent's background child %d still runs after the run", pid)
	}
}

// TestAdversary11CheckBackgroundChild: a scenario's shell check gets the
// same treatment: judged by its own exit, its leftovers killed.
func TestAdversary11CheckBackgroundChild(t *testing.T) {
	s, pidfile := groupSuite(t, `echo ok`, "20s", `{check: 'sleep 100 & echo $! > "$PIDFILE"; exit 0'}`)
	s.Agent.Env = nil
	t.Setenv("PIDFILE", pidfile) // the check's environment is belay's own
	start := time.Now()
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Outcomes[0]; !o.Passed {
		t.Errorf("passed %v reason %q (%v), want a pass", o.Passed, o.Reason, o.Failures)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the suite took %s: belay waited for the check's background child", d)
	}
	if pid := pidFrom(t, pidfile); !gone(t, pid) {
		t.Errorf("the check's background child %d still runs", pid)
	}
}
