package eval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
)

const hangSuite = `version: 1
name: hang
agent: {go: AGENT}
runs: 2
concurrency: 2
timeout: 10s
scenarios:
  - name: respects-context
    input: wait
  - name: ignores-context
    input: ignore
  - name: panics
    input: panic
  - name: errors
    input: error
  - name: fine
    input: ok
    expect: {exit_code: 0, output: "^ok$"}
`

// TestInProcessHangAndCrash: an agent that hangs is stopped at its timeout
// and counted as a failure with reason timeout, whether or not it honours
// its context; an agent that panics or fails is a failed run with reason
// crash, and the runner goes on (issue 5).
func TestInProcessHangAndCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) {
			switch env.Input {
			case "wait":
				<-ctx.Done()
				return 1, "", ctx.Err()
			case "ignore":
				<-release // ignores ctx entirely
				return 0, "late", nil
			case "panic":
				panic("agent bug")
			case "error":
				return 2, "", errBoom
			}
			return 0, "ok", nil
		}))
		f := &fakeHarness{}
		start := time.Now()
		rep, err := Run(t.Context(), suiteFor(t, hangSuite, name), f.factory(), Options{})
		close(release)
		if err != nil {
			t.Fatal(err)
		}
		// Two workers, ten runs, four of which hang for the 10s timeout.
		if got := time.Since(start); got != 20*time.Second {
			t.Errorf("suite took %s, want 20s (two rounds of 10s timeouts)", got)
		}
		want := map[string]string{"respects-context": "timeout", "ignores-context": "timeout", "panics": "crash", "errors": "crash", "fine": ""}
		for sc, reason := range want {
			os := outcomesOf(rep, sc)
			if len(os) != 2 {
				t.Fatalf("%s: %d outcomes, want 2", sc, len(os))
			}
			for _, o := range os {
				if o.Passed != (reason == "") || o.Reason != reason {
					t.Errorf("%s #%d: passed %v reason %q (%v), want reason %q", sc, o.Index, o.Passed, o.Reason, o.Failures, reason)
				}
				if reason == "timeout" && o.Latency != 10*time.Second {
					t.Errorf("%s #%d: latency %s, want 10s", sc, o.Index, o.Latency)
				}
				if reason != "" && o.Status != string(store.RunFailed) {
					t.Errorf("%s #%d: run status %q, want failed", sc, o.Index, o.Status)
				}
			}
		}
		if o := outcomesOf(rep, "panics")[0]; !strings.Contains(strings.Join(o.Failures, ";"), "agent bug") {
			t.Errorf("panic failure does not say what panicked: %v", o.Failures)
		}
		if rep.Overall.FailuresByReason["timeout"] != 4 || rep.Overall.FailuresByReason["crash"] != 4 {
			t.Errorf("failures by reason %v, want timeout 4 and crash 4", rep.Overall.FailuresByReason)
		}
		if f.closed.Load() != 1 {
			t.Errorf("harness closed %d times, want 1", f.closed.Load())
		}
	})
}

const commandSuite = `version: 1
name: commands
agent: {command: [sh, -c, 'case "$BELAY_INPUT" in sleep) exec sleep 30;; exit3) printf "stack line 1\\nError: 400 messages: must be a non-empty array\\n" >&2; exit 3;; *) echo "hello $BELAY_SCENARIO";; esac']}
runs: 1
timeout: 1s
scenarios:
  - name: hangs
    input: sleep
  - name: exits-3
    input: exit3
  - name: exits-3-expected
    input: exit3
    expect: {exit_code: 3}
  - name: says-hello
    input: hi
    expect: {exit_code: 0, output: "^hello says-hello\n$"}
`

