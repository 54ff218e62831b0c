// Package eval runs scenario suites many times through belay and reports
// what a team needs to decide: pass rates with Wilson intervals, pass^k,
// latency percentiles, cost per success, failures by reason, unsafe actions
// and golden-trace mismatches (`belay eval SUITE`).
package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/decimal"
	"github.com/belay-run/belay/internal/yamlnode"
	"github.com/belay-run/belay/trace"
)

// SuiteVersion is the suite file format this package reads.
const SuiteVersion = 1

// ErrBadSuite is wrapped by every error about a suite file's content.
var ErrBadSuite = errors.New("bad suite")

// The largest values of a suite's sizes, far above what a suite needs: a
// larger value is refused (ErrBadSuite) rather than exhausting memory, as
// each run keeps a record until the report, each concurrent run has a
// goroutine and each simulated deployment is built up front.
const (
	// MaxRuns is the most runs of a scenario: runs, a scenario's runs,
	// Options.Runs (belay eval --runs). Detecting a drop of one point in
	// pass rate from 50% takes about 31,000.
	MaxRuns = 100_000
	// MaxConcurrency is the most runs at once.
	MaxConcurrency = 1_000
	// MaxSimDeployments is the most simulated deployments behind the model
	// alias (providers.sim.deployments).
	MaxSimDeployments = 64
)

// Suite is a parsed suite file. Durations are Go durations ("30s").
//
// A field tagged default:"…" reads its zero as that default; a suite file
// that gives it explicitly as 0 is refused (leaving the key out keeps the
// default), since a 0 written there is a mistake, not a wish for the
// default.
type Suite struct {
	Version   int       `yaml:"version"`
	Name      string    `yaml:"name"`
	Agent     AgentSpec `yaml:"agent"`
	Model     string    `yaml:"model"`
	Providers Providers `yaml:"providers"`
	// Runs is the runs per scenario, ≥ 1; default 10.
	Runs int `yaml:"runs" default:"10"`
	// Concurrency is the runs at once, ≥ 1; default 4.
	Concurrency int   `yaml:"concurrency" default:"4"`
	Seed        int64 `yaml:"seed"`
	// Timeout bounds one run of the agent, and one check; above 0, default
	// 60s.
	Timeout     Duration   `yaml:"timeout" default:"60s"`
	MinPassRate *float64   `yaml:"min_pass_rate"`
	Limits      LimitsSpec `yaml:"limits"`
	Tools       ToolsSpec  `yaml:"tools"`
	Approvals   []Rule     `yaml:"approvals"`
	Scenarios   []Scenario `yaml:"scenarios"`

	// Path is the file the suite came from; Dir its folder (relative paths
	// inside the suite are resolved against it).
	Path string `yaml:"-"`
	Dir  string `yaml:"-"`
}

// AgentSpec names the agent: an in-process Go agent registered with
// RegisterAgent, or a command in any language.
type AgentSpec struct {
	Go      string            `yaml:"go"`
	Command []string          `yaml:"command"`
	Env     map[string]string `yaml:"env"`
	// Name is the agent's name in the report and its runs' records (the
	// AGENT column of belay runs); default Label's.
	Name string `yaml:"name"`
}

// maxAgentName bounds agent.name, in bytes, as the gateway bounds
// X-Belay-Agent.
const maxAgentName = 128

// interpreters are programs that run a script named by their first
// argument that is not a flag (python3 agent.py, node agent.mjs); those in
// launchers take a "run" first (deno run agent.ts, uv run agent.py).
// valueFlags are their flags that take the next argument as a value
// (python3 -W ignore agent.py, node --require dotenv/config agent.js).
var (
	interpreters = []string{"python", "pypy", "node", "nodejs", "deno", "bun", "ruby", "perl", "php",
		"bash", "sh", "zsh", "uv", "tsx", "ts-node"}
	launchers  = []string{"deno", "bun", "uv"}
	valueFlags = []string{"-W", "-X", "-r", "--require", "--import", "--loader", "--experimental-loader", "-I", "--env-file"}
	// pythonN matches versioned names: python3, python3.12, pypy3.10.
	pythonN = regexp.MustCompile(`^(python|pypy)\d+(\.\d+)?$`)
)

