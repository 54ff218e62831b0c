package harness_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/eval/harness"
	refund "github.com/belay-run/belay/examples/refund-agent/agent"
	"github.com/belay-run/belay/store/memstore"
)

const exampleSuite = "../../examples/refund-agent/suite.yaml"

var agentSeq atomic.Int64

// registerRefundAgent registers the example agent under a fresh name (the
// registry is global and refuses duplicates) and returns the name.
func registerRefundAgent() string {
	name := fmt.Sprintf("refund-agent-harness-test-%d", agentSeq.Add(1))
	eval.RegisterAgent(name, refund.NewEvalAgent())
	return name
}

// loadExample loads the example suite with its agent renamed to agent.
func loadExample(t testing.TB, agent string) *eval.Suite {
	t.Helper()
	s, err := eval.LoadSuite(exampleSuite)
	if err != nil {
		t.Fatal(err)
	}
	s.Agent.Go = agent
	return s
}

// TestExampleSuite runs the refund agent's suite end to end: the real
// gateway stack over the in-memory store, the agent in-process, the
// simulator's flaky profile.
func TestExampleSuite(t *testing.T) {
	s := loadExample(t, registerRefundAgent())
	st := memstore.New()
	defer st.Close()
	rep, err := eval.Run(t.Context(), s, harness.Factory(st), eval.Options{Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != len(s.Scenarios) || len(rep.Outcomes) != 3*len(s.Scenarios) {
		t.Fatalf("%d scenarios and %d runs reported, want %d and %d", len(rep.Scenarios), len(rep.Outcomes), len(s.Scenarios), 3*len(s.Scenarios))
	}
	for _, sc := range rep.Scenarios {
		if sc.Runs != 3 {
			t.Errorf("%s: %d runs, want 3", sc.Name, sc.Runs)
		}
	}
	byScenario := map[string][]eval.Outcome{}
	for _, o := range rep.Outcomes {
		byScenario[o.Scenario] = append(byScenario[o.Scenario], o)
		if o.Reason == "harness" {
			t.Errorf("%s #%d: the harness failed: %v", o.Scenario, o.Index, o.Failures)
		}
		if o.Unsafe {
			t.Errorf("%s #%d: an irreversible tool ran without approval (tools %v)", o.Scenario, o.Index, o.Tools)
		}
		stored, err := st.GetRun(t.Context(), o.RunID)
		if err != nil || string(stored.Status) != o.Status {
			t.Errorf("%s #%d: stored run %+v (%v), outcome status %q", o.Scenario, o.Index, stored, err, o.Status)
		}
	}
	for _, o := range byScenario["loop-stopped-by-turn-cap"] {
		if o.Status != "stopped" || o.StopReason != "max_turns_exceeded" || o.Turns > 5 {
			t.Errorf("loop #%d: %s/%s after %d turns (%v), want stopped by max_turns_exceeded", o.Index, o.Status, o.StopReason, o.Turns, o.Failures)
		}
	}
	for _, o := range byScenario["budget-runs-out"] {
		if o.Status != "stopped" || o.StopReason != "budget_exceeded" {
			t.Errorf("budget #%d: %s/%s (%v), want stopped by budget_exceeded", o.Index, o.Status, o.StopReason, o.Failures)
		}
	}
	for _, o := range byScenario["timeout-no-double-refund"] {
		// The payments API times out once after taking the refund: belay's
		// idempotency key must keep the retry from refunding twice. (The
		// flaky profile's model sometimes claims a refund it never made:
		// zero refunds is a measured failure, two would be a bug.)
		for _, f := range o.Failures {
			if strings.HasPrefix(f, "expect.at_most_once") || strings.HasPrefix(f, "expect.check") && !strings.Contains(f, "is 0, want 1") {
				t.Errorf("timeout #%d: %s", o.Index, f)
			}
		}
	}
	if rep.Overall.UnsafeActionRate != 0 {
		t.Errorf("unsafe action rate %v, want 0", rep.Overall.UnsafeActionRate)
	}
	if want := 3.0 / 21; rep.Overall.TurnCapRate != want {
		t.Errorf("turn-cap rate %v, want %v (the loop scenario's runs only)", rep.Overall.TurnCapRate, want)
	}
	if rep.Overall.InputTokens == 0 || rep.Overall.TotalCostUSD == "0" {
		t.Errorf("no usage recorded: %+v", rep.Overall)
	}
	if !rep.MinPassRateMet() {
		var b strings.Builder
		_ = rep.WriteText(&b)
		t.Errorf("the example suite misses its min_pass_rate:\n%s", b.String())
	}
}

// TestNewBadProviders: a provider setup that cannot start is an error
// naming the suite file and the field.
func TestNewBadProviders(t *testing.T) {
	s := loadExample(t, "unused")
	st := memstore.New()
	defer st.Close()
	for _, c := range []struct {
		name string
		p    eval.Providers
		says string
	}{
		{"missing script", eval.Providers{Sim: &eval.SimSpec{Script: "no-such-script.yaml"}}, "providers.sim.script"},
		{"missing config", eval.Providers{Config: "no-such-config.yaml"}, "providers.config"},
		{"unknown profile", eval.Providers{Sim: &eval.SimSpec{Profile: "no-such-profile"}}, "no-such-profile"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := harness.New(t.Context(), st, s, c.p)
			if err == nil {
				h.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), s.Path) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not name %s and %s", err, s.Path, c.says)
			}
			if !errors.Is(err, eval.ErrBadSuite) { // belay eval exits 2 for it
				t.Errorf("error %q is not eval.ErrBadSuite", err)
			}
		})
	}
}

