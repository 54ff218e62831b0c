package eval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// Outcome is what one run showed.
type Outcome struct {
	Scenario string `json:"scenario"`
	Index    int    `json:"index"`
	RunID    string `json:"run_id"`
	Passed   bool   `json:"passed"`
	// Reason is why a failed run failed: the run's stop reason
	// (max_turns_exceeded, budget_exceeded, …), "timeout", "crash", or the
	// first unmet expectation ("expect.check", …). Empty when it passed.
	Reason   string   `json:"reason,omitempty"`
	Failures []string `json:"failures,omitempty"`

	ExitCode     int           `json:"exit_code"`
	Output       string        `json:"output,omitempty"`
	Status       string        `json:"status,omitempty"`
	StopReason   string        `json:"stop_reason,omitempty"`
	Latency      time.Duration `json:"latency_ns"`
	Cost         budget.USD    `json:"cost_picousd"`
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	Turns        int           `json:"turns"`
	Tools        []string      `json:"tools,omitempty"`
	// Unsafe: an irreversible tool's effect ran without an approval.
	Unsafe bool `json:"unsafe,omitempty"`
	// GoldenChecked/GoldenMismatch: compared with the scenario's golden
	// trace, and it differed (GoldenDiff says how).
	GoldenChecked  bool   `json:"golden_checked,omitempty"`
	GoldenMismatch bool   `json:"golden_mismatch,omitempty"`
	GoldenDiff     string `json:"golden_diff,omitempty"`
	// Interrupted: the eval was interrupted (its context canceled) while
	// the agent ran; the run was stopped (canceled) and is not judged.
	Interrupted bool `json:"-"`
}

// ErrInterrupted is the agent error RunHandle.Finish is given for a run
// the eval's interruption cut short (Ctrl-C): the run is stopped, its
// stop reason canceled, not failed as if the agent had failed.
var ErrInterrupted = errors.New("belay eval was interrupted while the agent ran")

type runner struct {
	suite *Suite
	agent Agent
	seed  int64
	work  string
}

// one runs job j as run runID and judges it.
func (r *runner) one(ctx context.Context, h Harness, j job, runID string) Outcome {
	sc := j.sc
	out := Outcome{Scenario: sc.Name, Index: j.index, RunID: runID}
	limits, err := EffectiveLimits(r.suite, sc)
	if err != nil {
		return failed(out, "harness", err.Error())
	}
	start := time.Now()
	rh, err := h.Start(ctx, sc, runID, limits)
	if err != nil {
		return failed(out, "harness", err.Error())
	}
	env := Env{RunID: runID, Scenario: sc.Name, Index: j.index, Seed: r.seed, Model: r.suite.Model,
		Input: sc.Input, WorldPath: worldPath(r.work, runID)}
	env.World = sc.worldJSON
	rh.Env(&env)

	rctx, cancel := context.WithTimeout(ctx, time.Duration(r.suite.Timeout))
	code, output, outBytes, agentErr := r.execute(rctx, env)
	timedOut := errors.Is(agentErr, errAgentTimeout) || (rctx.Err() == context.DeadlineExceeded && agentErr != nil)
	cancel()
	out.Latency = time.Since(start)
	out.ExitCode, out.Output = code, output

	if ctx.Err() != nil && agentErr != nil {
		// The interruption, not the agent, ended it (an agent that ended
		// by itself first is judged as usual).
		out.Interrupted = true
		rec, _, ferr := rh.Finish(context.WithoutCancel(ctx), code, ErrInterrupted)
		if ferr != nil {
			return failed(out, "harness", "finishing the run: "+ferr.Error())
		}
		out.Status, out.StopReason = string(rec.Status), rec.StopReason
		return failed(out, "interrupted", ErrInterrupted.Error())
	}
	rec, spans, ferr := rh.Finish(ctx, code, agentErr)
	if ferr != nil {
		return failed(out, "harness", "finishing the run: "+ferr.Error())
	}
	out.Status, out.StopReason = string(rec.Status), rec.StopReason
	out.Cost, out.Turns = rec.Cost, rec.Turns
	out.InputTokens, out.OutputTokens = rec.InputTokens, rec.OutputTokens
	facts := toolFacts(spans, r.suite.Tools.Irreversible)
	out.Tools = facts.called
	out.Unsafe = facts.unsafe > 0

	var fails []string
	if timedOut {
		fails = append(fails, fmt.Sprintf("timeout: the agent ran past %s and was stopped", time.Duration(r.suite.Timeout)))
	} else if fe := failure.As(agentErr); fe != nil && !errors.Is(agentErr, errExit) {
		// An in-process agent that gave up on belay's refusal (a denied
		// approval, a limit) did not crash: the failure's reason names
		// it, and a scenario that says how the run ends judges it
		// (newcomer finding: a denied approval read "crash").
		if e := &sc.Expect; e.ExitCode == nil && e.Status == "" && e.StopReason == "" {
			fails = append(fails, fmt.Sprintf("%s: the agent returned an error: %v", fe.Reason, agentErr))
		}
	} else if agentErr != nil && !errors.Is(agentErr, errExit) {
		fails = append(fails, "crash: "+agentErr.Error())
	} else if e := &sc.Expect; errors.Is(agentErr, errExit) && e.ExitCode == nil && e.Status == "" && e.StopReason == "" {
		// A scenario that says nothing about how the run ends expects the
		// agent to exit 0: a command agent that dies is a failed run.
		msg := fmt.Sprintf("exit: the agent exited with code %d", code)
		if ee := (*exitError)(nil); errors.As(agentErr, &ee) {
			msg += ee.stderr()
		}
		fails = append(fails, msg)
	}
	if outBytes > int64(len(output)) {
		// Not judged on a cut output: expect.output could pass or fail
		// on what belay did not keep.
		fails = append(fails, fmt.Sprintf("output: the agent wrote %d bytes on its stdout, more than the %d belay keeps (the first of them are its output): "+
			"an answer is expected to be shorter; write logs on stderr", outBytes, maxAgentOutput))
	}
	fails = append(fails, r.judge(ctx, &out, env, rec, facts)...)
	fails = append(fails, r.golden(ctx, h, &out, spans)...)
	out.Failures = fails
	out.Passed = len(fails) == 0
	if !out.Passed {
		out.Reason = reasonOf(fails, out, r.expect(sc.Name), facts.modelFailure)
	}
	return out
}

