package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/sim"
	"github.com/belay-run/belay/store"
)

// The Anthropic SDK's CountTokens works through the gateway (Claude Code
// calls it each turn): the count is the deployment's, equal to the input
// tokens a message of the same prompt reports, and it counts in no run.
// A kill flag on a deployment passes the count to the next one; with every
// one disabled, or for a model the gateway does not serve, the SDK gets a
// typed error.
func TestCountTokensThroughTheGateway(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c := h.anthropic()
	tool := anthropic.ToolParam{Name: "lookup_order",
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"order_id": map[string]any{"type": "string"}}}}
	params := anthropic.MessageCountTokensParams{
		Model:    "claude-sonnet-5-5",
		Messages: anthropicMsg("How many tokens is this question, with its tools?"),
		Tools:    []anthropic.MessageCountTokensToolUnionParam{{OfTool: &tool}},
	}
	var resp *http.Response
	count, err := c.Messages.CountTokens(ctx, params, aoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: params.Model, MaxTokens: 50, Messages: params.Messages, Tools: []anthropic.ToolUnionParam{{OfTool: &tool}}})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens <= 0 || count.InputTokens != msg.Usage.InputTokens {
		t.Errorf("count_tokens = %d, a message of the same prompt used %d input tokens; want them equal and above 0", count.InputTokens, msg.Usage.InputTokens)
	}
	if !strings.HasPrefix(resp.Header.Get("Request-Id"), "req_011C") {
		t.Errorf("count_tokens request-id %q; want the simulator's, relayed", resp.Header.Get("Request-Id"))
	}
	if resp.Header.Get("X-Belay-Run-Id") != "" {
		t.Errorf("count_tokens answered with run id %q; it counts in no run", resp.Header.Get("X-Belay-Run-Id"))
	}
	flushRuns(t, h.stack)
	if runs, err := h.store.ListRuns(ctx, store.RunFilter{}); err != nil || len(runs) != 1 {
		t.Errorf("runs after a count and a message: %d (%v); want 1, the message's", len(runs), err)
	}

	if err := h.stack.Runs.Kill(ctx, store.KillDeployment, "an-1", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if again, err := c.Messages.CountTokens(ctx, params); err != nil || again.InputTokens != count.InputTokens {
		t.Errorf("with an-1 disabled: %+v, %v; want an-2's count, %d", again, err, count.InputTokens)
	}
	if err := h.stack.Runs.Kill(ctx, store.KillDeployment, "an-2", "maintenance"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Messages.CountTokens(ctx, params)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 403 || !strings.Contains(ae.Error(), "disabled by a kill flag") {
		t.Errorf("every deployment disabled: %v; want 403 naming the kill flags", err)
	}

	// A kill of everything, or of the tenant, stops counting too (it is
	// provider traffic, though in no run; adversarial review).
	if err := h.stack.Runs.Unkill(ctx, store.KillDeployment, "an-1"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		target store.KillTarget
		name   string
	}{{store.KillAll, ""}, {store.KillTenant, "default"}} {
		if err := h.stack.Runs.Kill(ctx, k.target, k.name, "incident"); err != nil {
			t.Fatal(err)
		}
		_, err = c.Messages.CountTokens(ctx, params)
		if !errors.As(err, &ae) || ae.StatusCode != 403 || !strings.Contains(ae.Error(), "killed by the kill switch ("+strings.TrimSpace(string(k.target)+" "+k.name)+": incident") {
			t.Errorf("kill %s %s: %v; want 403 naming the flag", k.target, k.name, err)
		}
		if err := h.stack.Runs.Unkill(ctx, k.target, k.name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Messages.CountTokens(ctx, params); err != nil {
		t.Errorf("after the unkills: %v", err)
	}

	// A deployment that is down passes the count on (the simulator's down
	// profile on an-1).
	if err := h.stack.Runs.Unkill(ctx, store.KillDeployment, "an-2"); err != nil {
		t.Fatal(err)
	}
	down, ok := sim.LookupProfile("down")
	if !ok {
		t.Fatal("no down profile")
	}
	h.sim.SetProfile("an-1", down)
	var via *http.Response
	if again, err := c.Messages.CountTokens(ctx, params, aoption.WithResponseInto(&via)); err != nil || again.InputTokens != count.InputTokens ||
		via.Header.Get("X-Belay-Deployment") != "an-2" {
		t.Errorf("with an-1 down: %+v, %v; want an-2's count", again, err)
	}

	params.Model = "no-such-model"
	_, err = c.Messages.CountTokens(ctx, params)
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type() != anthropic.ErrorTypeNotFoundError {
		t.Errorf("unknown model: %v; want 404 not_found_error", err)
	}
}

// A provider's refusal of a count is answered as a refused model call's:
// its 400 as sent, its refusal of the gateway's key in belay's words (the
// client's key was accepted), with a request id (review finding: the 401
// came back as if the client's key were bad).
func TestCountTokensRefusedUpstream(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(b), "badkey") {
			w.WriteHeader(401)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: at least one message is required"}}`)
	})
	g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
models:
  - alias: an
    deployments: [{name: an-1, provider: anthropic, model: claude-sonnet-4-5, base_url: %q, api_key: k}]
`, up.URL), nil)
	resp, b := g.do("POST", gateway.CountTokensPath, `{"model":"an","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 || !strings.HasPrefix(b, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: at least one message is required"},"request_id":"req_belay_`) {
		t.Errorf("upstream 400: %d %s", resp.StatusCode, b)
	}
	resp, b = g.do("POST", gateway.CountTokensPath, `{"model":"an","messages":[{"role":"user","content":"badkey"}]}`)
	if !strings.Contains(b, "your key to belay was accepted") || !strings.Contains(b, "an-1") || resp.Header.Get("Request-Id") == "" {
		t.Errorf("upstream 401: %d %s (request-id %q); want belay's words about the gateway's key", resp.StatusCode, b, resp.Header.Get("Request-Id"))
	}
}