// TestCommandHangAndCrash: a command agent that hangs is killed at its
// timeout (reason timeout); one that exits non-zero is a failed run, not a
// failure of the runner (issue 5).
func TestCommandHangAndCrash(t *testing.T) {
	s := suiteFor(t, commandSuite, "")
	start := time.Now()
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("suite took %s: the sleeping agent was not killed at its 1s timeout", d)
	}
	by := map[string]Outcome{}
	for _, o := range rep.Outcomes {
		by[o.Scenario] = o
	}
	if o := by["hangs"]; o.Passed || o.Reason != "timeout" || o.Latency < time.Second {
		t.Errorf("hangs: passed %v reason %q latency %s (%v)", o.Passed, o.Reason, o.Latency, o.Failures)
	}
	if o := by["exits-3"]; o.Passed || o.Reason != "crash" || o.ExitCode != 3 || o.Status != "failed" {
		t.Errorf("exits-3: passed %v reason %q exit %d status %q (%v)", o.Passed, o.Reason, o.ExitCode, o.Status, o.Failures)
	} else if want := "exit: the agent exited with code 3; its stderr ended: stack line 1 ⏎ Error: 400 messages: must be a non-empty array"; len(o.Failures) == 0 || o.Failures[0] != want {
		t.Errorf("exits-3 failures %q; want first %q", o.Failures, want)
	}
	if o := by["exits-3-expected"]; !o.Passed || o.ExitCode != 3 {
		t.Errorf("exits-3-expected: passed %v exit %d (%v)", o.Passed, o.ExitCode, o.Failures)
	}
	if o := by["says-hello"]; !o.Passed || o.Output != "hello says-hello\n" {
		t.Errorf("says-hello: passed %v output %q (%v)", o.Passed, o.Output, o.Failures)
	}
}

func TestRunUnknownAgent(t *testing.T) {
	s := suiteFor(t, hangSuite, "no-such-agent-registered")
	_, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if !errors.Is(err, ErrBadSuite) || !strings.Contains(err.Error(), "no-such-agent-registered") || !strings.Contains(err.Error(), s.Path) {
		t.Errorf("err = %v, want ErrBadSuite naming the file and the agent", err)
	}
}

func TestRunHarnessCannotStart(t *testing.T) {
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) { return 0, "", nil }))
	broken := errors.New("no providers")
	_, err := Run(t.Context(), suiteFor(t, hangSuite, name), func(context.Context, *Suite, Providers) (Harness, error) {
		return nil, broken
	}, Options{})
	if !errors.Is(err, broken) {
		t.Errorf("err = %v, want the factory's error", err)
	}
}

const setupSuite = `version: 1
name: setups
agent: {go: AGENT}
runs: 3
limits: {max_turns: 8, deadline: 60s, max_cost_usd: "0.05"}
providers: {sim: {profile: none}}
scenarios:
  - name: default-setup
  - name: own-setup
    runs: 2
    limits: {max_turns: 5, max_tokens: 900}
    providers: {sim: {profile: none, down: [0]}}
  - name: same-as-default
    providers: {sim: {profile: none}}
`

// TestRunSetupsAndLimits: one harness per distinct provider setup, each
// closed once; scenario limits override the suite's field by field; runs
// per scenario follow scenario, suite and Options in that order.
func TestRunSetupsAndLimits(t *testing.T) {
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) { return 0, "", nil }))
	s := suiteFor(t, setupSuite, name)
	var mu sync.Mutex
	var setups []Providers
	var hs []*fakeHarness
	factory := func(_ context.Context, _ *Suite, p Providers) (Harness, error) {
		mu.Lock()
		defer mu.Unlock()
		setups = append(setups, p)
		h := &fakeHarness{}
		hs = append(hs, h)
		return h, nil
	}
	rep, err := Run(t.Context(), s, factory, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(setups) != 2 {
		t.Fatalf("factory called for %d setups (%+v), want 2", len(setups), setups)
	}
	for _, h := range hs {
		if h.closed.Load() != 1 {
			t.Errorf("a harness was closed %d times, want 1", h.closed.Load())
		}
	}
	runs := map[string]int{}
	for _, o := range rep.Outcomes {
		runs[o.Scenario]++
	}
	if runs["default-setup"] != 3 || runs["own-setup"] != 2 || runs["same-as-default"] != 3 {
		t.Errorf("runs per scenario %v", runs)
	}
	var own, def store.Limits
	for _, h := range hs {
		if l, ok := h.limits["own-setup"]; ok {
			own = l
		}
		if l, ok := h.limits["default-setup"]; ok {
			def = l
		}
	}
	want := store.Limits{MaxTurns: 8, Deadline: time.Minute, MaxCost: budget.Micros(50_000)}
	if def != want {
		t.Errorf("suite limits %+v, want %+v", def, want)
	}
	want.MaxTurns, want.MaxTokens = 5, 900
	if own != want {
		t.Errorf("scenario limits %+v, want %+v", own, want)
	}

	rep, err = Run(t.Context(), s, factory, Options{Runs: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Outcomes) != 12 {
		t.Errorf("Options.Runs 4: %d runs, want 12", len(rep.Outcomes))
	}
}

// TestRunSeeds: each run gets a seed derived from the suite seed, its
// scenario and index; Options.Seed overrides the suite seed.
func TestRunSeeds(t *testing.T) {
	var mu sync.Mutex
	seeds := map[string]int64{}
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) {
		mu.Lock()
		defer mu.Unlock()
		seeds[env.Scenario+"/"+string(rune('0'+env.Index))] = env.Seed
		return 0, "", nil
	}))
	s := suiteFor(t, setupSuite, name)
	collect := func(opt Options) map[string]int64 {
		mu.Lock()
		clear(seeds)
		mu.Unlock()
		rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), opt)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int64{}
		for k, v := range seeds {
			out[k] = v
		}
		if len(out) != len(rep.Outcomes) {
			t.Fatalf("%d seeds for %d runs", len(out), len(rep.Outcomes))
		}
		return out
	}
	a, b := collect(Options{}), collect(Options{})
	other := int64(99)
	c := collect(Options{Seed: &other})
	distinct := map[int64]bool{}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: seed %d then %d: not reproducible", k, v, b[k])
		}
		if c[k] == v {
			t.Errorf("%s: Options.Seed did not change the run seed", k)
		}
		distinct[v] = true
	}
	if len(distinct) != len(a) {
		t.Errorf("%d distinct seeds over %d runs", len(distinct), len(a))
	}
}