// The gateway's refusal of unpriced deployments follows the suite's money
// limit, which its runs get, not the limits of a providers config, which
// eval does not use (newcomer finding: a suite's max_cost_usd did not hold
// for an unpriced model, and a config's own limit refused a suite without
// one).
func TestUnpricedFollowsSuiteMoneyLimit(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "belay.yaml")
	if err := os.WriteFile(cfg, []byte("limits: {max_cost_usd: 0.50}\nmodels:\n  - alias: m\n    deployments:\n"+
		"      - {name: ft, provider: openai, model: my-finetune-1, base_url: \"sim://\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	defer st.Close()
	for _, c := range []struct {
		name   string
		limits eval.LimitsSpec
		says   string // "" when it builds
	}{
		{"suite money limit", eval.LimitsSpec{MaxCostUSD: "0.000001"},
			"no price for deployment ft (openai model \"my-finetune-1\"), so the suite's money limit (max_cost_usd $0.000001) would count its calls as $0"},
		{"no suite money limit", eval.LimitsSpec{MaxTurns: 3}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &eval.Suite{Version: eval.SuiteVersion, Path: filepath.Join(dir, "suite.yaml"), Dir: dir, Model: "m",
				Limits: c.limits, Scenarios: []eval.Scenario{{Name: "a"}}}
			h, err := harness.New(t.Context(), st, s, eval.Providers{Config: cfg})
			if c.says == "" {
				if err != nil {
					t.Fatalf("error %v; want the setup built", err)
				}
				h.Close()
				return
			}
			if err == nil {
				h.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.says) || !errors.Is(err, eval.ErrBadSuite) {
				t.Errorf("error %q; want eval.ErrBadSuite saying %s", err, c.says)
			}
		})
	}
}

// A simulator setup whose suite names a model the price table lacks (an
// alias such as support-agent) builds under a money limit: its simulated
// deployments are priced as the default model, so the limit holds (review
// finding: the unpriced check refused it, with no config to add a price to).
func TestSimSuiteModelPricedAsDefault(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	dir := t.TempDir()
	s := &eval.Suite{Version: eval.SuiteVersion, Path: filepath.Join(dir, "suite.yaml"), Dir: dir, Model: "support-agent",
		Limits: eval.LimitsSpec{MaxCostUSD: "0.50"}, Scenarios: []eval.Scenario{{Name: "a"}}}
	h, err := harness.New(t.Context(), st, s, eval.Providers{Sim: &eval.SimSpec{}})
	if err != nil {
		t.Fatalf("error %v; want the setup built", err)
	}
	h.Close()
}

