package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/sim"
)

// Belay's refusals reach the gateway exactly once although the official
// clients retry up to twice by default: x-should-retry: false stops them.
func TestRefusalsAreNotRetriedBySDKs(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	cases := []struct {
		name       string
		hdr        map[string]string
		status     int
		typ, code  string
		anthStatus int
		anthType   string
	}{
		{"budget", map[string]string{"X-Belay-Max-Cost-Usd": "0.000000000001"}, 402, "budget_exceeded", "budget_exceeded", 402, "billing_error"},
		{"deadline header malformed", map[string]string{"X-Belay-Deadline": "soon"}, 400, "invalid_request_error", "", 400, "invalid_request_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []ooption.RequestOption
			var aopts []aoption.RequestOption
			for k, v := range tc.hdr {
				opts = append(opts, ooption.WithHeader(k, v))
				aopts = append(aopts, aoption.WithHeader(k, v))
			}
			before := h.gwCalls.Load()
			_, err := h.openai().Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, opts...)
			var oe *openai.Error
			if !errors.As(err, &oe) || oe.StatusCode != tc.status || oe.Type != tc.typ || oe.Code != tc.code {
				t.Fatalf("openai error = %v (%#v)", err, oe)
			}
			// A budget refusal stops a run, named in the response; a
			// request refused before admission never had one.
			wantRun := tc.status == 402
			if oe.Response.Header.Get("X-Should-Retry") != "false" || (oe.Response.Header.Get("X-Belay-Run-Id") != "") != wantRun {
				t.Errorf("headers = %v (run id expected: %v)", oe.Response.Header, wantRun)
			}
			_, err = h.anthropic().Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 10, Messages: anthropicMsg("hi")}, aopts...)
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode != tc.anthStatus || ae.Type() != anthropic.ErrorType(tc.anthType) {
				t.Fatalf("anthropic error = %v", err)
			}
			if got := h.gwCalls.Load() - before; got != 2 {
				t.Errorf("requests at the gateway = %d, want 2 (one per client)", got)
			}
		})
	}
	if n := h.upstreamCalls("oa-1") + h.upstreamCalls("an-1"); n != 0 {
		t.Errorf("upstream calls = %d, want 0", n)
	}
}

func TestMaxTurnsPerRun(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.openai()
	run := ooption.WithHeader("X-Belay-Run-Id", "turns-1")
	limit := ooption.WithHeader("X-Belay-Max-Turns", "2")
	for i := range 2 {
		if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, run, limit); err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
	}
	before := h.gwCalls.Load()
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, run, limit)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 403 || oe.Code != "max_turns_exceeded" {
		t.Fatalf("turn 3: %v", err)
	}
	if n := h.gwCalls.Load() - before; n != 1 {
		t.Errorf("gateway saw turn 3 %d times, want 1", n)
	}
	if n := h.upstreamCalls("oa-1"); n != 2 {
		t.Errorf("upstream calls = %d, want 2", n)
	}
	r := h.record("turns-1")
	if r.Status != "stopped" || r.StopReason != "max_turns_exceeded" {
		t.Errorf("run = %+v", r)
	}
	body := scrape(t, h, "/metrics")
	if !strings.Contains(body, `belay_stops_total{reason="max_turns_exceeded"} 1`) {
		t.Errorf("metrics lack the max_turns stop:\n%s", grepLines(body, "belay_stops"))
	}
}