// A count falls back as a model call does: a deployment that cannot be
// reached passes it to the next, which x-belay-deployment names (a
// newcomer found counts failing while messages were served by the
// fallback).
func TestCountTokensFallsBack(t *testing.T) {
	ok := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":12}`)
	})
	g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
models:
  - alias: an
    deployments:
      - {name: gone, provider: anthropic, model: claude-sonnet-4-5, base_url: "http://127.0.0.1:1", api_key: k}
      - {name: up, provider: anthropic, model: claude-sonnet-4-5, base_url: %q, api_key: k}
`, ok.URL), nil)
	resp, b := g.do("POST", gateway.CountTokensPath, `{"model":"an","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || b != `{"input_tokens":12}` || resp.Header.Get("X-Belay-Deployment") != "up" {
		t.Errorf("count with the first deployment down: %d %s (deployment %q); want up's answer", resp.StatusCode, b, resp.Header.Get("X-Belay-Deployment"))
	}
}

// A count answer past max_upstream_body_bytes is no answer: the next
// deployment counts, and with none left the client gets a retryable 502
// (review finding: it was refused 500 with x-should-retry: false).
func TestCountTokensOversizedAnswerFallsBack(t *testing.T) {
	big := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":1,"pad":"`+strings.Repeat("x", 2048)+`"}`)
	})
	ok := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":12}`)
	})
	cfg := func(deps string) string {
		return "listen: 127.0.0.1:0\nstore: memory://\nmax_upstream_body_bytes: 1024\nmodels:\n  - alias: an\n    deployments: [" + deps + "]\n"
	}
	bigDep := fmt.Sprintf(`{name: big, provider: anthropic, model: claude-sonnet-4-5, base_url: %q, api_key: k}`, big.URL)
	upDep := fmt.Sprintf(`{name: up, provider: anthropic, model: claude-sonnet-4-5, base_url: %q, api_key: k}`, ok.URL)
	body := `{"model":"an","messages":[{"role":"user","content":"hi"}]}`
	resp, b := newGW(t, cfg(bigDep+", "+upDep), nil).do("POST", gateway.CountTokensPath, body)
	if resp.StatusCode != 200 || b != `{"input_tokens":12}` || resp.Header.Get("X-Belay-Deployment") != "up" {
		t.Errorf("big then up: %d %s (deployment %q); want up's count", resp.StatusCode, b, resp.Header.Get("X-Belay-Deployment"))
	}
	resp, b = newGW(t, cfg(bigDep), nil).do("POST", gateway.CountTokensPath, body)
	if resp.StatusCode != 502 || resp.Header.Get("X-Should-Retry") == "false" || !strings.Contains(b, "max_upstream_body_bytes") {
		t.Errorf("big alone: %d %s (x-should-retry %q); want a retryable 502 naming the cap", resp.StatusCode, b, resp.Header.Get("X-Should-Retry"))
	}
}

// On an open gateway (no tenants) a run id holding ~ is refused without
// the TENANT~ hint, which only a gateway with tenants stores.
func TestRunIDHintOnlyWithTenants(t *testing.T) {
	g := newGW(t, "listen: 127.0.0.1:0\nstore: memory://\n", nil)
	resp, b := g.do("POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", "a~b")
	if resp.StatusCode != 400 || strings.Contains(b, "TENANT") {
		t.Errorf("open gateway, id a~b: %d %s", resp.StatusCode, b)
	}
}