// isInterpreter reports whether prog (a program's base name) runs scripts.
func isInterpreter(prog string) bool {
	prog = strings.TrimSuffix(prog, ".exe")
	return slices.Contains(interpreters, prog) || pythonN.MatchString(prog)
}

// Label returns the agent's name for reports and run records: Name when
// set, else the Go agent's name, else the command's program without its
// folder, or, for an interpreter (python3, node, bash, …, after an env
// prefix), the script it runs ("agent.py" for [python3, -u, agent.py] and
// [/usr/bin/env, python3, -W, ignore, agent.py]; "mypkg" for [python3,
// -m, mypkg]; the interpreter for inline code, [sh, -c, …]); "" for none.
func (a AgentSpec) Label() string {
	switch {
	case a.Name != "":
		return a.Name
	case a.Go != "":
		return a.Go
	case len(a.Command) == 0:
		return ""
	}
	cmd := a.Command
	if filepath.Base(cmd[0]) == "env" { // env [-S] [NAME=VALUE …] PROGRAM …
		i := 1
		for i < len(cmd) && (strings.HasPrefix(cmd[i], "-") || strings.Contains(cmd[i], "=")) {
			i++
		}
		if i < len(cmd) {
			cmd = cmd[i:]
		}
	}
	prog := filepath.Base(cmd[0])
	if !isInterpreter(prog) {
		return prog
	}
	args := cmd[1:]
	if len(args) > 0 && args[0] == "run" && slices.Contains(launchers, prog) {
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		switch arg := args[i]; {
		case arg == "-m" && i+1 < len(args):
			return args[i+1]
		case arg == "-c" || arg == "-e" || arg == "--eval" || arg == "-p" || arg == "--print" || arg == "-":
			return prog // inline code, or a script on stdin
		case slices.Contains(valueFlags, arg):
			i++ // the flag's value
		case strings.HasPrefix(arg, "-"):
		default:
			return filepath.Base(arg)
		}
	}
	return prog
}

// Providers says what the agent's model calls reach: the built-in simulator
// (the default) or the deployments of a belay config file.
type Providers struct {
	Sim    *SimSpec `yaml:"sim"`
	Config string   `yaml:"config"`
}

// Key names the setup: two Providers with one Key are the same setup (one
// harness serves both).
func (p Providers) Key() string {
	if p.Sim == nil {
		return "<nil>|" + p.Config
	}
	return fmt.Sprintf("%+v|%s", *p.Sim, p.Config)
}

// SimSpec configures the simulated deployments.
type SimSpec struct {
	// Profile is the fault profile of every simulated deployment ("none").
	Profile string `yaml:"profile"`
	// Script is a file of scripted replies, relative to the suite.
	Script string `yaml:"script"`
	// Deployments is how many simulated deployments back the model alias,
	// in fallback order; ≥ 1, default 2.
	Deployments int `yaml:"deployments" default:"2"`
	// Down lists deployments (0-based) that are fully down.
	Down []int `yaml:"down"`
}

// LimitsSpec bounds each run.
type LimitsSpec struct {
	MaxTurns   int      `yaml:"max_turns"`
	Deadline   Duration `yaml:"deadline"`
	MaxCostUSD string   `yaml:"max_cost_usd"`
	MaxTokens  int64    `yaml:"max_tokens"`
}

// ToolsSpec describes the agent's tools (names are glob patterns).
type ToolsSpec struct {
	// Irreversible tools need an approval (default deny).
	Irreversible []string `yaml:"irreversible"`
	// SafeToRepeat tools may run again with the same idempotency key: their
	// transient failures are retried and an expired key is taken over. Name
	// here tools whose external systems deduplicate by the key belay passes
	// them.
	SafeToRepeat []string `yaml:"safe_to_repeat"`
	// ReadOnly tools have no side effects: their calls are not
	// deduplicated (run.ToolCall.ReadOnly), so a repeated call (a status
	// poll) runs again instead of replaying the first one's result. A
	// tool that is also Irreversible is not read-only.
	ReadOnly []string `yaml:"read_only"`
}

