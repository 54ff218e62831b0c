package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/eval/harness"
	"github.com/belay-run/belay/store/open"
)

// statusAgent is a Go agent of one's own: one model call through belay
// (env.HTTPClient, env.BaseURL), one read-only tool call through
// env.Tools, and an answer on its output.
type statusAgent struct{}

func (statusAgent) Run(ctx context.Context, env eval.Env) (int, string, error) {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, env.Model, env.Input)
	req, err := http.NewRequestWithContext(ctx, "POST", env.BaseURL+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return 1, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := env.HTTPClient.Do(req)
	if err != nil {
		return 1, "", err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		return 1, "", fmt.Errorf("model call: %s", res.Status)
	}
	out, err := env.Tools.RunTool(ctx, "get_status", "call-1", json.RawMessage(`{"id":"7"}`),
		func(ctx context.Context, key string) (json.RawMessage, error) {
			return json.RawMessage(`"shipped"`), nil
		})
	if err != nil {
		return 1, "", err
	}
	return 0, "status " + string(out), nil
}

// A Go agent of your own runs under belay eval's harness from your own
// program: register it, load the suite, run it with a store, and write
// the report (here the pass counts; rep.WriteText prints belay eval's
// table). The runs are in the store for belay runs and belay trace show.
func Example_ownGoAgent() {
	ctx := context.Background()
	eval.RegisterAgent("status-agent", statusAgent{})

	dir, _ := os.MkdirTemp("", "suite")
	defer os.RemoveAll(dir)
	suite := filepath.Join(dir, "suite.yaml")
	_ = os.WriteFile(suite, []byte(`version: 1
name: status
agent: {go: status-agent}
runs: 3
tools: {read_only: [get_status]}
scenarios:
  - name: answers
    input: Where is order 7?
    expect: {exit_code: 0, output: 'status "shipped"', called: [get_status]}
`), 0o644)

	s, err := eval.LoadSuite(suite)
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := open.Open(ctx, "memory://") // sqlite://belay.db to keep the runs
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	rep, err := eval.Run(ctx, s, harness.Factory(st), eval.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, sc := range rep.Scenarios {
		fmt.Printf("%s: %d of %d passed\n", sc.Name, sc.Passes, sc.Runs)
	}
	// Output: answers: 3 of 3 passed
}