// Options.Seed is the suite's seed for the evaluation: the harness
// factory (whose simulators draw faults and replies from it) gets it, and
// the report names it. Without it the factory gets the suite file's.
func TestRunSeedReachesTheHarness(t *testing.T) {
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) { return 0, "", nil }))
	s := suiteFor(t, setupSuite, name)
	var mu sync.Mutex
	var got []int64
	factory := func(_ context.Context, su *Suite, _ Providers) (Harness, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, su.Seed)
		return &fakeHarness{}, nil
	}
	other := s.Seed + 424242
	rep, err := Run(t.Context(), s, factory, Options{Seed: &other})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != other || got[1] != other {
		t.Errorf("factory saw seeds %v; want [%d %d]", got, other, other)
	}
	if rep.Seed != other {
		t.Errorf("report seed %d; want %d", rep.Seed, other)
	}
	got = nil
	if _, err := Run(t.Context(), s, factory, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != s.Seed {
		t.Errorf("without Options.Seed the factory saw %v; want the suite's %d", got, s.Seed)
	}
}

// A scenario whose own provider setup cannot be built fails the
// evaluation before its first run, naming the scenario (the README's
// promise for every setup; its runs used to fail one by one, and eval
// exited 0), and closes the harnesses it built, also when the factory
// returned a typed nil with its error.
func TestRunScenarioSetupFails(t *testing.T) {
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) {
		t.Error("an agent ran although a scenario's setup could not be built")
		return 0, "", nil
	}))
	s := suiteFor(t, setupSuite, name)
	var good []*fakeHarness
	factory := func(_ context.Context, _ *Suite, p Providers) (Harness, error) {
		if p.Sim != nil && len(p.Sim.Down) > 0 { // own-setup's
			var h *fakeHarness
			return h, errors.New("providers.sim.script: no such file")
		}
		h := &fakeHarness{}
		good = append(good, h)
		return h, nil
	}
	rep, err := Run(t.Context(), s, factory, Options{})
	if err == nil || !strings.Contains(err.Error(), `scenario "own-setup": providers: providers.sim.script: no such file`) {
		t.Fatalf("Run = %v, %v; want the scenario's setup error", rep, err)
	}
	if len(good) != 1 || good[0].closed.Load() != 1 {
		t.Errorf("%d good harnesses; want 1, closed once", len(good))
	}
}

