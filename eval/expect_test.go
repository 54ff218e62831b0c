package eval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// toolAgent calls the tools named in its input ("lookup refund refund"),
// each through Env.Tools, then answers "done: INPUT".
var toolAgent = agentFunc(func(ctx context.Context, env Env) (int, string, error) {
	for i, name := range strings.Fields(env.Input) {
		if _, err := env.Tools.RunTool(ctx, name, "call-"+string(rune('a'+i)), json.RawMessage(`{}`),
			func(context.Context, string) (json.RawMessage, error) { return json.RawMessage(`{"ok":true}`), nil }); err != nil {
			return 2, "", err
		}
	}
	return 0, "done: " + env.Input, nil
})

// expectCase runs one scenario once and checks whether it passed and why not.
type expectCase struct {
	name     string
	scenario string // YAML of one scenario (indented as a list item)
	script   canned
	reason   string // "" for a pass
}

func runExpectCases(t *testing.T, agent Agent, cases []expectCase) {
	t.Helper()
	name := register(t, agent)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := "version: 1\nname: x\nagent: {go: AGENT}\nruns: 1\ntools: {irreversible: [refund]}\nscenarios:\n" + c.scenario
			s := suiteFor(t, text, name)
			f := &fakeHarness{script: func(string, int) canned { return c.script },
				approval: map[string]string{"refund": trace.ApprovalApproved}}
			rep, err := Run(t.Context(), s, f.factory(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := rep.Outcomes[0]
			if o.Passed != (c.reason == "") || o.Reason != c.reason {
				t.Errorf("passed %v reason %q (failures %q), want reason %q", o.Passed, o.Reason, o.Failures, c.reason)
			}
		})
	}
}