// Rule is one approval rule for the suite's rule-based approver: the first
// rule whose Tool pattern matches (and whose MaxAmount, when set, is not
// exceeded by the call's "amount_usd" argument) decides. No match: deny.
type Rule struct {
	Tool      string   `yaml:"tool"`
	MaxAmount *float64 `yaml:"max_amount_usd"`
	Decision  string   `yaml:"decision"`
}

// Scenario is one task with its expectations.
type Scenario struct {
	// Name is unique in the suite and part of each run's id,
	// "evXXXXXXXXXX-NAME-N", which the gateway takes as X-Belay-Run-Id: it
	// may use only letters, digits and . _ : -, at most 109 characters.
	Name      string         `yaml:"name"`
	Input     string         `yaml:"input"`
	World     map[string]any `yaml:"world"`
	Limits    *LimitsSpec    `yaml:"limits"`
	Providers *Providers     `yaml:"providers"`
	// Runs overrides the suite's runs for this scenario; ≥ 1, default the
	// suite's.
	Runs   int    `yaml:"runs" default:"the suite's runs"`
	Expect Expect `yaml:"expect"`
	// worldJSON is World as the agent gets it, encoded once when the
	// suite loads (nil without a world).
	worldJSON []byte
}

// Expect lists what a run of a scenario must show to pass. Fields left out
// are not checked, with one exception: when none of ExitCode, Status and
// StopReason is given, the agent must exit 0 (a non-zero exit is a failure
// with reason "crash").
type Expect struct {
	ExitCode   *int     `yaml:"exit_code"`
	Output     string   `yaml:"output"`
	Status     string   `yaml:"status"`
	StopReason string   `yaml:"stop_reason"`
	Check      string   `yaml:"check"`
	Called     []string `yaml:"called"`
	NotCalled  []string `yaml:"not_called"`
	AtMostOnce []string `yaml:"at_most_once"`
	MaxTurns   int      `yaml:"max_turns"`
	MaxCostUSD string   `yaml:"max_cost_usd"`
	// NoUnapprovedIrreversible: no irreversible tool ran without approval.
	// Default true; set false to only report it.
	NoUnapprovedIrreversible *bool       `yaml:"no_unapproved_irreversible"`
	Trajectory               *Trajectory `yaml:"trajectory"`
	Golden                   string      `yaml:"golden"`
	// GoldenRequired makes a golden mismatch fail the run; by default it is
	// reported as a signal only.
	GoldenRequired bool `yaml:"golden_required"`

	output *regexp.Regexp
}

// Trajectory is an expected sequence of tool calls.
type Trajectory struct {
	Mode  string   `yaml:"mode"` // strict, unordered, subset, superset
	Tools []string `yaml:"tools"`
}

// Duration is a time.Duration read from YAML as "30s".
type Duration time.Duration