func TestRunCanceled(t *testing.T) {
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) { return 0, "", nil }))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Run(ctx, suiteFor(t, setupSuite, name), (&fakeHarness{}).factory(), Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestRegisterAgent(t *testing.T) {
	a := agentFunc(func(ctx context.Context, env Env) (int, string, error) { return 0, "", nil })
	name := register(t, a)
	func() {
		defer func() {
			if p := recover(); p == nil || !strings.Contains(p.(string), name) {
				t.Errorf("a second registration of %q: panic %v, want one naming it", name, p)
			}
		}()
		RegisterAgent(name, a)
	}()
	if _, err := lookupAgent(name); err != nil {
		t.Error(err)
	}
	if _, err := lookupAgent(name + "-missing"); err == nil || !strings.Contains(err.Error(), name) {
		t.Errorf("lookup of a missing agent: %v, want an error listing the registered ones", err)
	}
}

func TestRunProgress(t *testing.T) {
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) { return 0, "", nil }))
	var buf strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	if _, err := Run(t.Context(), suiteFor(t, setupSuite, name), (&fakeHarness{}).factory(), Options{Progress: w}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "runs") {
		t.Errorf("progress output %q lacks the bar", buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestCommandAgentsLiteral: the two command agents of issue 5 as written
// there, each the whole suite's agent.
func TestCommandAgentsLiteral(t *testing.T) {
	for _, c := range []struct {
		command, reason string
		exit            int
	}{
		{`[sleep, "30"]`, "timeout", -1},
		{`[sh, -c, "exit 3"]`, "crash", 3},
	} {
		t.Run(c.reason, func(t *testing.T) {
			s := suiteFor(t, "version: 1\nagent: {command: "+c.command+"}\nruns: 2\ntimeout: 1s\nscenarios: [{name: a}]\n", "")
			start := time.Now()
			rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s", d)
			}
			for _, o := range rep.Outcomes {
				if o.Passed || o.Reason != c.reason || o.ExitCode != c.exit || o.Status != "failed" {
					t.Errorf("#%d: passed %v reason %q exit %d status %q (%v)", o.Index, o.Passed, o.Reason, o.ExitCode, o.Status, o.Failures)
				}
			}
			if rep.Overall.FailuresByReason[c.reason] != 2 {
				t.Errorf("failures by reason %v", rep.Overall.FailuresByReason)
			}
		})
	}
}

// A command agent whose program cannot be started is a bad suite, refused
// before any run (it would fail every run as a crash, and the evaluation
// exit 0); a script in the suite's folder is found there.
func TestRunCommandProgramMissing(t *testing.T) {
	for _, c := range []struct{ prog, says string }{
		{"no-such-program-belay", `program "no-such-program-belay" is not in PATH`},
		{"./agent.sh", `program "./agent.sh": `},
		{"./notexec.sh", `program "./notexec.sh" is not executable`},
	} {
		text := strings.Replace(commandSuite, "[sh, -c, 'case", "["+c.prog+", 'case", 1)
		path := writeSuite(t, text)
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), "notexec.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := LoadSuite(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
		if !errors.Is(err, ErrBadSuite) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "agent.command") {
			t.Errorf("%s: err = %v; want ErrBadSuite on agent.command saying %q", c.prog, err, c.says)
		}
	}
	text := strings.Replace(commandSuite, "[sh, -c, 'case", "[./agent.sh, 'case", 1)
	path := writeSuite(t, text)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "agent.sh"), []byte("#!/bin/sh\neval \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSuite(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomesOf(rep, "says-hello"); len(o) != 1 || !o[0].Passed {
		t.Errorf("the script in the suite's folder: %+v", o)
	}
}