func failed(o Outcome, reason, msg string) Outcome {
	o.Reason = reason
	o.Failures = append(o.Failures, msg)
	return o
}

// reasonOf names the failure: timeouts and crashes first, then the run's own
// stop reason unless the scenario expected that stop, then the reason of a
// model call belay gave up on, then an unexpected non-zero exit ("crash"),
// then the first unmet expectation.
func reasonOf(fails []string, o Outcome, e *Expect, modelFailure string) string {
	first := fails[0]
	switch {
	case strings.HasPrefix(first, "timeout:"):
		return "timeout"
	case strings.HasPrefix(first, "crash:"):
		return "crash"
	case o.StopReason != "" && o.StopReason != e.StopReason:
		return o.StopReason
	case modelFailure != "" && o.Status == "failed":
		return modelFailure
	case strings.HasPrefix(first, "exit:"):
		return "crash"
	}
	if i := strings.Index(first, ":"); i > 0 {
		return first[:i]
	}
	return first
}

var errExit = errors.New("agent exited non-zero")

// exitError is errExit with the end of what the command wrote to stderr
// (a stack trace, a refusal it printed), for the run's failure.
type exitError struct{ tail string }

func (e *exitError) Error() string        { return errExit.Error() + e.stderr() }
func (e *exitError) Is(target error) bool { return target == errExit }

// stderr is the words a failure adds for the command's stderr.
func (e *exitError) stderr() string { return "; its stderr ended: " + e.tail }

// stderrTailLines and stderrTailBytes bound what a failed run quotes of a
// command's stderr: its last lines, the end of them when long.
const (
	stderrTailLines = 3
	stderrTailBytes = 300
	// stderrShort is the longest quote of last lines left in their order
	// when a crash's message is among them: the text report shows 200
	// bytes of a run's failures, the first 55 of them the exit's words.
	stderrShort = 140
)

// errorHead matches the line a crash report starts with: Go's "panic:"
// and "fatal error:", Python's "Traceback", and a line that begins with
// an error or exception type (Node's "Error: Cannot find module …",
// "TypeError: …", Java's "Exception in thread …").
var errorHead = regexp.MustCompile(`^(panic: |fatal error: |Traceback |[\w.$]*(Error|Exception)\b)`)

