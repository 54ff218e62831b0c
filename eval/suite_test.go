package eval

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
)

// writeSuite writes text to a suite file in a temporary folder.
func writeSuite(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// lineWith returns the 1-based number of the first line of text containing
// marker.
func lineWith(t *testing.T, text, marker string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("no line contains %q", marker)
	return 0
}

const goodSuite = `version: 1
name: demo
agent: {go: demo-agent}
scenarios:
  - name: first
    input: hello
    expect:
      exit_code: 0
      output: "(?i)hi"
      status: succeeded
      trajectory: {mode: subset, tools: [lookup]}
  - name: second
    input: bye
`

func TestLoadSuiteDefaults(t *testing.T) {
	s, err := LoadSuite(writeSuite(t, goodSuite))
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs != 10 || s.Concurrency != 4 || time.Duration(s.Timeout) != 60*time.Second || s.Model != "gpt-4o-mini" {
		t.Errorf("defaults: runs %d, concurrency %d, timeout %s, model %q", s.Runs, s.Concurrency, time.Duration(s.Timeout), s.Model)
	}
	if len(s.Scenarios) != 2 || s.Scenarios[0].Expect.output == nil || !s.Scenarios[0].Expect.output.MatchString("Hi there") {
		t.Errorf("scenario expectations not compiled: %+v", s.Scenarios)
	}
	if s.Dir != filepath.Dir(s.Path) {
		t.Errorf("Dir %q, Path %q", s.Dir, s.Path)
	}
}

// A duration is a Go duration or a number of seconds, as in a belay
// config (newcomer finding: timeout: 30 was refused).
func TestLoadSuiteDurationSeconds(t *testing.T) {
	for text, want := range map[string]time.Duration{"30": 30 * time.Second, "1.5": 1500 * time.Millisecond, "2m": 2 * time.Minute} {
		s, err := LoadSuite(writeSuite(t, strings.Replace(goodSuite, "name: demo", "name: demo\ntimeout: "+text, 1)))
		if err != nil {
			t.Fatalf("timeout: %s: %v", text, err)
		}
		if time.Duration(s.Timeout) != want {
			t.Errorf("timeout: %s read as %s; want %s", text, time.Duration(s.Timeout), want)
		}
	}
}

func TestLoadSuiteExample(t *testing.T) {
	s, err := LoadSuite("../examples/refund-agent/suite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Agent.Go != "refund-agent" || len(s.Scenarios) != 7 || s.Providers.Sim == nil || s.Providers.Sim.Profile != "flaky" {
		t.Errorf("example suite read as agent %q, %d scenarios, providers %+v", s.Agent.Go, len(s.Scenarios), s.Providers)
	}
	if _, err := LoadSuite("../examples/refund-agent/storm.yaml"); err != nil {
		t.Error(err)
	}
	// The command agent's suite: its scenarios share one world through a
	// YAML anchor.
	c, err := LoadSuite("../examples/command-agent/suite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Agent.Command) != 2 || len(c.Scenarios) != 4 || c.Scenarios[3].World["orders"] == nil {
		t.Errorf("command-agent suite read as agent %v, %d scenarios, last world %v", c.Agent.Command, len(c.Scenarios), c.Scenarios[len(c.Scenarios)-1].World)
	}
}

// TestLoadSuiteErrors: a suite with an unknown key, a missing agent or a
// malformed expectation is refused with an error naming the file, the line
// and the field (issue 5).
func TestLoadSuiteErrors(t *testing.T) {
	cases := []struct {
		name   string
		text   string
		marker string // a text on the line the error must name
		field  string // the field path the error must name
		says   string // a part of the message
	}{
		{"unknown top-level key", strings.Replace(goodSuite, "name: demo", "name: demo\nconcurency: 4", 1),
			"concurency", "concurency", `unknown field "concurency"`},
		{"unknown key in expect", strings.Replace(goodSuite, "      status: succeeded", "      status: succeeded\n      outptu: x", 1),
			"outptu", "scenarios.0.expect.outptu", "unknown field"},
		{"unknown key in second scenario", goodSuite + "    expect: {stop_reasn: killed}\n",
			"stop_reasn", "scenarios.1.expect.stop_reasn", "known here:"},
		{"missing agent", strings.Replace(goodSuite, "agent: {go: demo-agent}\n", "", 1),
			"version: 1", "agent", "exactly one of agent.go"},
		{"both agents", strings.Replace(goodSuite, "{go: demo-agent}", "{go: demo-agent, command: [./a]}", 1),
			"agent:", "agent", "exactly one of agent.go"},
		{"bad regex", strings.Replace(goodSuite, `"(?i)hi"`, `"(unclosed"`, 1),
			"(unclosed", "scenarios.0.expect.output", "not a regular expression"},
		{"bad trajectory mode", strings.Replace(goodSuite, "mode: subset", "mode: sorted", 1),
			"mode: sorted", "scenarios.0.expect.trajectory.mode", `"sorted" is not a mode`},
		{"bad status", strings.Replace(goodSuite, "status: succeeded", "status: done", 1),
			"status: done", "scenarios.0.expect.status", `"done" is not a run status`},
		// A golden name golden save refuses could never be saved (adversary finding).
		{"golden name with a space", strings.Replace(goodSuite, "      status: succeeded", "      status: succeeded\n      golden: 'happy path'", 1),
			"happy path", "scenarios.0.expect.golden", "without spaces, control or invisible characters"},
		{"golden required without a golden", strings.Replace(goodSuite, "      status: succeeded", "      status: succeeded\n      golden_required: true", 1),
			"golden_required", "scenarios.0.expect.golden_required", "names no golden"},
		{"bad duration", strings.Replace(goodSuite, "name: demo", "name: demo\ntimeout: soon", 1),
			"timeout: soon", "timeout", "not a duration"},
		// Seconds are plain decimals, as in a config and the headers.
		{"seconds with separators", strings.Replace(goodSuite, "name: demo", "name: demo\ntimeout: 1_000", 1),
			"timeout: 1_000", "timeout", `"1_000" is not a duration (want e.g. 30s, 2m, or a number of seconds)`},
		{"seconds with an exponent", strings.Replace(goodSuite, "name: demo", "name: demo\ntimeout: 1e3", 1),
			"timeout: 1e3", "timeout", `"1e3" is not a duration (want e.g. 30s, 2m, or a number of seconds)`},
		{"money in hex", strings.Replace(goodSuite, "status: succeeded", "status: succeeded\n      max_cost_usd: 0x10", 1),
			"max_cost_usd: 0x10", "scenarios.0.expect.max_cost_usd", `budget: not a dollar amount: "0x10"`},
		{"bad number", strings.Replace(goodSuite, "exit_code: 0", "exit_code: zero", 1),
			"exit_code: zero", "scenarios.0.expect.exit_code", `must be a whole number, not "zero"`},
		{"bad max_cost_usd", strings.Replace(goodSuite, "status: succeeded", "status: succeeded\n      max_cost_usd: lots", 1),
			"max_cost_usd: lots", "scenarios.0.expect.max_cost_usd", ""},
		{"duplicate scenario", strings.Replace(goodSuite, "name: second", "name: first", 1),
			"name: first\n", "scenarios.1.name", "named twice"},
		{"version 2", strings.Replace(goodSuite, "version: 1", "version: 2", 1),
			"version: 2", "version", "this belay reads version 1"},
		// A newer suite may carry fields this belay does not know: the
		// version is what to tell the user about.
		{"version 2 with new fields", strings.Replace(goodSuite, "version: 1", "version: 2\nretries: 3", 1),
			"version: 2", "version", "this belay reads version 1"},
		{"bad approval decision", goodSuite + "approvals:\n  - {tool: issue_refund, decision: maybe}\n",
			"decision: maybe", "approvals.0.decision", "not a decision"},
		{"no scenarios", "version: 1\nagent: {go: a}\nscenarios: []\n", "scenarios", "scenarios", "at least one scenario"},
		// A command agent's tool calls never reach belay: an expectation
		// on them would always fail (called) or check nothing.
		{"trajectory with a command agent", strings.Replace(goodSuite, "{go: demo-agent}", "{command: [./agent]}", 1),
			"trajectory:", "scenarios.0.expect.trajectory", "a command agent runs its own"},
		{"called with a command agent", strings.Replace(strings.Replace(goodSuite, "{go: demo-agent}", "{command: [./agent]}", 1),
			"      trajectory: {mode: subset, tools: [lookup]}\n", "", 1) + "    expect: {called: [lookup]}\n", "called: [lookup]", "scenarios.1.expect.called", "check what it did through its world file"},
		{"not_called with a command agent", strings.Replace(strings.Replace(goodSuite, "{go: demo-agent}", "{command: [./agent]}", 1),
			"      trajectory: {mode: subset, tools: [lookup]}\n", "      not_called: [refund]\n", 1),
			"not_called: [refund]", "scenarios.0.expect.not_called", "in-process Go agent"},
		// Nor would an explicit no_unapproved_irreversible: true (newcomer
		// finding: accepted, checking nothing).
		{"no_unapproved_irreversible with a command agent", strings.Replace(strings.Replace(goodSuite, "{go: demo-agent}", "{command: [./agent]}", 1),
			"      trajectory: {mode: subset, tools: [lookup]}\n", "      no_unapproved_irreversible: true\n", 1),
			"no_unapproved_irreversible: true", "scenarios.0.expect.no_unapproved_irreversible",
			"checks the tool calls of an in-process Go agent (agent.go), whose tools run through belay; " +
				"a command agent runs its own, which belay does not see: check what it did through its world file and expect.check"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeSuite(t, c.text)
			_, err := LoadSuite(path)
			if !errors.Is(err, ErrBadSuite) {
				t.Fatalf("err = %v, want ErrBadSuite", err)
			}
			msg := err.Error()
			marker := strings.TrimSuffix(c.marker, "\n")
			line := lineWith(t, c.text, marker)
			if c.name == "duplicate scenario" {
				line = strings.LastIndex(c.text, "name: first") // second occurrence
				line = strings.Count(c.text[:line], "\n") + 1
			}
			if want := fmt.Sprintf("%s:%d: %s:", path, line, c.field); !strings.Contains(msg, want) {
				t.Errorf("error %q\ndoes not name %q", msg, want)
			}
			if !strings.Contains(msg, c.says) {
				t.Errorf("error %q does not say %q", msg, c.says)
			}
		})
	}
}

