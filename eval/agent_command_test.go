package eval

import (
	"strings"
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