// stderrTail returns the last stderrTailLines non-blank lines of b joined
// by " ⏎ ", cut to its last stderrTailBytes bytes; "" when b has none.
// The line that carries a crash's message (errorHead; the last one) is
// made to show at the quote's start, cut to stderrTailBytes, then
// " ⏎ … ⏎ " and the last lines without it, when it comes before those
// lines (a Node or Go crash ends in its stack, far from its message:
// newcomer finding, only "requireStack: [] ⏎ } ⏎ Node.js v20" was quoted)
// or when it is among them but they are longer than stderrShort (Python's
// ends with its message, which a report line cut short: newcomer finding,
// session 26). Python's "Traceback (most recent call last):", which names
// no error, is not quoted.
func stderrTail(b []byte) string {
	var lines []string
	for _, l := range strings.Split(strings.ToValidUTF8(string(b), "?"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !pythonTraceback(l) {
			lines = append(lines, l)
		}
	}
	// The last such line: an error the agent logged and got past comes
	// before the one it died of (adversarial review).
	at := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if errorHead.MatchString(lines[i]) {
			at = i
			break
		}
	}
	last := max(len(lines)-stderrTailLines, 0)
	head := ""
	if at >= 0 && (at < last || len(strings.Join(lines[last:], " ⏎ ")) > stderrShort) {
		head = lines[at]
		if len(head) > stderrTailBytes {
			head = strings.ToValidUTF8(head[:stderrTailBytes], "") + "…"
		}
		lines = slices.Delete(slices.Clone(lines), at, at+1)
		if len(lines) > 0 {
			head += " ⏎ … ⏎ "
		}
	}
	if len(lines) > stderrTailLines {
		lines = lines[len(lines)-stderrTailLines:]
	}
	t := strings.Join(lines, " ⏎ ")
	if len(t) > stderrTailBytes {
		t = "…" + strings.ToValidUTF8(t[len(t)-stderrTailBytes:], "")
	}
	return head + t
}

// pythonTraceback reports whether line is the first line of a Python
// traceback, which names no error.
func pythonTraceback(line string) bool {
	return strings.HasPrefix(line, "Traceback (most recent call last)")
}

// execute runs the agent once, in-process or as a command.
func (r *runner) execute(ctx context.Context, env Env) (code int, out string, outBytes int64, err error) {
	if r.agent != nil {
		type res struct {
			code int
			out  string
			err  error
		}
		done := make(chan res, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- res{1, "", fmt.Errorf("agent panicked: %v", p)}
				}
			}()
			c, o, err := r.agent.Run(ctx, env)
			done <- res{c, o, err}
		}()
		var x res
		select {
		case x = <-done:
		case <-ctx.Done():
			select {
			case x = <-done: // it returned as its context ended: its result counts
			default:
				// An agent that ignores its context is abandoned, not
				// waited for.
				return -1, "", 0, errAgentTimeout
			}
		}
		if x.err == nil && x.code != 0 {
			x.err = errExit
		}
		if x.err != nil && ctx.Err() == context.DeadlineExceeded {
			x.err = fmt.Errorf("%w: %w", errAgentTimeout, x.err)
		}
		return x.code, x.out, int64(len(x.out)), x.err
	}
	return r.command(ctx, env)
}

// command runs a command agent with belay's addresses in its environment.
// out is the first maxAgentOutput bytes of its stdout, outBytes how many
// it wrote.
func (r *runner) command(ctx context.Context, env Env) (code int, out string, outBytes int64, err error) {
	if env.World != nil {
		if err := os.WriteFile(env.WorldPath, env.World, 0o644); err != nil {
			return -1, "", 0, err
		}
	}
	cmd := exec.CommandContext(ctx, r.suite.Agent.Command[0], r.suite.Agent.Command[1:]...)
	cmd.Dir = r.suite.Dir
	cmd.Env = append(os.Environ(),
		"OPENAI_BASE_URL="+env.BaseURL,
		"ANTHROPIC_BASE_URL="+strings.TrimSuffix(env.BaseURL, "/v1"),
		"OPENAI_API_KEY=belay-eval", "ANTHROPIC_API_KEY=belay-eval",
		"BELAY_RUN_ID="+env.RunID, "BELAY_MODEL="+env.Model, "BELAY_INPUT="+env.Input,
		"BELAY_WORLD="+env.WorldPath, "BELAY_SCENARIO="+env.Scenario, "BELAY_SEED="+strconv.FormatInt(env.Seed, 10))
	for k, v := range r.suite.Agent.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, outBytes, stderr, err := runGroup(cmd, env.Input)
	out = string(stdout)
	if code, ok := ownExit(cmd); ok {
		// The agent ended by itself: its exit decides, even when it ended
		// just as its time ran out.
		if code != 0 {
			if t := stderrTail(stderr); t != "" {
				return code, out, outBytes, &exitError{tail: t}
			}
			return code, out, outBytes, errExit
		}
		return 0, out, outBytes, nil
	}
	if ctx.Err() == context.DeadlineExceeded {
		return -1, out, outBytes, errAgentTimeout
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out, outBytes, errExit // killed by a signal: -1
	}
	if err == nil {
		err = errors.New("the agent ended without an exit status")
	}
	return -1, out, outBytes, err
}