func TestLoadSuiteUnreadable(t *testing.T) {
	_, err := LoadSuite(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, ErrBadSuite) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want ErrBadSuite wrapping ErrNotExist", err)
	}
	p := writeSuite(t, "version: 1\nagent: [unclosed\n")
	if _, err := LoadSuite(p); !errors.Is(err, ErrBadSuite) || !strings.Contains(err.Error(), p) {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := LoadSuite(writeSuite(t, "")); !errors.Is(err, ErrBadSuite) {
		t.Errorf("empty file: %v", err)
	}
}

// A gateway config given as the suite is named as such, with what a suite
// needs (newcomer finding: `belay eval belay.yaml` said only "version is
// required"). A suite missing its version is still told about that.
func TestLoadSuiteGatewayConfig(t *testing.T) {
	const cfg = `# belay serve --config belay.yaml
listen: 127.0.0.1:4000
admin_key: env:BELAY_ADMIN_KEY
models:
  - alias: gpt-4o-mini
    deployments:
      - {name: primary, provider: openai, model: gpt-4o-mini, api_key: env:OPENAI_API_KEY}
tenants:
  - {name: acme, key: env:ACME_KEY}
limits: {max_turns: 20}
`
	path := writeSuite(t, cfg)
	_, err := LoadSuite(path)
	want := "bad suite: " + path + ":2: this looks like a gateway config (listen, admin_key, models, tenants, and no scenarios), " +
		"the file of belay serve --config; belay eval takes a suite file, which needs version: 1, agent (go: NAME or command: " +
		"[PROGRAM, …]) and scenarios (a suite runs its agent on a config's deployments with providers: {config: FILE})"
	if !errors.Is(err, ErrBadSuite) || err == nil || err.Error() != want {
		t.Errorf("a gateway config:\ngot  %v\nwant %s", err, want)
	}
	if _, err := LoadSuite("../examples/refund-agent/storm-belay.yaml"); err == nil || !strings.Contains(err.Error(), "this looks like a gateway config (models,") {
		t.Errorf("the example gateway config: %v", err)
	}
	// Not a config: the usual errors.
	for text, says := range map[string]string{
		"runs: 3\nscenarios: [{name: a}]\n":                  "version is required",
		"store: x\nagent: {go: a}\nscenarios: [{name: a}]\n": "version is required",
	} {
		if _, err := LoadSuite(writeSuite(t, text)); err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "gateway config") {
			t.Errorf("%q: %v, want %q", text, err, says)
		}
	}
}

