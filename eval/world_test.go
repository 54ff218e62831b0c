package eval

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadText(t *testing.T, text string) (*Suite, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadSuite(p)
}

// A world is written to the agent as JSON; a mapping keyed by numbers
// (YAML decodes it as map[any]any, which encoding/json refuses) gets its
// keys as they read in the suite. Found by an adversarial review: the
// world file was silently not written at all.
func TestWorldWithNumberKeys(t *testing.T) {
	s, err := loadText(t, "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nscenarios:\n  - name: a\n    world:\n"+
		"      orders:\n        1001: {status: shipped, lines: [{7: x}]}\n        true: yes\n")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s.Scenarios[0].World)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"orders":{"1001":{"lines":[{"7":"x"}],"status":"shipped"},"true":"yes"}}`; string(b) != want {
		t.Errorf("world JSON = %s, want %s", b, want)
	}
}

// What JSON cannot hold is refused when the suite loads, naming where.
func TestWorldJSONCannotHold(t *testing.T) {
	for _, c := range []struct{ world, want string }{
		{"{balance: .nan}", "scenarios.0.world: cannot be written as JSON for the agent: balance: NaN, a number JSON cannot hold"},
		{"{a: {b: [1, -.inf]}}", "a.b[1]: -Inf, a number JSON cannot hold"},
	} {
		_, err := loadText(t, "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nscenarios:\n  - name: a\n    world: "+c.world+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("world %s: %v; want an error with %q", c.world, err, c.want)
		}
	}
}

// Numbers a suite reads as something else than was written are refused
// (adversarial review): a leading 0 (YAML 1.1 octal: runs: 010 ran 8), a
// duration below a nanosecond (it read as 0: no deadline), an approval
// amount no call can meet.
func TestSuiteNumbersReadAsWritten(t *testing.T) {
	head := "version: 1\nagent: {command: [sh, -c, 'echo hi']}\n"
	for _, c := range []struct{ text, want string }{
		{"runs: 010\nscenarios: [{name: a}]\n", "runs: 010 has a leading 0, which YAML reads as octal (8)"},
		{"limits: {deadline: 0.0000000001}\nscenarios: [{name: a}]\n", `"0.0000000001" is shorter than a nanosecond`},
		{"approvals: [{tool: refund, max_amount_usd: .nan, decision: approve}]\nscenarios: [{name: a}]\n", "approvals.0.max_amount_usd: must be a number ≥ 0, not NaN"},
		{"approvals: [{tool: refund, max_amount_usd: -5, decision: approve}]\nscenarios: [{name: a}]\n", "must be a number ≥ 0, not -5"},
	} {
		if _, err := loadText(t, head+c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", c.text, err, c.want)
		}
	}
	for _, ok := range []string{"runs: 10\n", "runs: 0o10\n", "limits: {deadline: 0}\n", "limits: {deadline: 0.5}\n"} {
		if _, err := loadText(t, head+ok+"scenarios: [{name: a}]\n"); err != nil && !strings.Contains(err.Error(), "leave it out for the default") {
			t.Errorf("%s: %v; want it accepted", ok, err)
		}
	}
}

// clip cuts at a character boundary (adversarial review: a byte cut split
// a multi-byte character in the report).
func TestClipKeepsCharactersWhole(t *testing.T) {
	if got := clip("héllo wörld", 2); got != "h…" {
		t.Errorf("clip = %q, want %q", got, "h…")
	}
	if got := clip("日本語", 4); got != "日…" {
		t.Errorf("clip = %q, want %q", got, "日…")
	}
	if got := clip("abc", 3); got != "abc" {
		t.Errorf("clip = %q, want abc", got)
	}
}

// A suite built in code (no LoadSuite) still gives each run its world,
// encoded once by Run; one that JSON cannot hold is a bad suite.
func TestWorldOfASuiteBuiltInCode(t *testing.T) {
	got := make(chan string, 4)
	name := register(t, agentFunc(func(ctx context.Context, env Env) (int, string, error) {
		got <- string(env.World)
		return 0, "", nil
	}))
	s := &Suite{Version: SuiteVersion, Agent: AgentSpec{Go: name}, Runs: 2,
		Scenarios: []Scenario{{Name: "a", World: map[string]any{"orders": map[string]any{"1001": "shipped"}}}}}
	if _, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if w := <-got; w != `{"orders":{"1001":"shipped"}}` {
			t.Errorf("world %s", w)
		}
	}
	if s.Scenarios[0].worldJSON != nil {
		t.Error("Run changed the caller's suite")
	}
	s.Scenarios[0].World = map[string]any{"x": math.NaN()}
	if _, err := Run(t.Context(), s, (&fakeHarness{}).factory(), Options{}); !errors.Is(err, ErrBadSuite) || !strings.Contains(err.Error(), "scenarios.0.world") {
		t.Errorf("a NaN world: %v; want ErrBadSuite naming scenarios.0.world", err)
	}
}