func TestFallbackAndGiveUp(t *testing.T) {
	down, _ := sim.LookupProfile("down")
	h := newHarness(t, harnessOpts{profiles: map[string]sim.Profile{"oa-1": down, "an-1": down, "an-2": down}})
	ctx := context.Background()

	// oa-1 is down: two attempts there, then oa-2 serves.
	var resp *http.Response
	res, err := h.openai().Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, ooption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content == "" || resp.Header.Get("X-Belay-Deployment") != "oa-2" ||
		resp.Header.Get("X-Belay-Degraded") != "true" || resp.Header.Get("X-Belay-Attempts") != "3" {
		t.Errorf("headers %v", resp.Header)
	}

	// Both anthropic deployments are down: belay gives up when the
	// chain's attempt budget (2 per deployment + 1 per fallback = 3) is
	// spent, and the client does not retry on top.
	before := h.gwCalls.Load()
	_, err = h.anthropic().Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 10, Messages: anthropicMsg("hi")})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 500 && ae.StatusCode != 503 && ae.StatusCode != 529 {
		t.Fatalf("anthropic error = %v", err)
	}
	if ae.Response.Header.Get("X-Should-Retry") != "false" || ae.Response.Header.Get("X-Belay-Attempts") != "3" {
		t.Errorf("headers = %v", ae.Response.Header)
	}
	if n := h.gwCalls.Load() - before; n != 1 {
		t.Errorf("gateway requests = %d, want 1", n)
	}
	if a, b := h.upstreamCalls("an-1"), h.upstreamCalls("an-2"); a != 2 || b != 1 {
		t.Errorf("upstream calls an-1=%d an-2=%d, want 2 and 1", a, b)
	}
	h.quiesce()
	body := scrape(t, h, "/metrics")
	for _, want := range []string{`belay_fallbacks_total{alias="gpt-4o-mini"} 1`, `belay_retries_total{deployment="oa-1"} 1`,
		`belay_attempts_total{deployment="oa-2",reason="ok"} 1`, `belay_breaker_state{deployment="an-1"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// A mixed alias falls back only within the caller's dialect.
func TestFallbackStaysInDialect(t *testing.T) {
	down, _ := sim.LookupProfile("down")
	h := newHarness(t, harnessOpts{profiles: map[string]sim.Profile{"oa-1": down}})
	_, err := h.openai().Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "mixed", Messages: userMsg("hi")})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 503 {
		t.Fatalf("err = %v", err)
	}
	if n := h.upstreamCalls("an-1"); n != 0 {
		t.Errorf("an-1 got %d openai-dialect calls", n)
	}
	msg, err := h.anthropic().Messages.New(context.Background(), anthropic.MessageNewParams{Model: "mixed", MaxTokens: 10, Messages: anthropicMsg("hi")})
	if err != nil || len(msg.Content) == 0 {
		t.Fatalf("anthropic on mixed: %v", err)
	}
}

func TestMalformedRequestsInDialect(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "max_body_bytes: 2048\n"})
	big := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`
	cases := []struct {
		name, path, body string
		status           int
		param            string // a word the message must contain
	}{
		{"openai bad json", "/v1/chat/completions", `{"model":`, 400, "body"},
		{"openai wrong type", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":"hi"}`, 400, "messages"},
		{"openai missing model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model"},
		{"openai unknown model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "gpt-9"},
		{"openai wrong dialect model", "/v1/chat/completions", `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"hi"}]}`, 404, "anthropic"},
		{"openai too large", "/v1/chat/completions", big, 413, "max_body_bytes"},
		{"anthropic bad json", "/v1/messages", `[1,2`, 400, "body"},
		{"anthropic missing max_tokens", "/v1/messages", `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"hi"}]}`, 400, "max_tokens"},
		{"anthropic unknown model", "/v1/messages", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 404, "nope"},
		{"anthropic too large", "/v1/messages", big, 413, "max_body_bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post(tc.path, tc.body, nil)
			if resp.StatusCode != tc.status || resp.Header.Get("X-Should-Retry") != "false" {
				t.Fatalf("status %d x-should-retry %q body %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), body)
			}
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Type == "" || !strings.Contains(e.Error.Message, tc.param) {
				t.Fatalf("body %s", body)
			}
			if anth := strings.HasPrefix(tc.path, "/v1/messages"); anth != (e.Type == "error") {
				t.Errorf("body %s is not in the %s dialect", body, tc.path)
			}
		})
	}
}

func TestTenantKeys(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "tenants: [{name: acme, key: vk-acme, limits: {max_turns: 1}}]\n"})
	ctx := context.Background()
	_, err := h.openai().Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 401 || oe.Code != "invalid_api_key" {
		t.Fatalf("unknown key: %v", err)
	}
	_, err = h.anthropic().Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 10, Messages: anthropicMsg("hi")})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Type() != anthropic.ErrorTypeAuthenticationError {
		t.Fatalf("unknown key (anthropic): %v", err)
	}
	c := h.openai(ooption.WithAPIKey("vk-acme"))
	var resp *http.Response
	if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}, ooption.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	r := h.record("acme~" + resp.Header.Get("X-Belay-Run-Id"))
	if r.Tenant != "acme" || r.Limits.MaxTurns != 1 {
		t.Errorf("run = %+v", r)
	}
	// A request cannot raise the tenant's limit.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")},
		ooption.WithHeader("X-Belay-Run-Id", "acme-2"), ooption.WithHeader("X-Belay-Max-Turns", "10"))
	if err != nil {
		t.Fatal(err)
	}
	r = h.record("acme~acme-2")
	if r.Limits.MaxTurns != 1 {
		t.Errorf("max turns raised by a header: %+v", r.Limits)
	}
}

