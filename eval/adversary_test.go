package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
)

// suiteError loads text and returns the error, which must wrap ErrBadSuite.
func suiteError(t *testing.T, text string) (path, msg string) {
	t.Helper()
	path = writeSuite(t, text)
	_, err := LoadSuite(path)
	if !errors.Is(err, ErrBadSuite) {
		t.Fatalf("err = %v, want ErrBadSuite", err)
	}
	return path, err.Error()
}

// TestAdversary12SuiteNumbers: min_pass_rate must be a finite number in
// [0, 1] and amounts of money must not be negative; each error names the
// file, line and field (adversary finding 12: `min_pass_rate: .nan` and
// `max_cost_usd: "-1"` were accepted, and the NaN broke the JSON report).
func TestAdversary12SuiteNumbers(t *testing.T) {
	const head = "version: 1\nagent: {go: a}\n"
	cases := []struct {
		name, text, marker, field, says string
	}{
		{"nan pass rate", head + "min_pass_rate: .nan\nscenarios: [{name: a}]\n", "min_pass_rate", "min_pass_rate", "between 0 and 1"},
		{"inf pass rate", head + "min_pass_rate: .inf\nscenarios: [{name: a}]\n", "min_pass_rate", "min_pass_rate", "between 0 and 1"},
		{"negative pass rate", head + "min_pass_rate: -0.1\nscenarios: [{name: a}]\n", "min_pass_rate", "min_pass_rate", "between 0 and 1"},
		{"pass rate above 1", head + "min_pass_rate: 1.5\nscenarios: [{name: a}]\n", "min_pass_rate", "min_pass_rate", "between 0 and 1"},
		{"negative expected cost", head + "scenarios:\n  - name: a\n    expect: {max_cost_usd: \"-1\"}\n", "max_cost_usd", "scenarios.0.expect.max_cost_usd", "≥ 0"},
		{"negative cost limit", head + "limits: {max_cost_usd: \"-0.5\"}\nscenarios: [{name: a}]\n", "limits:", "limits.max_cost_usd", "≥ 0"},
		{"negative scenario cost limit", head + "scenarios:\n  - name: a\n    limits: {max_cost_usd: \"-0.01\"}\n", "limits:", "scenarios.0.limits.max_cost_usd", "≥ 0"},
		{"negative token limit", head + "limits: {max_tokens: -1}\nscenarios: [{name: a}]\n", "limits:", "limits.max_tokens", "≥ 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, msg := suiteError(t, c.text)
			if want := fmt.Sprintf("%s:%d: %s: ", path, lineWith(t, c.text, c.marker), c.field); !strings.Contains(msg, want) {
				t.Errorf("error %q\ndoes not name %q", msg, want)
			}
			if !strings.Contains(msg, c.says) {
				t.Errorf("error %q does not say %q", msg, c.says)
			}
		})
	}
	// Zero is a valid amount and a valid rate.
	if _, err := LoadSuite(writeSuite(t, head+"min_pass_rate: 0\nlimits: {max_cost_usd: \"0\"}\nscenarios: [{name: a, expect: {max_cost_usd: \"0.00\"}}]\n")); err != nil {
		t.Errorf("zero amounts: %v", err)
	}
}

// TestAdversary12ReportHasNoNaN: a suite built in code with a NaN
// min_pass_rate is refused by Run, so no report carries a NaN, and a report
// always encodes to JSON (adversary finding 12).
func TestAdversary12ReportHasNoNaN(t *testing.T) {
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) { return 0, "ok", nil }))
	s := suiteFor(t, "version: 1\nagent: {go: AGENT}\nruns: 2\nscenarios: [{name: a}]\n", name)
	nan := math.NaN()
	s.MinPassRate = &nan
	if _, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{}); !errors.Is(err, ErrBadSuite) {
		t.Fatalf("Run with min_pass_rate NaN: err = %v, want ErrBadSuite", err)
	}
	half := 0.5
	s.MinPassRate = &half
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	if !json.Valid(buf.Bytes()) || bytes.Contains(buf.Bytes(), []byte(": NaN")) {
		t.Errorf("report JSON is not clean: %s", buf.Bytes())
	}
}