func TestStderrTail(t *testing.T) {
	long := strings.Repeat("x", 400)
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"\n  \n", ""},
		{"a\nb\n\nc\nd\n", "b ⏎ c ⏎ d"},
		{long, "…" + long[100:]},
		// A crash's message far above its last lines leads them.
		{"node:internal/modules/cjs/loader:1228\n  throw err;\n  ^\n\nError: Cannot find module '/tmp/agentx.mjs'\n    at Module._resolveFilename (node:x:1225:15)\n" +
			"    at node:internal/main/run_main_module:28:49 {\n  code: 'MODULE_NOT_FOUND',\n  requireStack: []\n}\n\nNode.js v20.20.2\n",
			"Error: Cannot find module '/tmp/agentx.mjs' ⏎ … ⏎ requireStack: [] ⏎ } ⏎ Node.js v20.20.2"},
		{"panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/tmp/a.go:5 +0x1d\nexit status 2\n",
			"panic: runtime error: index out of range [3] with length 3 ⏎ … ⏎ main.main() ⏎ /tmp/a.go:5 +0x1d ⏎ exit status 2"},
		// An error logged and got past, then a panic: the panic leads.
		{"Error: upstream 429, retrying in 1s\nok now\npanic: nil map\n\ngoroutine 1 [running]:\nmain.main()\n\t/tmp/a.go:5 +0x1d\nexit status 2\n",
			"panic: nil map ⏎ … ⏎ main.main() ⏎ /tmp/a.go:5 +0x1d ⏎ exit status 2"},
		// Python's message is its last line: the traceback's header is
		// left out, and when the last lines are long the message leads.
		{"Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: bad", "File \"a.py\", line 1 ⏎ ValueError: bad"},
		{"Traceback (most recent call last):\n  File \"/tmp/myagent/./agent.py\", line 20, in <module>\n    main()\n" +
			"  File \"/tmp/myagent/./agent.py\", line 13, in main\n    raise RuntimeError(\"asked to crash\")\nRuntimeError: asked to crash\n",
			"File \"/tmp/myagent/./agent.py\", line 13, in main ⏎ raise RuntimeError(\"asked to crash\") ⏎ RuntimeError: asked to crash"},
		{"Traceback (most recent call last):\n  File \"/home/ci/work/agents/support-agent/src/agent.py\", line 20, in <module>\n    main()\n" +
			"  File \"/home/ci/work/agents/support-agent/src/agent.py\", line 13, in main\n    raise RuntimeError(\"asked to crash\")\nRuntimeError: asked to crash\n",
			"RuntimeError: asked to crash ⏎ … ⏎ main() ⏎ File \"/home/ci/work/agents/support-agent/src/agent.py\", line 13, in main ⏎ raise RuntimeError(\"asked to crash\")"},
		// A message that is the only line, or the last of few.
		{"Error: no key\n", "Error: no key"},
		{"starting\nError: no key\n", "starting ⏎ Error: no key"},
	} {
		if got := stderrTail([]byte(c.in)); got != c.want {
			t.Errorf("stderrTail(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

// A suite built in code, or Options, past a size bound is refused before
// a run starts: Run would otherwise make a goroutine per concurrent run
// and a job per run.
func TestRunSizeBounds(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(*Suite)
		opt  Options
		want string
	}{
		"concurrency":   {func(s *Suite) { s.Concurrency = 100_000_000 }, Options{}, "bad suite: PATH: concurrency: must be between 1 and 1000, not 100000000"},
		"scenario runs": {func(s *Suite) { s.Scenarios[1].Runs = 100_001 }, Options{}, "bad suite: PATH: scenarios.1.runs: must be between 1 and 100000, not 100001"},
		"Options.Runs":  {func(*Suite) {}, Options{Runs: 1 << 40}, "eval: Options.Runs 1099511627776: must be between 1 and 100000, or 0 for the suite's runs"},
	} {
		agent := register(t, agentFunc(func(context.Context, Env) (int, string, error) { return 0, "ok", nil }))
		s := suiteFor(t, hangSuite, agent)
		c.edit(s)
		_, err := Run(t.Context(), s, (&fakeHarness{}).factory(), c.opt)
		if want := strings.Replace(c.want, "PATH", s.Path, 1); err == nil || err.Error() != want {
			t.Errorf("%s: err = %v, want %s", name, err, want)
		}
	}
}

// A suite built in code with a scenario name that cannot form a run id is
// refused before a run starts, as LoadSuite refuses it.
func TestRunScenarioNameRunID(t *testing.T) {
	agent := register(t, agentFunc(func(context.Context, Env) (int, string, error) { return 0, "ok", nil }))
	s := suiteFor(t, hangSuite, agent)
	s.Scenarios[2].Name = "happy path"
	_, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	want := "bad suite: " + s.Path + `: scenarios.2.name: "happy path" has " ": a scenario name is part of its runs' ids ` +
		"(evXXXXXXXXXX-NAME-N, sent as X-Belay-Run-Id), so it may use only letters, digits and . _ : -, at most 109 characters"
	if !errors.Is(err, ErrBadSuite) || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// A suite built in code that leaves runs, concurrency and timeout 0 gets
// LoadSuite's defaults (helper finding: concurrency 0 started no worker
// and Run waited forever), and the caller's suite is not changed.
func TestRunCodeSuiteDefaults(t *testing.T) {
	var calls atomic.Int64
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) {
		calls.Add(1)
		return 0, "", nil
	}))
	s := &Suite{Version: SuiteVersion, Agent: AgentSpec{Go: name}, Scenarios: []Scenario{{Name: "a"}}}
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Outcomes) != 10 || calls.Load() != 10 {
		t.Errorf("%d outcomes, %d agent calls; want the default 10 runs", len(rep.Outcomes), calls.Load())
	}
	if s.Runs != 0 || s.Concurrency != 0 || s.Timeout != 0 {
		t.Errorf("Run changed the caller's suite: runs %d, concurrency %d, timeout %v", s.Runs, s.Concurrency, s.Timeout)
	}
}