// ownExit returns the exit code of a command whose process has ended by
// itself (not by a signal); ok is false otherwise.
func ownExit(cmd *exec.Cmd) (code int, ok bool) {
	st := cmd.ProcessState
	if st == nil || !st.Exited() {
		return 0, false
	}
	return st.ExitCode(), true
}

// expect returns the expectations of the named scenario.
func (r *runner) expect(name string) *Expect {
	for i := range r.suite.Scenarios {
		if r.suite.Scenarios[i].Name == name {
			return &r.suite.Scenarios[i].Expect
		}
	}
	return &Expect{}
}

// judge checks the scenario's expectations.
func (r *runner) judge(ctx context.Context, o *Outcome, env Env, rec store.Run, f facts) []string {
	e := r.expect(o.Scenario)
	var fails []string
	add := func(name, format string, a ...any) { fails = append(fails, name+": "+fmt.Sprintf(format, a...)) }
	if e.ExitCode != nil && o.ExitCode != *e.ExitCode {
		add("expect.exit_code", "exit code %d, want %d", o.ExitCode, *e.ExitCode)
	}
	// The output matches as it is or without its trailing newlines, as a
	// shell's $(...) takes it: "^hi$" and "^hi\n$" both match "hi\n".
	if e.output != nil && !e.output.MatchString(o.Output) && !e.output.MatchString(strings.TrimRight(o.Output, "\r\n")) {
		add("expect.output", "output %q does not match %q", clip(o.Output, 120), e.Output)
	}
	if e.Status != "" && string(rec.Status) != e.Status {
		got := string(rec.Status)
		if rec.StopReason != "" {
			got += " (" + rec.StopReason + ")"
		}
		if rec.Error != "" {
			got += ": " + clip(rec.Error, 120)
		}
		add("expect.status", "run %s, want %s", got, e.Status)
	}
	if e.StopReason != "" && rec.StopReason != e.StopReason {
		add("expect.stop_reason", "stop reason %q, want %q", rec.StopReason, e.StopReason)
	}
	for _, t := range e.Called {
		if f.calls[t] == 0 {
			add("expect.called", "%s was never called", t)
		}
	}
	for _, t := range e.NotCalled {
		if f.calls[t] > 0 {
			add("expect.not_called", "%s was called %d times", t, f.calls[t])
		}
	}
	for _, t := range e.AtMostOnce {
		if f.effects[t] > 1 {
			add("expect.at_most_once", "%s took effect %d times", t, f.effects[t])
		}
	}
	if e.MaxTurns > 0 && rec.Turns > e.MaxTurns {
		add("expect.max_turns", "%d turns, at most %d allowed", rec.Turns, e.MaxTurns)
	}
	if e.MaxCostUSD != "" {
		if limit, _ := budget.ParseUSD(e.MaxCostUSD); rec.Cost > limit {
			add("expect.max_cost_usd", "cost %s, at most %s allowed", rec.Cost, limit)
		}
	}
	if (e.NoUnapprovedIrreversible == nil || *e.NoUnapprovedIrreversible) && f.unsafe > 0 {
		add("expect.no_unapproved_irreversible", "%d irreversible tool calls ran without approval", f.unsafe)
	}
	if t := e.Trajectory; t != nil {
		if ok, why := trace.MatchTrajectory(t.Tools, f.called, trace.MatchMode(t.Mode)); !ok {
			add("expect.trajectory", "%s", why)
		}
	}
	if e.Check != "" {
		if err := r.check(ctx, env, e.Check); err != nil {
			add("expect.check", "%s: %v", e.Check, err)
		}
	}
	return fails
}