// TestAdversary14SuiteErrorsNameNoGoTypes: every error about a suite's
// shape is in the suite's words, at its line, and never names a Go type
// (adversary finding 14: an unknown key's error named eval.Suite).
func TestAdversary14SuiteErrorsNameNoGoTypes(t *testing.T) {
	const head = "version: 1\nagent: {go: a}\n"
	cases := []struct {
		name, text, marker, says string
	}{
		{"unknown top-level key", head + "bogus_key: 1\nscenarios: [{name: a}]\n", "bogus_key",
			`bogus_key: unknown field "bogus_key" (known here: agent, approvals,`},
		{"unknown key in a merged mapping", head + "scenarios:\n  - &base {name: a, input: x}\n  - <<: {input: y, inptu: z}\n    name: b\n", "inptu",
			`scenarios.1.inptu: unknown field "inptu" (known here: expect, input,`},
		{"scalar for a mapping", head + "scenarios:\n  - name: a\n    expect: x\n", "expect: x",
			`scenarios.0.expect: must be a mapping of fields (at_most_once, called,`},
		{"scalar for limits", head + "limits: 5\nscenarios: [{name: a}]\n", "limits: 5", `limits: must be a mapping of fields`},
		{"mapping for a list", head + "scenarios: {name: a}\n", "scenarios:", `scenarios: must be a list, not a mapping`},
		{"list for a mapping", head + "scenarios: [{name: a, expect: {trajectory: [a]}}]\n", "scenarios:",
			`scenarios.0.expect.trajectory: must be a mapping of fields (mode, tools), not a list`},
		{"word for a number", head + "min_pass_rate: high\nscenarios: [{name: a}]\n", "min_pass_rate", `min_pass_rate: must be a number, not "high"`},
		{"fraction for a whole number", head + "runs: 1.5\nscenarios: [{name: a}]\n", "runs:", `runs: must be a whole number, not "1.5"`},
		{"fraction in exponent form", head + "limits: {max_turns: 1.5e0}\nscenarios: [{name: a}]\n", "limits:", `limits.max_turns: must be a whole number, not "1.5e0"`},
		{"fraction for an exit code", head + "scenarios: [{name: a, expect: {exit_code: 0.5}}]\n", "scenarios:",
			`scenarios.0.expect.exit_code: must be a whole number, not "0.5"`},
		{"word for a list of numbers", head + "providers: {sim: {down: [first]}}\nscenarios: [{name: a}]\n", "providers",
			`providers.sim.down.0: must be a whole number, not "first"`},
		{"text for a command list", "version: 1\nagent: {command: ./agent}\nscenarios: [{name: a}]\n", "agent:", `agent.command: must be a list, not "./agent"`},
		{"key given twice", head + "runs: 2\nscenarios: [{name: a}]\nruns: 3\n", "runs: 3", `runs: is given twice (first on line 3)`},
		{"version given twice", head + "scenarios: [{name: a}]\nversion: 1\n", "", `:4: version: is given twice (first on line 1)`},
		{"top level is a list", "- version: 1\n", "- version", `a suite is a mapping of fields (version, agent, scenarios, …), not a list`},
		{"two documents", head + "scenarios: [{name: a}]\n---\nfoo: 1\n", "---", `more than one YAML document`},
		{"syntax error", head + "scenarios:\n  - name: a\n    input: [unclosed\n", "", ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, msg := suiteError(t, c.text)
			if strings.Contains(msg, "eval.") || strings.Contains(msg, "float64") || strings.Contains(msg, "[]") ||
				strings.Contains(msg, " int") || strings.Contains(msg, "string") || strings.Contains(msg, "unmarshal") {
				t.Errorf("error names a Go type or decoder: %q", msg)
			}
			if c.marker != "" {
				if want := fmt.Sprintf("%s:%d: ", path, lineWith(t, c.text, c.marker)); !strings.Contains(msg, want) {
					t.Errorf("error %q\ndoes not name the line: %q", msg, want)
				}
			}
			if !strings.Contains(msg, c.says) {
				t.Errorf("error %q\ndoes not say %q", msg, c.says)
			}
		})
	}
	// A merge that brings in only known fields loads, explicit keys first.
	s, err := LoadSuite(writeSuite(t, head+"scenarios:\n  - &base {name: a, input: x}\n  - <<: *base\n    name: b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Scenarios[1].Name != "b" || s.Scenarios[1].Input != "x" {
		t.Errorf("merged scenario: %+v", s.Scenarios[1])
	}
}