// A command agent's scenario may leave no_unapproved_irreversible out or
// set it false (neither asks belay to check its tools); true is refused
// (TestLoadSuiteErrors).
func TestCommandAgentNoUnapprovedIrreversibleOff(t *testing.T) {
	for _, expect := range []string{"{exit_code: 0}", "{no_unapproved_irreversible: false}"} {
		text := "version: 1\nagent: {command: [./agent]}\nscenarios:\n  - {name: a, expect: " + expect + "}\n"
		if _, err := LoadSuite(writeSuite(t, text)); err != nil {
			t.Errorf("expect %s: %v", expect, err)
		}
	}
}

// A 0 given for a setting whose zero means its default is refused, naming
// the file, line and field, while a key left out (or empty) keeps the
// default (adversary finding: runs: 0 ran 10 runs, timeout: 0 gave 60s).
func TestLoadSuiteExplicitZero(t *testing.T) {
	refusesSuites(t, []suiteRefusal{
		{"runs: 0\n", `:3: runs: must be ≥ 1, not 0 (leave it out for the default, 10)`},
		{"concurrency: 0\n", `:3: concurrency: must be ≥ 1, not 0 (leave it out for the default, 4)`},
		{"timeout: 0\n", `:3: timeout: must be above 0, not 0 (leave it out for the default, 60s)`},
		{"timeout: 0s\n", `:3: timeout: must be above 0, not 0s (leave it out for the default, 60s)`},
		{"providers: {sim: {deployments: 0}}\n", `:3: providers.sim.deployments: must be ≥ 1, not 0 (leave it out for the default, 2)`},
		{"scenarios:\n  - {name: b, runs: 0}\n", `:4: scenarios.0.runs: must be ≥ 1, not 0 (leave it out for the default, the suite's runs)`},
		{"scenarios:\n  - {name: b, <<: {runs: 0}}\n", `:4: scenarios.0.runs: must be ≥ 1, not 0 (leave it out for the default, the suite's runs)`},
	})
	// Left out or empty: the defaults.
	s, err := LoadSuite(writeSuite(t, "version: 1\nagent: {go: demo-agent}\nruns:\ntimeout:\nscenarios: [{name: a, runs: }]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs != 10 || s.Concurrency != 4 || time.Duration(s.Timeout) != 60*time.Second || s.Scenarios[0].Runs != 0 {
		t.Errorf("defaults: runs %d, concurrency %d, timeout %s, scenario runs %d", s.Runs, s.Concurrency, time.Duration(s.Timeout), s.Scenarios[0].Runs)
	}
}

// suiteRefusal is a suite's text after its version and agent lines (one
// scenario is added unless it has scenarios) and the refusal that must
// follow "bad suite: PATH".
type suiteRefusal struct{ text, want string }

// refusesSuites checks that LoadSuite refuses each suite of cases with
// exactly its refusal.
func refusesSuites(t *testing.T, cases []suiteRefusal) {
	t.Helper()
	for _, c := range cases {
		text := "version: 1\nagent: {go: demo-agent}\n" + c.text
		if !strings.Contains(c.text, "scenarios:") {
			text += "scenarios: [{name: a}]\n"
		}
		path := writeSuite(t, text)
		_, err := LoadSuite(path)
		if want := "bad suite: " + path + c.want; !errors.Is(err, ErrBadSuite) || err.Error() != want {
			t.Errorf("%q:\ngot  %v\nwant %s", c.text, err, want)
		}
	}
}

// Sizes past their bounds are refused before anything is allocated for
// them (adversary finding: providers.sim.deployments: 100000000 ran out of
// memory with a Go stack trace).
func TestLoadSuiteSizeBounds(t *testing.T) {
	refusesSuites(t, []suiteRefusal{
		{"providers: {sim: {deployments: 100000000}}\n", `:3: providers.sim.deployments: must be between 1 and 64, not 100000000`},
		{"providers: {sim: {deployments: 65}}\n", `:3: providers.sim.deployments: must be between 1 and 64, not 65`},
		{"providers: {sim: {deployments: -1}}\n", `:3: providers.sim.deployments: must be between 1 and 64, not -1`},
		{"runs: 100001\n", `:3: runs: must be between 1 and 100000, not 100001`},
		{"runs: -3\n", `:3: runs: must be between 1 and 100000, not -3`},
		{"concurrency: 100000000\n", `:3: concurrency: must be between 1 and 1000, not 100000000`},
		{"scenarios:\n  - {name: b, runs: 1000000000}\n", `:4: scenarios.0.runs: must be between 1 and 100000, not 1000000000`},
		{"scenarios:\n  - name: b\n    providers: {sim: {deployments: 1000}}\n", `:5: scenarios.0.providers.sim.deployments: must be between 1 and 64, not 1000`},
	})
	// The bounds themselves are accepted.
	text := "version: 1\nagent: {go: demo-agent}\nruns: 100000\nconcurrency: 1000\nproviders: {sim: {deployments: 64, down: [63]}}\nscenarios: [{name: a}]\n"
	if _, err := LoadSuite(writeSuite(t, text)); err != nil {
		t.Error(err)
	}
}

// A scenario name that cannot be part of its runs' ids is refused, naming
// the scenario, the field, the characters allowed and the length budget
// (adversary finding: "happy path" failed every run as a crash, without a
// word why).
func TestLoadSuiteScenarioNameRunID(t *testing.T) {
	const rule = `: a scenario name is part of its runs' ids (evXXXXXXXXXX-NAME-N, sent as X-Belay-Run-Id), ` +
		`so it may use only letters, digits and . _ : -, at most 109 characters`
	long := strings.Repeat("x", 110)
	for name, want := range map[string]string{
		`"happy path"`: `"happy path" has " "` + rule,
		`"a/../b c"`:   `"a/../b c" has "/"` + rule,
		`"tab\there"`:  `"tab\there" has "\t"` + rule,
		`"café"`:       `"café" has "é"` + rule,
		long:           `"` + long[:40] + `…" is 110 characters` + rule,
	} {
		path := writeSuite(t, "version: 1\nagent: {go: demo-agent}\nscenarios:\n  - {name: ok}\n  - {name: "+name+", input: hi}\n")
		_, err := LoadSuite(path)
		if want := "bad suite: " + path + ":5: scenarios.1.name: " + want; !errors.Is(err, ErrBadSuite) || err.Error() != want {
			t.Errorf("name %s:\ngot  %v\nwant %s", name, err, want)
		}
	}
	// Every character allowed, and the longest name: accepted.
	for _, name := range []string{"a.b_c:d-E9", strings.Repeat("y", 109)} {
		if _, err := LoadSuite(writeSuite(t, "version: 1\nagent: {go: demo-agent}\nscenarios: [{name: "+name+"}]\n")); err != nil {
			t.Errorf("name %s: %v", name, err)
		}
	}
}

// The longest run id, of the longest name at the last run, is the
// gateway's longest (128 characters of letters, digits and . _ : -).
func TestLongestRunID(t *testing.T) {
	id := runID(fmt.Sprintf("ev%x", evalIDMask), strings.Repeat("y", maxScenarioName), MaxRuns-1)
	if len(id) != 128 || !runIDChars.MatchString(id) {
		t.Errorf("longest run id %q: %d characters", id, len(id))
	}
}

// A scenario may lower a limit of its suite, never lift it: a limit above
// the suite's is refused, naming the line and the field; a suite limit of
// 0 (none) takes any. Before, the scenario's limit replaced the suite's,
// and a scenario of max_turns 5 under a suite's 2 ran 5 turns (newcomer
// finding; the README said it could not).
func TestScenarioCannotLiftASuiteLimit(t *testing.T) {
	const head = "version: 1\nagent: {go: a}\nlimits: {max_turns: 2, deadline: 30s, max_cost_usd: \"0.50\", max_tokens: 1000}\n"
	for _, c := range []struct{ key, value, says string }{
		{"max_turns", "5", "5 is above the suite's 2"},
		{"deadline", "1m", "1m0s is above the suite's 30s"},
		{"max_cost_usd", `"0.75"`, "0.75 is above the suite's 0.50"},
		{"max_tokens", "1001", "1001 is above the suite's 1000"},
	} {
		text := head + "scenarios:\n  - name: a\n    limits: {" + c.key + ": " + c.value + "}\n"
		path, msg := suiteError(t, text)
		if want := fmt.Sprintf("%s:%d: scenarios.0.limits.%s: %s", path, lineWith(t, text, "    limits:"), c.key, c.says); !strings.Contains(msg, want) {
			t.Errorf("%s: error %q\ndoes not say %q", c.key, msg, want)
		}
	}
	s, err := LoadSuite(writeSuite(t, head+"scenarios:\n  - name: lower\n    limits: {max_turns: 1, max_cost_usd: \"0.25\"}\n  - name: same\n"))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []store.Limits{
		{MaxTurns: 1, Deadline: 30 * time.Second, MaxCost: budget.Micros(250_000), MaxTokens: 1000},
		{MaxTurns: 2, Deadline: 30 * time.Second, MaxCost: budget.Micros(500_000), MaxTokens: 1000},
	} {
		if got, err := EffectiveLimits(s, &s.Scenarios[i]); err != nil || got != want {
			t.Errorf("scenario %d: %+v, %v; want %+v", i, got, err, want)
		}
	}
	// No suite limit: the scenario's applies.
	s, err = LoadSuite(writeSuite(t, "version: 1\nagent: {go: a}\nscenarios:\n  - name: a\n    limits: {max_turns: 7}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := EffectiveLimits(s, &s.Scenarios[0]); got.MaxTurns != 7 {
		t.Errorf("no suite limit: max_turns %d, want 7", got.MaxTurns)
	}
	// A suite built in code that skips LoadSuite still keeps its limit.
	s.Limits.MaxTurns = 3
	if got, _ := EffectiveLimits(s, &s.Scenarios[0]); got.MaxTurns != 3 {
		t.Errorf("suite in code: max_turns %d, want the suite's 3", got.MaxTurns)
	}
}

// A suite without a name is named after its file: reports showed an empty
// name ("suite  — agent", a JUnit testsuite named "/a"; newcomer finding).
func TestSuiteNameDefaultsToItsFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "checkout-flow.yaml")
	if err := os.WriteFile(p, []byte("version: 1\nagent: {go: a}\nscenarios: [{name: a}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSuite(p)
	if err != nil || s.Name != "checkout-flow" {
		t.Fatalf("name %q, %v; want checkout-flow", s.Name, err)
	}
	named, err := LoadSuite(writeSuite(t, "version: 1\nname: mine\nagent: {go: a}\nscenarios: [{name: a}]\n"))
	if err != nil || named.Name != "mine" {
		t.Fatalf("name %q, %v; want mine", named.Name, err)
	}
}