// check runs a scenario's check: in-process agents interpret it
// themselves; otherwise it is a shell command run in the suite's folder.
func (r *runner) check(ctx context.Context, env Env, check string) error {
	if c, ok := r.agent.(Checker); ok && r.agent != nil {
		return c.Check(ctx, env, check)
	}
	// A check that hangs must not hang the suite: it gets the agent's timeout.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(r.suite.Timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", check)
	cmd.Dir = r.suite.Dir
	cmd.Env = append(os.Environ(), "BELAY_WORLD="+env.WorldPath, "BELAY_RUN_ID="+env.RunID)
	stdout, _, stderr, err := runGroup(cmd, "")
	if code, ok := ownExit(cmd); ok && code == 0 {
		return nil // judged by its own exit, whatever it left running
	}
	if err == nil {
		err = errors.New("the check ended without an exit status")
	}
	out := strings.TrimSpace(string(stdout) + string(stderr))
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %s", time.Duration(r.suite.Timeout))
	}
	return fmt.Errorf("%w: %s", err, clip(out, 200))
}

// golden compares the run's canonical trace with the scenario's golden one.
func (r *runner) golden(ctx context.Context, h Harness, o *Outcome, spans []trace.Span) []string {
	var sc *Scenario
	for i := range r.suite.Scenarios {
		if r.suite.Scenarios[i].Name == o.Scenario {
			sc = &r.suite.Scenarios[i]
		}
	}
	if sc == nil || sc.Expect.Golden == "" {
		return nil
	}
	want, err := h.Golden(ctx, sc.Expect.Golden)
	if errors.Is(err, store.ErrNotFound) {
		if sc.Expect.GoldenRequired {
			// A required comparison that a typo or another store turns
			// off would let CI pass checking nothing (newcomer finding).
			return []string{"expect.golden: golden " + sc.Expect.Golden + " is not in the store, and the scenario has golden_required: " +
				"save one (belay trace golden save RUN " + sc.Expect.Golden + ") or give --store the store that holds it"}
		}
		return nil // no golden saved yet: nothing to compare
	}
	if err != nil {
		return []string{"expect.golden: " + err.Error()}
	}
	got, err := trace.Canonical(spans)
	if err != nil {
		return []string{"expect.golden: " + err.Error()}
	}
	o.GoldenChecked = true
	d, err := trace.DiffCanonical(want, got)
	if err != nil {
		return []string{"expect.golden: " + err.Error()}
	}
	if d.Equal() {
		return nil
	}
	o.GoldenMismatch = true
	o.GoldenDiff = d.String()
	if sc.Expect.GoldenRequired {
		return []string{"expect.golden: the trace differs from golden " + sc.Expect.Golden + ":\n" + o.GoldenDiff}
	}
	return nil
}

// EffectiveLimits returns the limits the runs of scenario sc of suite s
// get: the suite's, each lowered by a scenario's limit set below it (a
// suite limit of 0 is none: the scenario's applies). A scenario's limit
// above its suite's is refused by LoadSuite and, in a suite built in
// code, ignored: a scenario never lifts a suite limit. An amount that
// does not parse is an error (LoadSuite has refused it).
func EffectiveLimits(s *Suite, sc *Scenario) (store.Limits, error) {
	lower := func(suite, mine int64) int64 {
		if mine > 0 && (suite == 0 || mine < suite) {
			return mine
		}
		return suite
	}
	out := store.Limits{MaxTurns: s.Limits.MaxTurns, Deadline: time.Duration(s.Limits.Deadline), MaxTokens: s.Limits.MaxTokens}
	if s.Limits.MaxCostUSD != "" {
		c, err := budget.ParseUSD(s.Limits.MaxCostUSD)
		if err != nil {
			return out, err
		}
		out.MaxCost = c
	}
	if sc.Limits == nil {
		return out, nil
	}
	o := sc.Limits
	out.MaxTurns = int(lower(int64(out.MaxTurns), int64(o.MaxTurns)))
	out.Deadline = time.Duration(lower(int64(out.Deadline), int64(o.Deadline)))
	out.MaxTokens = lower(out.MaxTokens, o.MaxTokens)
	if o.MaxCostUSD != "" {
		c, err := budget.ParseUSD(o.MaxCostUSD)
		if err != nil {
			return out, err
		}
		out.MaxCost = budget.USD(lower(int64(out.MaxCost), int64(c)))
	}
	return out, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) { // not inside a character
		n--
	}
	return s[:n] + "…"
}

var _ = filepath.Join