// An interrupted eval says how far it got and that no report is written
// (newcomer finding, session 18: it said only "context canceled").
func TestInterruptedSaysHowFar(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	name := register(t, agentFunc(func(context.Context, Env) (int, string, error) { return 0, "ok", nil }))
	// Ctrl-C as the third run is being finished, after its agent exited:
	// an agent's return racing the interruption could count either way
	// (CI, session 25, saw it cut short), so the interruption comes once
	// the third run's outcome is settled.
	f := &fakeHarness{script: func(sc string, index int) canned {
		if sc == "a" && index == 2 {
			cancel()
		}
		return canned{}
	}}
	s := suiteFor(t, "version: 1\nagent: {go: AGENT}\nruns: 5\nconcurrency: 1\nscenarios: [{name: a}, {name: b}]\n", name)
	_, err := Run(ctx, s, f.factory(), Options{})
	want := "eval interrupted (context canceled) with 3 of 10 runs ended and 0 cut short: no report is written; " +
		"the runs that ended were recorded in the store, and those cut short as stopped (stop reason canceled)"
	if err == nil || err.Error() != want || !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted Run: %v\nwant %s", err, want)
	}
}

// A run the interruption cuts short (its agent still running at Ctrl-C)
// is not counted as ended, and its run is finished with ErrInterrupted
// (the harness stops it, stop reason canceled), not as an agent that
// failed or timed out (newcomer finding, session 23: such runs were
// stored as failed, "agent timed out" after 0.1 s of a 30 s timeout).
func TestInterruptedRunsCutShort(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var n atomic.Int32
	name := register(t, agentFunc(func(ctx context.Context, _ Env) (int, string, error) {
		if n.Add(1) < 2 {
			return 0, "ok", nil
		}
		cancel() // Ctrl-C while the second run's agent works
		<-ctx.Done()
		return 1, "", ctx.Err()
	}))
	s := suiteFor(t, "version: 1\nagent: {go: AGENT}\nruns: 3\nconcurrency: 1\nscenarios: [{name: a}]\n", name)
	f := &fakeHarness{}
	_, err := Run(ctx, s, f.factory(), Options{})
	want := "eval interrupted (context canceled) with 1 of 3 runs ended and 1 cut short"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("interrupted Run: %v\nwant it to begin %s", err, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.finished) != 2 || f.finished[0] != nil || !errors.Is(f.finished[1], ErrInterrupted) {
		t.Errorf("runs finished with %v; want nil, then ErrInterrupted", f.finished)
	}
}

// agent.name is bounded as X-Belay-Agent is.
func TestAgentNameBounds(t *testing.T) {
	for _, name := range []string{`" support"`, `"a\tb"`, strings.Repeat("x", 129)} {
		_, msg := suiteError(t, "version: 1\nagent: {command: [sh, -c, 'echo hi'], name: "+name+"}\nscenarios: [{name: a}]\n")
		if !strings.Contains(msg, "agent.name: want at most 128 bytes of text without control characters or spaces at its ends") {
			t.Errorf("name %s: error %q", name, msg)
		}
	}
}
