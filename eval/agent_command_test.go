package eval

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// An agent.command that names no program says so at its line, not that
// the suite names neither agent.go nor agent.command.
func TestAgentCommandNamesNoProgram(t *testing.T) {
	for _, cmd := range []string{"[]", `[""]`, `["  ", x]`} {
		_, msg := suiteError(t, "version: 1\nname: t\nagent:\n  command: "+cmd+"\nscenarios: [{name: a, input: hi}]\n")
		if !strings.HasSuffix(msg, ":4: agent.command: names no program: give the program and its arguments, e.g. [python3, agent.py]") {
			t.Errorf("command %s: %s", cmd, msg)
		}
	}
	_, msg := suiteError(t, "version: 1\nname: t\nagent: {}\nscenarios: [{name: a, input: hi}]\n")
	if !strings.Contains(msg, "name exactly one of agent.go") {
		t.Errorf("no agent: %s", msg)
	}
}

// A whole number in exponent form is a whole number, as the gateway's
// config reads it (newcomer finding: max_tokens: 1e5 loaded there and
// was refused here).
func TestExponentWholeNumbers(t *testing.T) {
	s, err := LoadSuite(writeSuite(t, "version: 1\nagent: {command: [echo, hi]}\nruns: 2e1\nlimits: {max_turns: 1e2, max_tokens: 1.5e5}\nscenarios: [{name: a}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs != 20 || s.Limits.MaxTurns != 100 || s.Limits.MaxTokens != 150000 {
		t.Errorf("runs %d, max_turns %d, max_tokens %d; want 20, 100, 150000", s.Runs, s.Limits.MaxTurns, s.Limits.MaxTokens)
	}
}

// parsingAgent is a Checker that can read check texts before any run.
type parsingAgent struct {
	checkingAgent
	runs *atomic.Int64
}

func (p parsingAgent) ParseCheck(check string) error {
	if check != "good" {
		return errors.New(`want "good"`)
	}
	return nil
}

// An in-process agent that is a CheckParser has the suite's check texts
// read before any run: one it cannot read refuses the suite, naming the
// scenario, and no run starts (newcomer finding: a typo in a check failed
// every run of its scenario).
func TestCheckParsedBeforeRuns(t *testing.T) {
	var runs atomic.Int64
	agent := parsingAgent{runs: &runs, checkingAgent: checkingAgent{
		agentFunc: func(ctx context.Context, env Env) (int, string, error) { runs.Add(1); return 0, "", nil },
		check:     func(Env, string) error { return nil }}}
	name := register(t, agent)
	text := "version: 1\nagent: {go: AGENT}\nruns: 3\nscenarios:\n  - {name: a, expect: {check: good}}\n  - {name: b, expect: {check: refunds=O}}\n"
	_, err := Run(t.Context(), suiteFor(t, text, name), (&fakeHarness{}).factory(), Options{})
	if !errors.Is(err, ErrBadSuite) || !strings.Contains(err.Error(), `scenarios.1.expect.check (scenario b): want "good"`) {
		t.Errorf("Run: %v; want ErrBadSuite naming scenarios.1.expect.check", err)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("%d runs started; want none", n)
	}
	rep, err := Run(t.Context(), suiteFor(t, strings.ReplaceAll(text, "refunds=O", "good"), name), (&fakeHarness{}).factory(), Options{})
	if err != nil || len(rep.Outcomes) != 6 || runs.Load() != 6 {
		t.Errorf("Run: %v, %d outcomes, %d runs; want 6 of each", err, len(rep.Outcomes), runs.Load())
	}
}
