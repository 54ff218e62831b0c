package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/eval/harness"
	"github.com/belay-run/belay/store/memstore"
)

// pollAgent calls its status tool three times with the same arguments
// (a poll) and its write tool twice likewise, and answers with the
// results it saw.
type pollAgent struct{}

func (pollAgent) Run(ctx context.Context, env eval.Env) (int, string, error) {
	polls, writes := 0, 0
	var seen []string
	for i := range 3 {
		res, err := env.Tools.RunTool(ctx, "get_job_status", fmt.Sprintf("call-%d", i), json.RawMessage(`{"job":"1"}`),
			func(context.Context, string) (json.RawMessage, error) {
				polls++
				return json.RawMessage(fmt.Sprintf(`{"poll":%d}`, polls)), nil
			})
		if err != nil {
			return 1, "", err
		}
		seen = append(seen, string(res))
	}
	for i := range 2 {
		if _, err := env.Tools.RunTool(ctx, "start_job", fmt.Sprintf("call-w%d", i), json.RawMessage(`{"job":"1"}`),
			func(context.Context, string) (json.RawMessage, error) { writes++; return json.RawMessage(`{}`), nil }); err != nil {
			return 1, "", err
		}
	}
	return 0, fmt.Sprintf("%s writes=%d", strings.Join(seen, " "), writes), nil
}

// A suite's tools.read_only reach a Go agent's tool calls: its polls run
// each time, while a tool not named is deduplicated within the run
// (newcomer finding: every poll saw the first one's result).
func TestSuiteReadOnlyTools(t *testing.T) {
	name := fmt.Sprintf("poll-agent-%d", agentSeq.Add(1))
	eval.RegisterAgent(name, pollAgent{})
	text := fmt.Sprintf(`version: 1
name: poll
agent: {go: %s}
runs: 1
providers: {sim: {profile: none}}
tools: {read_only: ["get_*"]}
scenarios:
  - name: poll
    input: go
    expect: {exit_code: 0, output: '{"poll":1} {"poll":2} {"poll":3} writes=1'}
`, name)
	st, s := memstore.New(), writeSuite(t, t.TempDir(), text)
	defer st.Close()
	rep, err := eval.Run(t.Context(), s, harness.Factory(st), eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Outcomes) != 1 || !rep.Outcomes[0].Passed {
		t.Fatalf("outcomes %+v", rep.Outcomes)
	}
}
