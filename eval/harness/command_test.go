package harness_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/eval/harness"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// agentModeEnv makes the test binary act as a command agent: it reads its
// addresses from the environment belay gives command agents, makes one
// chat completion call per word of $BELAY_INPUT with plain net/http (no
// run header), and prints the last reply.
const agentModeEnv = "BELAY_HARNESS_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentModeEnv) == "1" {
		os.Exit(commandAgent())
	}
	os.Exit(m.Run())
}

func commandAgent() int {
	var reply string
	for range strings.Fields(os.Getenv("BELAY_INPUT")) {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, os.Getenv("BELAY_MODEL"), os.Getenv("BELAY_INPUT"))
		req, err := http.NewRequest(http.MethodPost, os.Getenv("OPENAI_BASE_URL")+"/chat/completions", strings.NewReader(body))
		if err != nil {
			return 2
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Fprintln(os.Stderr, "status", resp.Status)
			return 1
		}
		if err != nil || len(out.Choices) == 0 {
			return 2
		}
		reply = out.Choices[0].Message.Content
	}
	fmt.Println(reply)
	fmt.Println("seed=" + os.Getenv("BELAY_SEED"))
	return 0
}

// TestCommandAgent: a command agent that only reads OPENAI_BASE_URL (it
// never sends X-Belay-Run-Id) still makes its model calls as turns of its
// eval run, under the run's limits.
func TestCommandAgent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: command
agent:
  command: [%q]
  env: {%s: "1"}
runs: 2
timeout: 20s
providers: {sim: {profile: none}}
scenarios:
  - name: two-calls
    input: one two
    expect: {exit_code: 0, status: succeeded, max_turns: 2}
  - name: capped
    input: one two three
    limits: {max_turns: 2}
    expect: {status: stopped, stop_reason: max_turns_exceeded}
`, exe, agentModeEnv)
	st, s := memstore.New(), writeSuite(t, t.TempDir(), text)
	defer st.Close()
	rep, err := eval.Run(t.Context(), s, harness.Factory(st), eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Outcomes) != 4 {
		t.Fatalf("%d runs, want 4", len(rep.Outcomes))
	}
	seeds := map[string]bool{}
	for _, o := range rep.Outcomes {
		if o.Scenario == "two-calls" {
			// Each run has its own seed, as a Go agent's Env.Seed.
			_, seed, _ := strings.Cut(o.Output, "seed=")
			seed = strings.TrimSpace(seed)
			if _, err := strconv.ParseInt(seed, 10, 64); err != nil || seeds[seed] {
				t.Errorf("two-calls #%d: BELAY_SEED %q (output %q); want a number of its own", o.Index, seed, o.Output)
			}
			seeds[seed] = true
		}
		// The capped run's third call is refused: it stops at two turns.
		if o.Scenario == "capped" && (!o.Passed || o.Turns != 2 || o.ExitCode != 1) {
			t.Errorf("capped #%d: passed %v, %d turns, exit %d (%v)", o.Index, o.Passed, o.Turns, o.ExitCode, o.Failures)
		}
		if o.Scenario == "two-calls" && (!o.Passed || o.Turns != 2 || o.InputTokens == 0) {
			t.Errorf("two-calls #%d: passed %v, %d turns, %d input tokens (%v)", o.Index, o.Passed, o.Turns, o.InputTokens, o.Failures)
		}
		spans, err := st.RunSpans(t.Context(), o.RunID)
		if err != nil {
			t.Fatal(err)
		}
		models := 0
		for _, sp := range spans {
			if sp.Kind == trace.KindModel {
				models++
			}
		}
		if models < 2 {
			t.Errorf("%s #%d: %d model spans in the run's trace, want at least 2", o.Scenario, o.Index, models)
		}
	}
}

// A suite's providers.config may have tenants and an admin key (it is
// often the gateway's own config): their env: secrets need not be set,
// and eval runs still belong to the open gateway's tenant, so an agent's
// calls, which carry no tenant key, are served.
func TestConfigWithTenants(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := `sim: {profile: none}
models:
  - alias: gpt-4o-mini
    deployments:
      - {name: sim-a, provider: openai, model: gpt-4o-mini, base_url: "sim://"}
admin_key: env:BELAY_TEST_UNSET_ADMIN_KEY
tenants:
  - {name: acme, key: env:BELAY_TEST_UNSET_ACME_KEY}
`
	if err := os.WriteFile(filepath.Join(dir, "belay.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf(`version: 1
name: tenants
agent:
  command: [%q]
  env: {%s: "1"}
runs: 2
timeout: 20s
providers: {config: belay.yaml}
scenarios:
  - name: two-calls
    input: one two
    expect: {exit_code: 0, status: succeeded, max_turns: 2}
`, exe, agentModeEnv)
	st, s := memstore.New(), writeSuite(t, dir, text)
	defer st.Close()
	rep, err := eval.Run(t.Context(), s, harness.Factory(st), eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rep.Outcomes {
		if !o.Passed || o.Turns != 2 {
			t.Errorf("run %d: passed %v, %d turns, exit %d: %v", o.Index, o.Passed, o.Turns, o.ExitCode, o.Failures)
		}
	}

	// The deployments' keys are needed: one that is not set is a bad suite
	// naming it.
	bad := strings.Replace(cfg, `base_url: "sim://"}`, `base_url: "sim://", api_key: env:BELAY_TEST_UNSET_DEPLOYMENT_KEY}`, 1)
	if err := os.WriteFile(filepath.Join(dir, "belay.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = eval.Run(t.Context(), s, harness.Factory(st), eval.Options{})
	if !errors.Is(err, eval.ErrBadSuite) || !strings.Contains(err.Error(), "models[0].deployments[0].api_key: environment variable BELAY_TEST_UNSET_DEPLOYMENT_KEY is not set") {
		t.Errorf("unset deployment key: err = %v", err)
	}
}

// writeSuite writes text as dir/suite.yaml and loads it.
func writeSuite(t *testing.T, dir, text string) *eval.Suite {
	t.Helper()
	path := filepath.Join(dir, "suite.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := eval.LoadSuite(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
