package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
)

// A library run with a money limit (StartRun's spec) calling a model
// without a price is refused 400, saying so, not 503 "store unavailable"
// that a client retries forever (adversarial review of this session).
func TestUnpricedModelUnderARunsMoneyLimit(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, okCompletion, 10, 5)
	}))
	defer up.Close()
	y := "store: memory://\nlimits: {max_turns: 5}\nmodels:\n  - alias: m\n    deployments:\n      - " + openAIDep("ft", "my-own-model", up.URL) + "\n"
	g := newGW(t, y, nil)
	if _, err := g.stack.StartRun(context.Background(), run.Spec{ID: "lib", Limits: store.Limits{MaxCost: budget.Dollars(1)}}); err != nil {
		t.Fatal(err)
	}
	resp, body := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "lib")
	if resp.StatusCode != 400 || resp.Header.Get("X-Should-Retry") != "false" ||
		!strings.Contains(body, `openai model \"my-own-model\" has no price, so the run's money limit cannot hold for its calls`) {
		t.Errorf("%d x-should-retry %q: %s; want 400, not retried, saying the model has no price", resp.StatusCode, resp.Header.Get("X-Should-Retry"), body)
	}
}
