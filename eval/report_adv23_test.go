package eval

import (
	"errors"
	"testing"
)

// failingWriter fails every write, as a full disk or a closed pipe does.
type failingWriterAdv23 struct{ calls int }

var errDiskFullAdv23 = errors.New("no space left on device")

func (w *failingWriterAdv23) Write(p []byte) (int, error) {
	w.calls++
	return 0, errDiskFullAdv23
}

// WriteMarkdown ignores every write error and returns nil (render.go,
// WriteMarkdown: Fprintf/Fprintln results dropped, `return nil`). belay
// eval --markdown writes through writeFile (cmd/belay/eval.go), which
// trusts that error: on a full disk it renames an empty or truncated
// summary into place and exits 0, where its contract is exit 2 "when a
// report file (--json, --junit, --markdown) cannot be written". WriteJSON
// and WriteJUnit do return their write errors; WriteMarkdown must too.
func TestAdv23WriteMarkdownReportsWriteError(t *testing.T) {
	one := 1.0
	r := &Report{Format: ReportFormat, Suite: "s", MinPassRate: &one,
		Overall:   Summary{Name: "overall", Runs: 2, Passes: 1, PassRate: 0.5, Wilson: Interval{0.09, 0.91}},
		Scenarios: []ScenarioReport{{Summary: Summary{Name: "a", Runs: 2, Passes: 1, PassRate: 0.5, FailuresByReason: map[string]int{"crash": 1}}}}}
	w := &failingWriterAdv23{}
	err := r.WriteMarkdown(w)
	if w.calls == 0 {
		t.Fatal("WriteMarkdown wrote nothing")
	}
	if !errors.Is(err, errDiskFullAdv23) {
		t.Errorf("WriteMarkdown = %v after %d failed writes; want the write error", err, w.calls)
	}
	// The other two report writers do report it (for comparison).
	if err := r.WriteJSON(&failingWriterAdv23{}); err == nil {
		t.Errorf("WriteJSON = nil on a failing writer")
	}
}

// expect.status is checked against the run statuses (a typo is refused:
// suite.go, Scenario.validate), but expect.stop_reason is not checked at
// all: stop_reason: max_turn_exceeded (a typo of max_turns_exceeded, the
// reason failure.MaxTurnsExceeded names) loads, and every run of the
// scenario then fails on expect.stop_reason, reported as a pass-rate drop
// of the agent rather than a bad suite (exit 2). A stop reason is one of
// the failure reasons (run/run.go sets StopReason to string(fe.Reason) or
// "canceled"; failure.Reason.Known lists them).
func TestAdv23StopReasonTypoRefused(t *testing.T) {
	_, err := LoadSuite(writeSuite(t, "version: 1\nagent: {go: x}\nscenarios:\n"+
		"  - {name: a, input: '', expect: {status: stopped, stop_reason: max_turn_exceeded}}\n"))
	if !errors.Is(err, ErrBadSuite) {
		t.Errorf("LoadSuite = %v; want ErrBadSuite for the unknown stop reason \"max_turn_exceeded\"", err)
	}
}

// A run has a stop reason only when it was stopped (run/run.go: StopReason
// is set only for store.RunStopped), so expect {status: succeeded,
// stop_reason: …} can never be met: every run fails, silently turning the
// scenario's pass rate into 0. The suite must be refused, as other
// expectations that cannot hold are (commandAgentCheck).
func TestAdv23ContradictoryStatusAndStopReasonRefused(t *testing.T) {
	_, err := LoadSuite(writeSuite(t, "version: 1\nagent: {go: x}\nscenarios:\n"+
		"  - {name: a, input: '', expect: {status: succeeded, stop_reason: max_turns_exceeded}}\n"))
	if !errors.Is(err, ErrBadSuite) {
		t.Errorf("LoadSuite = %v; want ErrBadSuite: a succeeded run has no stop reason", err)
	}
}

// tools.safe_to_repeat holds glob patterns (path.Match syntax) like
// tools.irreversible and approvals[].tool. approvals[].tool is checked with
// filepath.Match at load, irreversible by the gateway config's Validate;
// safe_to_repeat is checked nowhere, and matchAny (eval/harness/harness.go) drops the
// filepath.ErrBadPattern: "refund_[" is accepted and silently matches no
// tool, so the tool it names is never treated as safe to repeat.
func TestAdv23SafeToRepeatBadPatternRefused(t *testing.T) {
	_, err := LoadSuite(writeSuite(t, "version: 1\nagent: {go: x}\ntools: {safe_to_repeat: ['refund_[']}\nscenarios:\n"+
		"  - {name: a, input: ''}\n"))
	if !errors.Is(err, ErrBadSuite) {
		t.Errorf("LoadSuite = %v; want ErrBadSuite for the malformed pattern \"refund_[\"", err)
	}
}