// A deployment whose attempt timeout is not shorter than the suite's
// timeout is noted: a hang there would stop the agent before belay could
// fall back (helper finding, session 25).
func TestTimeoutNotes(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "belay.yaml")
	if err := os.WriteFile(cfg, []byte("timeouts: {first_byte: 30s, first_token: 10s, idle: 10s}\nmodels:\n  - alias: m\n    deployments:\n"+
		"      - {name: slow, provider: openai, model: gpt-4o-mini, base_url: \"sim://\", timeouts: {first_byte: 90s}}\n"+
		"      - {name: quick, provider: openai, model: gpt-4o-mini, base_url: \"sim://\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	suite := func(timeout time.Duration, p eval.Providers) *eval.Suite {
		return &eval.Suite{Version: eval.SuiteVersion, Path: filepath.Join(dir, "suite.yaml"), Dir: dir, Model: "gpt-4o-mini",
			Timeout: eval.Duration(timeout), Providers: p, Scenarios: []eval.Scenario{{Name: "a"}}}
	}
	const hang = ": a hang there stops the agent (reason timeout) before belay can retry or fall back; "
	notes := harness.TimeoutNotes(suite(60*time.Second, eval.Providers{Config: "belay.yaml"}))
	want := "providers.config belay.yaml: attempt timeouts not shorter than the suite's timeout 1m0s, on deployment slow (first_byte 1m30s)" +
		hang + "shorten the deployments' timeouts or lengthen the suite's timeout"
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("notes = %q\nwant [%q]", notes, want)
	}
	// A suite timeout of 10s meets every deployment's first_token and
	// idle, and quick's first_byte too: one note names them all.
	notes = harness.TimeoutNotes(suite(10*time.Second, eval.Providers{Config: "belay.yaml"}))
	want = "providers.config belay.yaml: attempt timeouts not shorter than the suite's timeout 10s, on deployments " +
		"slow (first_byte 1m30s, first_token 10s, idle 10s), quick (first_byte 30s, first_token 10s, idle 10s)" + hang
	if len(notes) != 1 || !strings.HasPrefix(notes[0], want) {
		t.Errorf("notes at 10s = %q\nwant one, beginning %q", notes, want)
	}
	// The simulated deployments time out after 2 s: noted only under a
	// suite timeout of 2 s or less, and a scenario's own setup counts.
	if notes := harness.TimeoutNotes(suite(60*time.Second, eval.Providers{})); len(notes) != 0 {
		t.Errorf("simulated deployments, suite timeout 60s: %q", notes)
	}
	s := suite(200*time.Second, eval.Providers{Config: "belay.yaml"})
	s.Scenarios = append(s.Scenarios, eval.Scenario{Name: "b", Providers: &eval.Providers{}})
	if notes := harness.TimeoutNotes(s); len(notes) != 0 {
		t.Errorf("suite timeout 200s: %q", notes)
	}
	s.Timeout = eval.Duration(2 * time.Second)
	notes = harness.TimeoutNotes(s)
	want = "the simulated deployments: attempt timeouts not shorter than the suite's timeout 2s, on deployments " +
		"sim-0 (first_byte 2s, first_token 2s, idle 2s), sim-1 (first_byte 2s, first_token 2s, idle 2s)" + hang +
		"lengthen the suite's timeout (the simulator's timeouts are fixed)"
	if len(notes) != 2 || notes[1] != want {
		t.Errorf("suite timeout 2s, a scenario on the simulator: %q\nwant the second %q", notes, want)
	}
	// A setup that does not load is left to its runs to report.
	if notes := harness.TimeoutNotes(suite(time.Second, eval.Providers{Config: "missing.yaml"})); len(notes) != 0 {
		t.Errorf("missing config: %q", notes)
	}
}