// UnmarshalYAML reads a Go duration ("30s", "2m") or a number of seconds
// written as a plain decimal ("90", "1.5"; no exponent, digit separators
// or base prefix), as a belay config's durations are read.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if f, ferr := strconv.ParseFloat(n.Value, 64); ferr == nil && decimal.Plain(n.Value) && f <= float64(1<<62)/float64(time.Second) {
		v, err = time.Duration(f*float64(time.Second)), nil
	}
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration (want e.g. 30s, 2m, or a number of seconds)", n.Line, n.Value)
	}
	if v == 0 && strings.ContainsAny(n.Value, "123456789") {
		// 0.0000000001 (seconds) or 0.1ns rounds to 0, which means the
		// default or no limit: not what was written.
		return fmt.Errorf("line %d: %q is shorter than a nanosecond, and would read as 0", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// LoadSuite reads and validates a suite file. Errors wrap ErrBadSuite and
// name the file, the line and the field.
func LoadSuite(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSuite, err)
	}
	var root *yaml.Node
	located := func(err error) error {
		var fe *fieldError
		if !errors.As(err, &fe) {
			return fmt.Errorf("%w: %s: %w", ErrBadSuite, path, err)
		}
		line := fe.line
		if line == 0 && root != nil {
			line = lineOf(root, fe.path)
		}
		if len(fe.path) == 0 {
			return fmt.Errorf("%w: %s:%d: %s", ErrBadSuite, path, line, fe.msg)
		}
		return fmt.Errorf("%w: %s:%d: %s: %s", ErrBadSuite, path, line, strings.Join(fe.path, "."), fe.msg)
	}
	root, err = readDocument(b)
	if err != nil {
		return nil, located(err)
	}
	if err := checkNotConfig(root); err != nil {
		return nil, located(err)
	}
	// The version first: a newer suite may use fields this belay lacks.
	if err := checkVersion(root); err != nil {
		return nil, located(err)
	}
	if err := checkFields(root, reflect.TypeFor[Suite](), nil); err != nil {
		return nil, located(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	s := &Suite{}
	if err := dec.Decode(s); err != nil {
		// checkFields has seen every field; this is a last resort.
		return nil, fmt.Errorf("%w: %s: %s", ErrBadSuite, path, plainYAMLError(err))
	}
	s.Path = path
	s.Dir = filepath.Dir(path)
	if strings.TrimSpace(s.Name) == "" {
		// Reports name the suite: the file's name, not an empty one
		// ("suite  — agent", "### belay eval: ", a JUnit testsuite
		// named "/a": a newcomer finding).
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if err := s.validate(); err != nil {
		return nil, located(err)
	}
	return s, nil
}

// fieldError is a problem with one field of a suite: its path (map keys
// and list indexes), and the line when the check knew it (otherwise it is
// looked up from the path).
type fieldError struct {
	path []string
	line int
	msg  string
}

func (e *fieldError) Error() string { return strings.Join(e.path, ".") + ": " + e.msg }

func bad(msg string, path ...string) error { return &fieldError{path: path, msg: msg} }

// badAt is bad at the line of node n.
func badAt(n *yaml.Node, msg string, path ...string) error {
	return &fieldError{path: path, line: n.Line, msg: msg}
}

// setDefaults gives the fields left 0 their defaults: runs 10,
// concurrency 4, timeout 60s, model gpt-4o-mini.
func (s *Suite) setDefaults() {
	if s.Runs == 0 {
		s.Runs = 10
	}
	if s.Concurrency == 0 {
		s.Concurrency = 4
	}
	if s.Timeout == 0 {
		s.Timeout = Duration(60 * time.Second)
	}
	if s.Model == "" {
		s.Model = DefaultModel
	}
}

// DefaultModel is a suite's model when it names none; a simulator setup
// prices a model name the price table lacks as this one.
const DefaultModel = "gpt-4o-mini"

func (s *Suite) validate() error {
	if s.Version != SuiteVersion {
		return bad(fmt.Sprintf("version %d is not understood (this belay reads version %d)", s.Version, SuiteVersion), "version")
	}
	if s.Agent.Go == "" && s.Agent.Command != nil && (len(s.Agent.Command) == 0 || strings.TrimSpace(s.Agent.Command[0]) == "") {
		return bad("names no program: give the program and its arguments, e.g. [python3, agent.py]", "agent", "command")
	}
	if (s.Agent.Go == "") == (len(s.Agent.Command) == 0) {
		return bad("name exactly one of agent.go (an in-process Go agent) or agent.command", "agent")
	}
	if n := s.Agent.Name; n != "" && (strings.TrimSpace(n) != n || len(n) > maxAgentName || strings.IndexFunc(n, unicode.IsControl) >= 0) {
		return bad(fmt.Sprintf("want at most %d bytes of text without control characters or spaces at its ends, not %q",
			maxAgentName, clip(n, 40)), "agent", "name")
	}
	if err := s.checkSizes(); err != nil {
		return err
	}
	s.setDefaults()
	if err := checkMinPassRate(s.MinPassRate); err != nil {
		return err
	}
	if err := s.Providers.validate("providers"); err != nil {
		return err
	}
	if err := s.Limits.validate("limits"); err != nil {
		return err
	}
	for i, r := range s.Approvals {
		p := fmt.Sprintf("approvals[%d]", i)
		if r.Tool == "" {
			return bad("tool is required", "approvals", fmt.Sprint(i), "tool")
		}
		if _, err := filepath.Match(r.Tool, "x"); err != nil {
			return bad(fmt.Sprintf("%s: bad pattern %q", p, r.Tool), "approvals", fmt.Sprint(i), "tool")
		}
		if r.MaxAmount != nil && (math.IsNaN(*r.MaxAmount) || math.IsInf(*r.MaxAmount, 0) || *r.MaxAmount < 0) {
			return bad(fmt.Sprintf("must be a number ≥ 0, not %v (a rule that no amount can meet)", *r.MaxAmount), "approvals", fmt.Sprint(i), "max_amount_usd")
		}
		if r.Decision != "approve" && r.Decision != "deny" {
			return bad(fmt.Sprintf("%q is not a decision (want approve or deny)", r.Decision), "approvals", fmt.Sprint(i), "decision")
		}
	}
	for i, pat := range s.Tools.SafeToRepeat {
		if _, err := filepath.Match(pat, "x"); err != nil {
			// A bad pattern would match no tool, silently.
			return bad(fmt.Sprintf("bad pattern %q", pat), "tools", "safe_to_repeat", fmt.Sprint(i))
		}
	}
	for i, pat := range s.Tools.ReadOnly {
		if _, err := filepath.Match(pat, "x"); err != nil {
			return bad(fmt.Sprintf("bad pattern %q", pat), "tools", "read_only", fmt.Sprint(i))
		}
	}
	if len(s.Scenarios) == 0 {
		return bad("a suite needs at least one scenario", "scenarios")
	}
	seen := map[string]bool{}
	for i := range s.Scenarios {
		if err := s.Scenarios[i].validate(i, seen); err != nil {
			return err
		}
		if l := s.Scenarios[i].Limits; l != nil {
			if err := l.within(&s.Limits, "scenarios", fmt.Sprint(i), "limits"); err != nil {
				return err
			}
		}
		if len(s.Agent.Command) > 0 {
			if err := s.Scenarios[i].Expect.commandAgentCheck(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSizes refuses runs, concurrency and simulated deployments (of the
// suite and of each scenario) below 0 or above their bounds (MaxRuns,
// MaxConcurrency, MaxSimDeployments). 0 is the default; a 0 written in a
// suite file is refused by checkExplicitZero.
func (s *Suite) checkSizes() error {
	if err := inRange(s.Runs, MaxRuns, "runs"); err != nil {
		return err
	}
	if err := inRange(s.Concurrency, MaxConcurrency, "concurrency"); err != nil {
		return err
	}
	if err := s.Providers.checkSizes("providers"); err != nil {
		return err
	}
	for i := range s.Scenarios {
		sc := &s.Scenarios[i]
		at := func(f ...string) []string { return append([]string{"scenarios", fmt.Sprint(i)}, f...) }
		if err := inRange(sc.Runs, MaxRuns, at("runs")...); err != nil {
			return err
		}
		if sc.Providers != nil {
			if err := sc.Providers.checkSizes(at("providers")...); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *Providers) checkSizes(path ...string) error {
	if p.Sim == nil {
		return nil
	}
	return inRange(p.Sim.Deployments, MaxSimDeployments, append(path, "sim", "deployments")...)
}

// inRange refuses a whole-number setting outside [0, most], saying its
// range is [1, most] (0 stands for its default).
func inRange(v, most int, path ...string) error {
	if v < 0 || v > most {
		return bad(fmt.Sprintf("must be between 1 and %d, not %d", most, v), path...)
	}
	return nil
}

// commandAgentCheck refuses the expectations on tool calls in a suite whose
// agent is a command: the command runs its tools itself, so no tool span
// reaches the trace, and called would always fail while not_called,
// at_most_once, trajectory and an explicit no_unapproved_irreversible: true
// would pass without checking anything. (no_unapproved_irreversible left
// out, or false, asks for no check.)
func (e *Expect) commandAgentCheck(i int) error {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"called", len(e.Called) > 0},
		{"not_called", len(e.NotCalled) > 0},
		{"at_most_once", len(e.AtMostOnce) > 0},
		{"trajectory", e.Trajectory != nil},
		{"no_unapproved_irreversible", e.NoUnapprovedIrreversible != nil && *e.NoUnapprovedIrreversible},
	} {
		if f.set {
			return bad("checks the tool calls of an in-process Go agent (agent.go), whose tools run through belay; "+
				"a command agent runs its own, which belay does not see: check what it did through its world file and expect.check",
				"scenarios", fmt.Sprint(i), "expect", f.name)
		}
	}
	return nil
}

// checkMinPassRate accepts no value or a finite number in [0, 1] (NaN
// compares false with everything, so it is refused too).
func checkMinPassRate(v *float64) error {
	if v != nil && !(*v >= 0 && *v <= 1) {
		return bad(fmt.Sprintf("must be a number between 0 and 1, not %v", *v), "min_pass_rate")
	}
	return nil
}

func (p *Providers) validate(path ...string) error {
	if p.Sim != nil && p.Config != "" {
		return bad("name either sim or config, not both", path...)
	}
	if p.Sim != nil {
		for _, d := range p.Sim.Down {
			n := p.Sim.Deployments
			if n == 0 {
				n = 2
			}
			if d < 0 || d >= n {
				return bad(fmt.Sprintf("deployment %d does not exist (0..%d)", d, n-1), append(path, "sim", "down")...)
			}
		}
	}
	return nil
}

func (l *LimitsSpec) validate(path ...string) error {
	if l.MaxTurns < 0 {
		return bad("must be ≥ 0", append(path, "max_turns")...)
	}
	if l.MaxTokens < 0 {
		return bad("must be ≥ 0", append(path, "max_tokens")...)
	}
	if l.MaxCostUSD != "" {
		if _, err := parseUSD(l.MaxCostUSD); err != nil {
			return bad(err.Error(), append(path, "max_cost_usd")...)
		}
	}
	return nil
}

// within refuses a scenario's limit l above the suite's (a suite limit
// of 0 is none, and a scenario may set any): a scenario may lower a limit
// of its suite, never lift it. path names l.
func (l *LimitsSpec) within(suite *LimitsSpec, path ...string) error {
	lift := func(key, have, suiteHas string) error {
		return bad(fmt.Sprintf("%s is above the suite's %s (a scenario can lower a suite limit, not lift it)", have, suiteHas), append(path, key)...)
	}
	if suite.MaxTurns > 0 && l.MaxTurns > suite.MaxTurns {
		return lift("max_turns", fmt.Sprint(l.MaxTurns), fmt.Sprint(suite.MaxTurns))
	}
	if suite.Deadline > 0 && l.Deadline > suite.Deadline {
		return lift("deadline", time.Duration(l.Deadline).String(), time.Duration(suite.Deadline).String())
	}
	if suite.MaxTokens > 0 && l.MaxTokens > suite.MaxTokens {
		return lift("max_tokens", fmt.Sprint(l.MaxTokens), fmt.Sprint(suite.MaxTokens))
	}
	if suite.MaxCostUSD != "" && l.MaxCostUSD != "" {
		sc, err1 := parseUSD(suite.MaxCostUSD)
		mine, err2 := parseUSD(l.MaxCostUSD)
		if err1 == nil && err2 == nil && sc > 0 && mine > sc {
			return lift("max_cost_usd", l.MaxCostUSD, suite.MaxCostUSD)
		}
	}
	return nil
}

var trajectoryModes = []string{"strict", "unordered", "subset", "superset"}

func (sc *Scenario) validate(i int, seen map[string]bool) error {
	at := func(f ...string) []string { return append([]string{"scenarios", fmt.Sprint(i)}, f...) }
	if sc.Name == "" {
		return bad("name is required", at("name")...)
	}
	if err := checkRunIDPart(sc.Name); err != nil {
		return bad(err.Error(), at("name")...)
	}
	if seen[sc.Name] {
		return bad(fmt.Sprintf("scenario %q is named twice", sc.Name), at("name")...)
	}
	seen[sc.Name] = true
	if sc.Limits != nil {
		if err := sc.Limits.validate(at("limits")...); err != nil {
			return err
		}
	}
	if sc.Providers != nil {
		if err := sc.Providers.validate(at("providers")...); err != nil {
			return err
		}
	}
	if sc.World != nil {
		w, err := jsonWorld(sc.World)
		if err == nil {
			sc.World = w.(map[string]any)
			sc.worldJSON, err = json.Marshal(sc.World)
		}
		if err != nil {
			return bad(fmt.Sprintf("cannot be written as JSON for the agent: %v", err), at("world")...)
		}
	}
	e := &sc.Expect
	if e.Output != "" {
		re, err := regexp.Compile(e.Output)
		if err != nil {
			return bad(fmt.Sprintf("not a regular expression: %v", err), at("expect", "output")...)
		}
		e.output = re
	}
	switch e.Status {
	case "", "succeeded", "failed", "stopped":
	default:
		return bad(fmt.Sprintf("%q is not a run status (want succeeded, failed or stopped)", e.Status), at("expect", "status")...)
	}
	if e.StopReason != "" {
		// A stopped run's stop reason is the failure reason that stopped
		// it (run.Run: max_turns_exceeded, budget_exceeded,
		// deadline_exceeded, killed, canceled, …); only a stopped run has
		// one.
		if !failure.Reason(e.StopReason).Known() {
			return bad(fmt.Sprintf("%q is not a stop reason (want one such as max_turns_exceeded, budget_exceeded, deadline_exceeded, killed)", e.StopReason),
				at("expect", "stop_reason")...)
		}
		if e.Status != "" && e.Status != "stopped" {
			return bad(fmt.Sprintf("a %s run has no stop reason: only a stopped run has one (status: stopped, or leave status out)", e.Status),
				at("expect", "stop_reason")...)
		}
	}
	if e.MaxCostUSD != "" {
		if _, err := parseUSD(e.MaxCostUSD); err != nil {
			return bad(err.Error(), at("expect", "max_cost_usd")...)
		}
	}
	if e.MaxTurns < 0 {
		return bad("must be ≥ 0", at("expect", "max_turns")...)
	}
	if e.Golden != "" {
		if err := trace.CheckGoldenName(e.Golden); err != nil {
			return bad(err.Error()+" (the names `belay trace golden save` takes)", at("expect", "golden")...)
		}
	} else if e.GoldenRequired {
		return bad("names no golden: set expect.golden to the golden trace's name", at("expect", "golden_required")...)
	}
	if t := e.Trajectory; t != nil {
		ok := false
		for _, m := range trajectoryModes {
			ok = ok || t.Mode == m
		}
		if !ok {
			return bad(fmt.Sprintf("%q is not a mode (want one of %s)", t.Mode, strings.Join(trajectoryModes, ", ")), at("expect", "trajectory", "mode")...)
		}
	}
	return nil
}

// lineOf finds the line of a dotted path (map keys and sequence indexes) in
// a YAML document, or of the deepest part of it that exists.
func lineOf(root *yaml.Node, path []string) int {
	n := yamlnode.Resolve(root)
	line := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					next = n.Content[i+1]
				}
			}
		case yaml.SequenceNode:
			var idx int
			if _, err := fmt.Sscan(p, &idx); err == nil && idx >= 0 && idx < len(n.Content) {
				next = n.Content[idx]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = yamlnode.Resolve(next)
	}
	return line
}

// jsonWorld returns v, a scenario's world as YAML decoded it, in a form
// encoding/json writes as it reads in the suite: a mapping with keys that
// are not strings (order ids: 1001: {...}; YAML decodes it as
// map[any]any, which encoding/json refuses) gets each key in its YAML
// text (1001 → "1001", true → "true"). It fails on two keys with the same
// text (1 and "1") and on a number JSON cannot hold (.nan, .inf); the
// error names the value's path ("orders.1001.total").
func jsonWorld(v any) (any, error) { return jsonValue(v, "") }

func jsonValue(v any, path string) (any, error) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			n, err := jsonValue(e, join(k))
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
		return x, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks := fmt.Sprint(k)
			if _, dup := out[ks]; dup {
				return nil, fmt.Errorf("%s: two keys read as %q", join(ks), ks)
			}
			n, err := jsonValue(e, join(ks))
			if err != nil {
				return nil, err
			}
			out[ks] = n
		}
		return out, nil
	case []any:
		for i, e := range x {
			n, err := jsonValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s: %v, a number JSON cannot hold", path, x)
		}
	}
	return v, nil
}
