package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/store"
)

// A deployment disabled with the kill switch is passed over: its traffic
// goes to the next deployment of the chain, with no attempt on it, until
// the flag is cleared.
func TestKilledDeploymentIsSkipped(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	if err := h.stack.Runs.Kill(ctx, store.KillDeployment, "oa-1", "maintenance"); err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	_, err := h.openai().Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, ooption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Header.Get("X-Belay-Deployment"); d != "oa-2" {
		t.Errorf("served by %q, want oa-2", d)
	}
	if n := h.upstreamCalls("oa-1"); n != 0 {
		t.Errorf("%d upstream calls to the disabled oa-1, want 0", n)
	}
	if err := h.stack.Runs.Unkill(ctx, store.KillDeployment, "oa-1"); err != nil {
		t.Fatal(err)
	}
	_, err = h.openai().Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, ooption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Header.Get("X-Belay-Deployment"); d != "oa-1" {
		t.Errorf("after unkill served by %q, want oa-1", d)
	}
}

// With every deployment of a model disabled, a call is refused as killed
// (403, not retried), not answered 503 circuit_open as if the breakers
// had opened (newcomer finding); no upstream call is made.
func TestAllDeploymentsKilledIsAKillRefusal(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	for _, d := range []string{"oa-1", "oa-2"} {
		if err := h.stack.Runs.Kill(ctx, store.KillDeployment, d, "maintenance"); err != nil {
			t.Fatal(err)
		}
	}
	resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 403 || !strings.Contains(body, `"code":"killed"`) || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("all deployments killed: %d %s (x-should-retry %q); want 403 killed, not retried", resp.StatusCode, body, resp.Header.Get("X-Should-Retry"))
	}
	if n := h.upstreamCalls("oa-1") + h.upstreamCalls("oa-2"); n != 0 {
		t.Errorf("%d upstream calls, want 0", n)
	}
}
