package gateway_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// With every breaker of its chain open, a call is refused without an
// upstream attempt; the refusal says when the chain may be tried again
// (Retry-After, and OpenAI's retry-after-ms) and does not forbid the
// client's SDK a retry (no x-should-retry: false), in both dialects. A
// deployment disabled by a kill flag does not count: it does not reopen
// with time.
func TestAllOpenRefusalSaysWhenToComeBack(t *testing.T) {
	var calls atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`))
	})
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
admin_key: adm
retry: {max_attempts: 1, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1, open_for: 1h}
models:
  - alias: m
    deployments:
      - `+openAIDep("a", "gpt-4o-mini", up.URL)+`
      - `+openAIDep("b", "gpt-4o-mini", up.URL)+`
  - alias: claude
    deployments:
      - {name: c, provider: anthropic, model: claude-sonnet-5-5, base_url: "`+up.URL+`", api_key: k}
`, nil)
	// Open a's and b's breakers (one 500 each), then c's.
	if resp, body := g.do("POST", "/v1/chat/completions", chat); resp.StatusCode != 500 {
		t.Fatalf("first call: %d %s; want the upstream's 500", resp.StatusCode, body)
	} else if k, r := hdrOf(resp); r != "server_error" || k == "" {
		t.Errorf("upstream 500 given up: failure headers %q/%q; want server_error", k, r)
	}
	claude := `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	if resp, body := g.do("POST", "/v1/messages", claude); resp.StatusCode != 500 {
		t.Fatalf("first Anthropic call: %d %s; want the upstream's 500", resp.StatusCode, body)
	}
	before := calls.Load()

	resp, body := g.do("POST", "/v1/chat/completions", chat)
	_, code, msg := decodeError(t, body)
	if resp.StatusCode != 503 || code != "circuit_open" {
		t.Fatalf("%d %s; want 503 circuit_open", resp.StatusCode, body)
	}
	if k, r := hdrOf(resp); k != "degraded" || r != "circuit_open" {
		t.Errorf("all open: failure headers %q/%q; want degraded/circuit_open", k, r)
	}
	want := `every deployment of model "m" has its circuit breaker open (a, b); a call may get through again in 1h0m0s (Retry-After)`
	if msg != want {
		t.Errorf("message %q\nwant %q", msg, want)
	}
	ms, _ := strconv.ParseInt(resp.Header.Get("Retry-After-Ms"), 10, 64)
	if ra := resp.Header.Get("Retry-After"); ra != "3600" || ms <= 3590_000 || ms > 3600_000 {
		t.Errorf("Retry-After %q, retry-after-ms %d; want 3600 and just under 3,600,000", ra, ms)
	}
	if v := resp.Header.Get("X-Should-Retry"); v != "" {
		t.Errorf("x-should-retry %q; want none, so the SDK may retry after Retry-After", v)
	}

	resp, body = g.do("POST", "/v1/messages", claude)
	if resp.StatusCode != 529 || !strings.Contains(body, `"overloaded_error"`) || !strings.Contains(body, "may get through again in 1h0m0s") ||
		resp.Header.Get("Retry-After") != "3600" || resp.Header.Get("X-Should-Retry") != "" {
		t.Errorf("Anthropic: %d %v %s; want 529 overloaded_error with Retry-After 3600", resp.StatusCode, resp.Header, body)
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the refused calls reached the upstream %d times", n)
	}

	// The refusal comes before the call counts in a run: an SDK's retries
	// of it use none of the run's turns (adversary finding: at max_turns
	// 2, the second retry was refused for the turns and the run stopped).
	for i := range 4 {
		resp, body := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "r-open", "X-Belay-Max-Turns", "2")
		if resp.StatusCode != 503 || !strings.Contains(body, "circuit_open") {
			t.Fatalf("refusal %d: %d %s; want 503 circuit_open each time", i+1, resp.StatusCode, body)
		}
	}
	if g.stack.Runs.Holds("r-open") {
		t.Errorf("run r-open was started by calls refused before they counted")
	}

	// Killed, a deployment is passed over: with both of m's killed there
	// is nothing to wait for (the kill refusal answers, x-should-retry:
	// false); with one, the other's breaker gives the wait.
	if st := g.adminPost(t, "/admin/kill", `{"target":"deployment","name":"a","reason":"test"}`, "adm"); st != 200 {
		t.Fatalf("kill a: %d", st)
	}
	resp, body = g.do("POST", "/v1/chat/completions", chat)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "3600" {
		t.Errorf("a killed, b open: %d Retry-After %q; want 503 with b's wait", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The message tells the killed deployment from the open breaker (a
	// newcomer finding: "a" was named among the open breakers, its own
	// closed), and the answer has a request id as belay's other refusals do.
	_, _, msg = decodeError(t, body)
	want = `no deployment of model "m" can take a call now: the circuit breaker of b is open, and a (deployment a: test) is killed; ` +
		`a call may get through again in 1h0m0s (Retry-After)`
	if msg != want {
		t.Errorf("a killed, b open: message %q\nwant %q", msg, want)
	}
	if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_belay_") {
		t.Errorf("a killed, b open: X-Request-Id %q; want belay's own", id)
	}
	if st := g.adminPost(t, "/admin/kill", `{"target":"deployment","name":"b","reason":"test"}`, "adm"); st != 200 {
		t.Fatalf("kill b: %d", st)
	}
	resp, body = g.do("POST", "/v1/chat/completions", chat)
	if resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-Should-Retry") != "false" || !strings.Contains(body, "kill flag") {
		t.Errorf("both killed: %d %v %s; want the kill refusal, without Retry-After", resp.StatusCode, resp.Header, body)
	}
	if k, r := hdrOf(resp); resp.StatusCode != 403 || k != "fatal" || r != "killed" {
		t.Errorf("both killed: %d, failure headers %q/%q; want 403 fatal/killed", resp.StatusCode, k, r)
	}
}

// adminPost sends an admin API POST with key and returns the status.
func (g *gw) adminPost(t *testing.T, path, body, key string) int {
	t.Helper()
	resp, _ := g.do("POST", path, body, "Authorization", "Bearer "+key)
	return resp.StatusCode
}

// Through the official OpenAI client: a call refused while the breaker is
// open is retried by the SDK after the refusal's retry-after-ms, and then
// goes through (the breaker's half-open probe) once the provider has
// recovered. The upstream sees the failing call and the probe only.
func TestAllOpenRefusalRetriedByTheSDKAfterTheWait(t *testing.T) {
	var failing atomic.Bool
	var calls atomic.Int64
	failing.Store(true)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"back"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
	})
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1, open_for: 300ms}
models:
  - alias: m
    deployments:
      - `+openAIDep("a", "gpt-4o-mini", up.URL)+`
`, nil)
	var requests atomic.Int64
	c := openai.NewClient(ooption.WithBaseURL(g.srv.URL+"/v1"), ooption.WithAPIKey("placeholder"), ooption.WithMaxRetries(2),
		ooption.WithMiddleware(func(r *http.Request, next ooption.MiddlewareNext) (*http.Response, error) {
			requests.Add(1)
			return next(r)
		}))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "m", Messages: userMsg("hi")}
	if _, err := c.Chat.Completions.New(ctx, params); err == nil {
		t.Fatal("first call succeeded; want the upstream's 500")
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("the SDK sent the failed call %d times; want once (x-should-retry: false)", n)
	}
	failing.Store(false)
	requests.Store(0)
	res, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("second call: %v; want success after the SDK's retry", err)
	}
	if res.Choices[0].Message.Content != "back" || requests.Load() != 2 || calls.Load() != 2 {
		t.Errorf("content %q after %d SDK requests, %d upstream calls; want \"back\" after 2 and 2",
			res.Choices[0].Message.Content, requests.Load(), calls.Load())
	}
}