// An agent's label names the script an interpreter runs, not the
// interpreter (newcomer finding: every [python3, agent.py] agent was
// "python3" in belay runs), and agent.name wins.
func TestAgentLabel(t *testing.T) {
	for _, c := range []struct {
		spec AgentSpec
		want string
	}{
		{AgentSpec{Go: "refund-agent"}, "refund-agent"},
		{AgentSpec{Command: []string{"./bin/agent", "--fast"}}, "agent"},
		{AgentSpec{Command: []string{"python3", "agent.py"}}, "agent.py"},
		{AgentSpec{Command: []string{"/usr/bin/python3", "-u", "src/agent.py", "--x"}}, "agent.py"},
		{AgentSpec{Command: []string{"python3", "-m", "support_agent"}}, "support_agent"},
		{AgentSpec{Command: []string{"node", "dist/agent.mjs"}}, "agent.mjs"},
		{AgentSpec{Command: []string{"deno", "run", "-A", "agent.ts"}}, "agent.ts"},
		{AgentSpec{Command: []string{"uv", "run", "agent.py"}}, "agent.py"},
		{AgentSpec{Command: []string{"sh", "-c", "echo hi"}}, "sh"},
		{AgentSpec{Command: []string{"python3", "-W", "ignore", "agent.py"}}, "agent.py"},
		{AgentSpec{Command: []string{"node", "--require", "dotenv/config", "agent.js"}}, "agent.js"},
		{AgentSpec{Command: []string{"/usr/bin/env", "python3", "agent.py"}}, "agent.py"},
		{AgentSpec{Command: []string{"env", "-S", "DEBUG=1", "python3.12", "src/agent.py"}}, "agent.py"},
		{AgentSpec{Command: []string{"/usr/bin/env", "./bin/agent"}}, "agent"},
		{AgentSpec{Command: []string{"node"}}, "node"},
		{AgentSpec{Command: []string{"python3", "agent.py"}, Name: "support"}, "support"},
		{AgentSpec{}, ""},
	} {
		if got := c.spec.Label(); got != c.want {
			t.Errorf("%+v: Label() = %q, want %q", c.spec, got, c.want)
		}
	}
	// The report and the runs carry it.
	name := register(t, agentFunc(func(context.Context, Env) (int, string, error) { return 0, "ok", nil }))
	s := suiteFor(t, "version: 1\nagent: {go: AGENT, name: support}\nruns: 1\nscenarios: [{name: a}]\n", name)
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil || rep.Agent != "support" {
		t.Errorf("report agent %q (err %v), want support", rep.Agent, err)
	}
}

// An in-process agent that returns belay's refusal (here a denied
// approval) fails with that reason, not "crash", and a scenario that says
// how its run ends judges it (newcomer finding).
func TestAgentReturnsRefusal(t *testing.T) {
	denied := &failure.Error{Kind: failure.Fatal, Reason: failure.ApprovalDenied, Message: "tool delete_user: approval apr_1 denied by rule:default"}
	name := register(t, agentFunc(func(context.Context, Env) (int, string, error) {
		return 1, "", fmt.Errorf("deleting the user: %w", denied)
	}))
	s := suiteFor(t, "version: 1\nagent: {go: AGENT}\nruns: 1\nscenarios: [{name: plain}, {name: expects-exit, expect: {exit_code: 1}}]\n", name)
	rep, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := outcomesOf(rep, "plain")
	if len(o) != 1 || o[0].Passed || o[0].Reason != "approval_denied" || len(o[0].Failures) != 1 ||
		!strings.HasPrefix(o[0].Failures[0], "approval_denied: the agent returned an error: deleting the user: ") {
		t.Errorf("plain: %+v", o)
	}
	if o := outcomesOf(rep, "expects-exit"); len(o) != 1 || !o[0].Passed {
		t.Errorf("expects-exit: %+v", o)
	}
}
