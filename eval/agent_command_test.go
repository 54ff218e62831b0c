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
