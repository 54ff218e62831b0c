package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

const limitsHeader = "X-Belay-Limits-Overridden"

// A limit asked above the tenant's is capped at it, and the response says
// so, in both dialects, on a success and on a refusal (newcomer finding:
// the request's value was lowered without a sign). The harness's tenant
// limits are 50 turns, 1m and $5.
func TestLimitsAboveTheTenantsAreNamed(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	above := map[string]string{"X-Belay-Max-Turns": "100", "X-Belay-Deadline": "30", "X-Belay-Max-Cost-Usd": "10"}
	const want = "max-turns=50, max-cost-usd=5.00" // the deadline asked (30s) applies

	var oresp *http.Response
	opts := []ooption.RequestOption{ooption.WithResponseInto(&oresp)}
	var aopts []aoption.RequestOption
	for k, v := range above {
		opts = append(opts, ooption.WithHeader(k, v))
		aopts = append(aopts, aoption.WithHeader(k, v))
	}
	if _, err := h.openai().Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, opts...); err != nil {
		t.Fatal(err)
	}
	if got := oresp.Header.Get(limitsHeader); got != want {
		t.Errorf("openai: %s %q, want %q", limitsHeader, got, want)
	}
	r := h.record(oresp.Header.Get("X-Belay-Run-Id"))
	if r.Limits.MaxTurns != 50 || r.Limits.Deadline != 30*time.Second {
		t.Errorf("run limits %+v, want 50 turns and 30s", r.Limits)
	}

	var aresp *http.Response
	if _, err := h.anthropic().Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 10, Messages: anthropicMsg("hi")},
		append(aopts, aoption.WithResponseInto(&aresp))...); err != nil {
		t.Fatal(err)
	}
	if got := aresp.Header.Get(limitsHeader); got != want {
		t.Errorf("anthropic: %s %q, want %q", limitsHeader, got, want)
	}

	// Refusals: before the run (malformed body, unknown model) and by the
	// run's first admission (its money).
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/v1/chat/completions", `{"model":`, 400},
		{"/v1/messages", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200}, // a stream
	} {
		resp, body := h.post(c.path, c.body, above)
		if resp.StatusCode != c.status || resp.Header.Get(limitsHeader) != want {
			t.Errorf("%s %s: %d %s=%q (%s), want %d %q", c.path, c.body, resp.StatusCode, limitsHeader, resp.Header.Get(limitsHeader), body, c.status, want)
		}
	}
	resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"X-Belay-Max-Turns": "100", "X-Belay-Max-Cost-Usd": "0.000000000001"})
	if resp.StatusCode != 402 || resp.Header.Get(limitsHeader) != "max-turns=50" {
		t.Errorf("budget refusal: %d %s=%q (%s), want 402 max-turns=50", resp.StatusCode, limitsHeader, resp.Header.Get(limitsHeader), body)
	}

	// Nothing asked, or nothing above: no header.
	for _, hdr := range []map[string]string{nil, {"X-Belay-Max-Turns": "50", "X-Belay-Deadline": "1m"}} {
		resp, _ := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, hdr)
		if v, ok := resp.Header[limitsHeader]; resp.StatusCode != 200 || ok {
			t.Errorf("headers %v: %d, %s %q; want 200 and no header", hdr, resp.StatusCode, limitsHeader, v)
		}
	}
}