// An upstream's refusal of a deployment's credentials reaches the client
// as such: the message names the deployment and says the client's own key
// was accepted (newcomer finding: the provider's "invalid api key" read as
// if the client's key to belay were wrong).
func TestUpstreamCredentialRefusalIsNamed(t *testing.T) {
	up := failingUpstream(t, http.StatusUnauthorized, "Incorrect API key provided: sk-****.")
	g := newGW(t, oneAlias("", openAIDep("a", "gpt-4o-mini", up.URL)), nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat)
	_, _, msg := decodeError(t, body)
	want := "upstream deployment a rejected the gateway's credentials for it (HTTP 401 from the provider: Incorrect API key provided: sk-****.); " +
		"your key to belay was accepted: the gateway's config must fix that deployment's api_key"
	if resp.StatusCode != 401 || msg != want || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("%d %q %s; want 401 with\n%s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), msg, want)
	}
}

// The failure of a call that went through its chain says how many
// attempts it made on which deployments, not only the last one's error
// (newcomer finding).
func TestFailureNamesTheAttemptsMade(t *testing.T) {
	a := failingUpstream(t, http.StatusServiceUnavailable, "a is overloaded")
	b := failingUpstream(t, http.StatusInternalServerError, "b broke")
	g := newGW(t, oneAlias("", openAIDep("a", "gpt-4o-mini", a.URL), openAIDep("b", "gpt-4o-mini", b.URL)), nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat)
	_, _, msg := decodeError(t, body)
	if want := "b broke (after 4 attempts: a ×3, b ×1)"; resp.StatusCode != 500 || msg != want || resp.Header.Get("X-Belay-Attempts") != "4" {
		t.Errorf("%d %q (x-belay-attempts %s); want 500 %q", resp.StatusCode, msg, resp.Header.Get("X-Belay-Attempts"), want)
	}
}