func scrape(t *testing.T, h *harness, path string) string {
	t.Helper()
	resp, err := http.Get(h.gw.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// An unknown model's 404 names the aliases the client's dialect can use
// (newcomer finding: "gpt-4o" from the README's example config was refused
// with no hint of what is served).
func TestUnknownModelNamesTheServedOnes(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for path, tc := range map[string]struct{ body, want string }{
		"/v1/chat/completions": {`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
			`model \"gpt-4o\" is not a configured model alias (served in the openai dialect: gpt-4o-mini`},
		"/v1/messages": {`{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			`model \"gpt-4o\" is not a configured model alias (served in the anthropic dialect: claude-sonnet-5-5`},
	} {
		resp, body := h.post(path, tc.body, nil)
		if resp.StatusCode != 404 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s; want 404 with %s", path, resp.StatusCode, body, tc.want)
		}
	}
}

// A call ended by the run's deadline says what its earlier attempts failed
// with (newcomer finding: a 5-minute hang answered only "run deadline of
// 5m0s passed", when two attempts had timed out waiting for headers). The
// upstream holds every request until the client leaves.
func TestDeadlineNamesTheAttemptsFailure(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server then sees the client leave
		<-r.Context().Done()
	})
	// Attempts enough that only the deadline can end the call: with 3 (a
	// third attempt's first_byte 20 ms after the deadline) a loaded
	// machine's late deadline timer let the attempts run out first.
	y := strings.Replace(tokenLimitConfig(up.URL, "{max_turns: 5, deadline: 1m}"), "max_attempts: 3,", "max_attempts: 50, chain_max_attempts: 50,", 1)
	g := newGW(t, y+"timeouts: {first_byte: 40ms}\n", nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Deadline", "0.1")
	want := "attempt N failed with timeout: upstream deployment d: no response headers within timeouts.first_byte (40ms))"
	if resp.StatusCode != 504 || !strings.Contains(body, `"code":"deadline_exceeded"`) ||
		!strings.Contains(body, "failed with timeout: upstream deployment d: no response headers within timeouts.first_byte (40ms))") {
		t.Errorf("%d %s; want 504 deadline_exceeded ending %s", resp.StatusCode, body, want)
	}
}

// A misspelt model alias is answered with the nearest served one
// (newcomer finding: gpt-4o-mni and GPT-4o-mini got the list only).
func TestUnknownModelSuggestsTheNearest(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, model := range []string{"gpt-4o-mni", "GPT-4o-mini"} {
		resp, body := h.post("/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`, nil)
		if resp.StatusCode != 404 || !strings.Contains(body, `is not a configured model alias (did you mean gpt-4o-mini?)`) {
			t.Errorf("%s: %d %s", model, resp.StatusCode, body)
		}
	}
}