// A run's limits are fixed by its first request: a later request of the
// run that asks for others is told the run's, whether it is answered or
// refused, and is never told the tenant's when the run's differ.
func TestLimitsOfALaterRequestAreTheRuns(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c := h.openai()
	call := func(turns string) (*http.Response, error) {
		var resp *http.Response
		opts := []ooption.RequestOption{ooption.WithHeader("X-Belay-Run-Id", "fixed-1"), ooption.WithResponseInto(&resp)}
		if turns != "" {
			opts = append(opts, ooption.WithHeader("X-Belay-Max-Turns", turns))
		}
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, opts...)
		var oe *openai.Error
		if errors.As(err, &oe) {
			return oe.Response, err
		}
		return resp, err
	}
	for i, s := range []struct {
		turns, want string
		refused     bool
	}{
		{"2", "", false},            // starts the run with 2 turns
		{"1", "max-turns=2", false}, // asks fewer: the run's 2 apply
		{"", "", true},              // asks nothing: refused, the run used its 2 turns
		{"100", "max-turns=2", true},
		{"2", "", true},
	} {
		resp, err := call(s.turns)
		if resp == nil || (err != nil) != s.refused {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if v, ok := resp.Header[limitsHeader]; resp.Header.Get(limitsHeader) != s.want || (s.want == "") == ok {
			t.Errorf("call %d (X-Belay-Max-Turns %q): %s %q, want %q", i+1, s.turns, limitsHeader, v, s.want)
		}
	}
	// Anthropic: the run's limits on a refusal of another of its requests.
	_, err := h.anthropic().Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 10, Messages: anthropicMsg("hi")},
		aoption.WithHeader("X-Belay-Run-Id", "fixed-1"), aoption.WithHeader("X-Belay-Max-Turns", "7"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 403 {
		t.Fatalf("anthropic call of the run: %v, want 403", err)
	}
	if got := ae.Response.Header.Get(limitsHeader); got != "max-turns=2" {
		t.Errorf("anthropic call of the run: %s %q, want max-turns=2", limitsHeader, got)
	}
}

// X-Belay-Max-Tokens lowers the run's token limit as the other limit
// headers lower theirs, and a token limit then refuses the call whose
// reservation does not fit (newcomer finding: the header was ignored,
// without a word). An X-Belay-* header belay does not read is refused,
// naming those it reads: a misspelt limit would not apply.
func TestMaxTokensHeaderAndUnknownHeaders(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"X-Belay-Run-Id": "tok-1", "X-Belay-Max-Tokens": "1000"})
	if resp.StatusCode != 200 || resp.Header.Get(limitsHeader) != "" {
		t.Fatalf("%d %s (%s %q)", resp.StatusCode, body, limitsHeader, resp.Header.Get(limitsHeader))
	}
	h.quiesce()
	if r := h.record("tok-1"); r.Limits.MaxTokens != 1000 {
		t.Errorf("run limits %+v, want max_tokens 1000", r.Limits)
	}
	// No output limit: the 4,096 tokens reserved do not fit in 50.
	resp, body = h.post("/v1/responses", `{"model":"gpt-4o-mini","input":"hi"}`, map[string]string{"X-Belay-Max-Tokens": "50"})
	if resp.StatusCode != 402 || !strings.Contains(body, "max_output_tokens") {
		t.Errorf("a call past the token limit: %d %s", resp.StatusCode, body)
	}
	for hdr, want := range map[string]string{
		"X-Belay-Max-Tokens": `X-Belay-Max-Tokens: \"lots\" is not a positive integer`,
		"X-Belay-Max-Turn":   "unknown header X-Belay-Max-Turn (did you mean X-Belay-Max-Turns?): belay reads X-Belay-Run-Id, X-Belay-Agent, X-Belay-Max-Turns, X-Belay-Deadline, X-Belay-Max-Cost-Usd, X-Belay-Max-Tokens",
		"X-Belay-Runid":      "unknown header X-Belay-Runid (did you mean X-Belay-Run-Id?)",
	} {
		resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, map[string]string{hdr: "lots"})
		if resp.StatusCode != 400 || !strings.Contains(body, want) || resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: %d %s, want 400 with %q", hdr, resp.StatusCode, body, want)
		}
	}
	// belay's own answer headers, echoed back by a proxy or a replay tool,
	// ask for nothing and are not refused (newcomer finding: X-Belay-Attempts
	// got 400 "did you mean X-Belay-Agent?").
	for _, hdr := range []string{"X-Belay-Attempts", "X-Belay-Deployment", "X-Belay-Degraded", "X-Belay-Cost-Usd", "X-Belay-Limits-Overridden", "X-Belay-Failure-Kind", "X-Belay-Failure-Reason"} {
		resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, map[string]string{hdr: "1"})
		if resp.StatusCode != 200 {
			t.Errorf("%s sent: %d %s, want 200", hdr, resp.StatusCode, body)
		}
	}
}