func TestExpectations(t *testing.T) {
	replayed := canned{spans: []trace.Span{toolSpan("refund", trace.ToolReplayed, trace.ApprovalApproved, 10)}}
	executed := canned{spans: []trace.Span{toolSpan("refund", trace.ToolExecuted, trace.ApprovalApproved, 10)}}
	runExpectCases(t, toolAgent, []expectCase{
		{"exit code met", "  - {name: a, input: '', expect: {exit_code: 0}}\n", canned{}, ""},
		{"exit code unmet", "  - {name: a, input: '', expect: {exit_code: 4}}\n", canned{}, "expect.exit_code"},
		{"output met", "  - {name: a, input: lookup, expect: {output: '^done: look'}}\n", canned{}, ""},
		{"output unmet", "  - {name: a, input: lookup, expect: {output: '(?i)refunded'}}\n", canned{}, "expect.output"},
		{"status met", "  - {name: a, input: '', expect: {status: succeeded}}\n", canned{}, ""},
		{"status unmet", "  - {name: a, input: '', expect: {status: succeeded}}\n", canned{status: store.RunFailed}, "expect.status"},
		{"stop reason met", "  - {name: a, input: '', expect: {status: stopped, stop_reason: max_turns_exceeded}}\n",
			canned{status: store.RunStopped, stopReason: "max_turns_exceeded"}, ""},
		// An unexpected stop is reported by its own reason.
		{"stop reason unmet", "  - {name: a, input: '', expect: {stop_reason: max_turns_exceeded}}\n",
			canned{status: store.RunStopped, stopReason: "budget_exceeded"}, "budget_exceeded"},
		{"called met", "  - {name: a, input: lookup refund, expect: {called: [lookup, refund]}}\n", canned{}, ""},
		{"called unmet", "  - {name: a, input: lookup, expect: {called: [lookup, refund]}}\n", canned{}, "expect.called"},
		{"not called met", "  - {name: a, input: lookup, expect: {not_called: [refund]}}\n", canned{}, ""},
		// not_called counts calls whatever their outcome, replays too.
		{"not called unmet by a replay", "  - {name: a, input: lookup, expect: {not_called: [refund]}}\n", replayed, "expect.not_called"},
		// at_most_once counts effects: a replay of a stored result is not a
		// second effect; a second execution is.
		{"at most once with a replay", "  - {name: a, input: refund, expect: {at_most_once: [refund]}}\n", replayed, ""},
		{"at most once broken", "  - {name: a, input: refund, expect: {at_most_once: [refund]}}\n", executed, "expect.at_most_once"},
		{"max turns met", "  - {name: a, input: '', expect: {max_turns: 4}}\n", canned{turns: 4}, ""},
		{"max turns unmet", "  - {name: a, input: '', expect: {max_turns: 4}}\n", canned{turns: 5}, "expect.max_turns"},
		{"max cost met", "  - {name: a, input: '', expect: {max_cost_usd: '0.001'}}\n", canned{cost: "0.001"}, ""},
		{"max cost unmet", "  - {name: a, input: '', expect: {max_cost_usd: '0.001'}}\n", canned{cost: "0.0010001"}, "expect.max_cost_usd"},
		{"trajectory strict met", "  - {name: a, input: lookup refund, expect: {trajectory: {mode: strict, tools: [lookup, refund]}}}\n", canned{}, ""},
		{"trajectory strict order", "  - {name: a, input: refund lookup, expect: {trajectory: {mode: strict, tools: [lookup, refund]}}}\n", canned{}, "expect.trajectory"},
		{"trajectory unordered met", "  - {name: a, input: refund lookup, expect: {trajectory: {mode: unordered, tools: [lookup, refund]}}}\n", canned{}, ""},
		{"trajectory unordered count", "  - {name: a, input: refund lookup lookup, expect: {trajectory: {mode: unordered, tools: [lookup, refund]}}}\n", canned{}, "expect.trajectory"},
		{"trajectory subset met", "  - {name: a, input: lookup email refund, expect: {trajectory: {mode: subset, tools: [lookup, refund]}}}\n", canned{}, ""},
		{"trajectory subset unmet", "  - {name: a, input: lookup email, expect: {trajectory: {mode: subset, tools: [lookup, refund]}}}\n", canned{}, "expect.trajectory"},
		{"trajectory superset met", "  - {name: a, input: lookup, expect: {trajectory: {mode: superset, tools: [lookup, refund]}}}\n", canned{}, ""},
		{"trajectory superset unmet", "  - {name: a, input: lookup email, expect: {trajectory: {mode: superset, tools: [lookup, refund]}}}\n", canned{}, "expect.trajectory"},
		// An irreversible tool that ran without approval fails the run by
		// default, and can be made a reported-only signal.
		{"unapproved irreversible", "  - {name: a, input: '', expect: {exit_code: 0}}\n",
			canned{spans: []trace.Span{toolSpan("refund", trace.ToolExecuted, trace.ApprovalDenied, 1)}}, "expect.no_unapproved_irreversible"},
		{"unapproved irreversible reported only", "  - {name: a, input: '', expect: {exit_code: 0, no_unapproved_irreversible: false}}\n",
			canned{spans: []trace.Span{toolSpan("refund", trace.ToolExecuted, "", 1)}}, ""},
		{"denied irreversible is safe", "  - {name: a, input: '', expect: {exit_code: 0}}\n",
			canned{spans: []trace.Span{toolSpan("refund", trace.ToolDenied, trace.ApprovalDenied, 1)}}, ""},
		// A model call belay gave up on names the failure of a failed run.
		{"model failure", "  - {name: a, input: '', expect: {status: succeeded}}\n",
			canned{status: store.RunFailed, spans: []trace.Span{modelSpan(trace.StatusError, "rate_limited", 1), modelSpan(trace.StatusError, "circuit_open", 2)}}, "circuit_open"},
	})
}

func modelSpan(status trace.Status, reason string, seq int) trace.Span {
	s := toolSpan("", "", "", seq)
	s.Kind, s.Name, s.Status = trace.KindModel, "chat m", status
	s.Attrs = map[string]any{trace.AttrFailureReason: reason}
	return s
}

// TestUnsafeOutcome: an executed irreversible tool without approval marks
// the outcome unsafe; an approved one, a replay or a reversible tool do not.
func TestUnsafeOutcome(t *testing.T) {
	spans := []trace.Span{
		toolSpan("refund", trace.ToolExecuted, trace.ApprovalApproved, 1),
		toolSpan("refund", trace.ToolReplayed, "", 2),
		toolSpan("lookup", trace.ToolExecuted, "", 3),
	}
	if f := toolFacts(spans, []string{"ref*"}); f.unsafe != 0 || f.effects["refund"] != 1 || f.calls["refund"] != 2 {
		t.Errorf("facts %+v", f)
	}
	spans = append(spans, toolSpan("refund", trace.ToolExecuted, trace.ApprovalNotRequired, 4))
	if f := toolFacts(spans, []string{"ref*"}); f.unsafe != 1 || strings.Join(f.called, ",") != "refund,refund,lookup,refund" {
		t.Errorf("facts %+v", f)
	}
}

// TestCheckInProcess: an in-process agent that is a Checker interprets the
// scenario's check itself, for the same run.
func TestCheckInProcess(t *testing.T) {
	agent := checkingAgent{agentFunc: func(ctx context.Context, env Env) (int, string, error) { return 0, env.RunID, nil },
		check: func(env Env, check string) error {
			if check == "good" && strings.HasSuffix(env.RunID, "-a-0") {
				return nil
			}
			return errors.New("world is wrong for " + env.RunID)
		}}
	runExpectCases(t, agent, []expectCase{
		{"check passes", "  - {name: a, input: '', expect: {check: good}}\n", canned{}, ""},
		{"check fails", "  - {name: a, input: '', expect: {check: bad}}\n", canned{}, "expect.check"},
	})
}

// TestCheckCommand: without a Checker, the check is a shell command run in
// the suite's folder with the run's world file in $BELAY_WORLD; a command
// agent gets the scenario's world fixture written there.
func TestCheckCommand(t *testing.T) {
	text := `version: 1
name: x
agent: {command: [sh, -c, 'echo "refunds=1" >> "$BELAY_WORLD"']}
runs: 2
scenarios:
  - name: passes
    world: {order: A-1}
    expect: {exit_code: 0, check: 'grep -q "A-1" "$BELAY_WORLD" && grep -q "refunds=1" "$BELAY_WORLD"'}
  - name: fails
    expect: {exit_code: 0, check: 'grep -q "refunds=2" "$BELAY_WORLD" || { echo "no second refund in $(basename $BELAY_WORLD)"; exit 1; }'}
`
	rep, err := Run(t.Context(), suiteFor(t, text, ""), (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rep.Outcomes {
		wantPass := o.Scenario == "passes"
		if o.Passed != wantPass {
			t.Errorf("%s #%d: passed %v (%q)", o.Scenario, o.Index, o.Passed, o.Failures)
		}
		if !wantPass && (o.Reason != "expect.check" || !strings.Contains(strings.Join(o.Failures, ";"), "no second refund in "+o.RunID)) {
			t.Errorf("%s: reason %q failures %q: want expect.check with the command's output", o.Scenario, o.Reason, o.Failures)
		}
	}
}

// TestGolden: a run is compared with the scenario's golden trace when one
// is saved; a mismatch is a signal, and a failure with golden_required.
func TestGolden(t *testing.T) {
	good := []trace.Span{
		{TraceID: "t", SpanID: "run", Kind: trace.KindRun, Name: "invoke_agent x", Status: trace.StatusOK},
		toolSpan("lookup", trace.ToolExecuted, "", 1),
	}
	golden, err := trace.Canonical(good)
	if err != nil {
		t.Fatal(err)
	}
	other := []trace.Span{good[0], toolSpan("refund", trace.ToolExecuted, "", 1)}
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) { return 0, "", nil }))
	text := `version: 1
name: x
agent: {go: AGENT}
runs: 2
scenarios:
  - {name: signal, expect: {golden: g}}
  - {name: required, expect: {golden: g, golden_required: true}}
  - {name: unsaved, expect: {golden: none-saved}}
  - {name: required-unsaved, expect: {golden: none-saved, golden_required: true}}
`
	f := &fakeHarness{golden: map[string][]byte{"g": golden}, script: func(_ string, i int) canned {
		if i == 0 {
			return canned{spans: good}
		}
		return canned{spans: other}
	}}
	rep, err := Run(t.Context(), suiteFor(t, text, name), f.factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rep.Outcomes {
		if o.Scenario == "required-unsaved" {
			// A required golden that is not there fails the run, saying so.
			if o.Passed || o.Reason != "expect.golden" || len(o.Failures) != 1 || !strings.Contains(o.Failures[0], "golden none-saved is not in the store") || o.GoldenChecked {
				t.Errorf("%s #%d: passed %v reason %q failures %q checked %v", o.Scenario, o.Index, o.Passed, o.Reason, o.Failures, o.GoldenChecked)
			}
			continue
		}
		mismatch := o.Index == 1 && o.Scenario != "unsaved"
		if o.GoldenChecked != (o.Scenario != "unsaved") || o.GoldenMismatch != mismatch {
			t.Errorf("%s #%d: checked %v mismatch %v", o.Scenario, o.Index, o.GoldenChecked, o.GoldenMismatch)
		}
		if mismatch && !strings.Contains(o.GoldenDiff, "refund") {
			t.Errorf("%s #%d: diff %q does not show the changed tool", o.Scenario, o.Index, o.GoldenDiff)
		}
		wantFail := mismatch && o.Scenario == "required"
		if o.Passed == wantFail || (wantFail && o.Reason != "expect.golden") {
			t.Errorf("%s #%d: passed %v reason %q", o.Scenario, o.Index, o.Passed, o.Reason)
		}
	}
	for _, sc := range rep.Scenarios {
		want := map[string]float64{"signal": 0.5, "required": 0.5, "unsaved": 0, "required-unsaved": 0}[sc.Name]
		if sc.GoldenMismatch != want {
			t.Errorf("%s: golden mismatch rate %v, want %v", sc.Name, sc.GoldenMismatch, want)
		}
	}
	if rep.Overall.GoldenChecked != 4 || rep.Overall.GoldenMismatch != 0.5 {
		t.Errorf("overall golden: checked %d, mismatch rate %v; want 4, 0.5", rep.Overall.GoldenChecked, rep.Overall.GoldenMismatch)
	}
}

// TestOutputAnchorsIgnoreTrailingNewlines: expect.output matches the
// output as it is or without its trailing newlines, so "^hi$" passes an
// agent that prints "hi\n" (and "\r\n"), and still fails one that prints
// more (the "\n$" form is TestCommandHangAndCrash's).
func TestOutputAnchorsIgnoreTrailingNewlines(t *testing.T) {
	text := `version: 1
name: x
agent: {command: [sh, -c, 'case "$BELAY_INPUT" in crlf) printf "hi\r\n\r\n";; more) printf "hi there\n";; *) echo hi;; esac']}
runs: 1
scenarios:
  - {name: lf, input: lf, expect: {output: '^hi$'}}
  - {name: crlf, input: crlf, expect: {output: '^hi$'}}
  - {name: more, input: more, expect: {output: '^hi$'}}
`
	rep, err := Run(t.Context(), suiteFor(t, text, ""), (&fakeHarness{}).factory(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Outcomes) != 3 {
		t.Fatalf("%d outcomes", len(rep.Outcomes))
	}
	for _, o := range rep.Outcomes {
		if want := o.Scenario != "more"; o.Passed != want {
			t.Errorf("%s: passed %v, want %v (output %q, failures %q)", o.Scenario, o.Passed, want, o.Output, o.Failures)
		}
	}
}
