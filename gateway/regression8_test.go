package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/internal/fixture"
)

// Adversarial finding: the reservation's prompt estimate counted a JSON
// schema sent as response_format as about one token (as tools it counted
// right), so 20 concurrent calls with a 147 KB schema all fitted a $0.01
// run limit and spent $0.11. The schema now counts as it does in tools:
// a call over the run's limit is refused before it is sent, with an
// estimate of the right size.
func TestRegression_ReservationCountsResponseFormatSchema(t *testing.T) {
	var calls atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, oneAlias("", openAIDep("mini", "gpt-4o-mini", up.URL)), nil)
	schema := fixture.BigSchema(147_000)
	estimate := func(members string) float64 {
		t.Helper()
		body := `{"model":"m","max_tokens":10,` + members + `"messages":[{"role":"user","content":"fill in the form"}]}`
		resp, text := g.do("POST", "/v1/chat/completions", body, "X-Belay-Max-Cost-Usd", "0.0000001")
		_, code, msg := decodeError(t, text)
		m := regexp.MustCompile(`estimated cost \$([0-9.]+)`).FindStringSubmatch(msg)
		if resp.StatusCode != http.StatusPaymentRequired || code != "budget_exceeded" || m == nil {
			t.Fatalf("status %d, body %s; want 402 budget_exceeded with the estimated cost", resp.StatusCode, text)
		}
		usd, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return usd
	}
	// About 36 800 prompt tokens at gpt-4o-mini's $0.15 per million.
	asTools := estimate(`"tools":[{"type":"function","function":{"name":"record","parameters":` + schema + `}}],`)
	asFormat := estimate(`"response_format":{"type":"json_schema","json_schema":{"name":"record","strict":true,"schema":` + schema + `}},`)
	if asFormat < 0.004 || asFormat > 0.008 || asFormat < asTools*0.9 || asFormat > asTools*1.1 {
		t.Errorf("estimated cost with the schema as response_format $%v, as tools $%v; want both about $0.0055", asFormat, asTools)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("upstream calls = %d, want 0", n)
	}
}

// Adversary of session 8: a wrong-typed content was forwarded upstream.
// It is refused before any upstream call, in the caller's dialect, with
// x-should-retry: false.
func TestRegression_WrongTypedContentRefused(t *testing.T) {
	var calls atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, oneAlias("", openAIDep("mini", "gpt-4o-mini", up.URL),
		"{name: a, provider: anthropic, model: claude-sonnet-5-5, base_url: \""+up.URL+"\", api_key: k}"), nil)
	for _, tc := range []struct{ path, body, typ, msg string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":123}]}`, "invalid_request_error",
			"messages[0].content: must be a string or an array of content parts, not number"},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "invalid_request_error",
			"messages.0.content.0.text: must be a string, not number"},
	} {
		resp, body := g.do("POST", tc.path, tc.body)
		typ, _, msg := decodeError(t, body)
		if resp.StatusCode != 400 || typ != tc.typ || msg != tc.msg || resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: %d %v %s", tc.path, resp.StatusCode, resp.Header, body)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("upstream saw %d calls, want none", n)
	}
}

// Newcomer of session 9: with every breaker open, the 503 named the alias
// by the gateway's internal chain name ("openai:smart"); it names the
// alias the client asked for.
func TestRegression_AllOpenNamesTheClientsAlias(t *testing.T) {
	up := failingUpstream(t, http.StatusInternalServerError, "boom")
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1, open_for: 1h}
models:
  - alias: smart
    deployments:
      - `+openAIDep("d", "gpt-4o-mini", up.URL)+`
`, nil)
	smart := `{"model":"smart","messages":[{"role":"user","content":"hi"}]}`
	if resp, body := g.do("POST", "/v1/chat/completions", smart); resp.StatusCode != 500 {
		t.Fatalf("first call: %d %s; want the upstream's 500", resp.StatusCode, body)
	}
	resp, body := g.do("POST", "/v1/chat/completions", smart)
	_, code, msg := decodeError(t, body)
	want := `every deployment of model "smart" has its circuit breaker open (d); a call may get through again in 1h0m0s (Retry-After)`
	if resp.StatusCode != 503 || code != "circuit_open" || msg != want {
		t.Fatalf("%d %s; want 503 circuit_open: %s", resp.StatusCode, body, want)
	}
}

// Adversary of session 9: a call whose attempt budget ran out just as the
// chain moved to its next deployment got a nil failure from the router,
// and the handler panicked (the client saw the connection close with no
// answer). It gets the last failure in its dialect.
func TestRegression_BudgetOutAtFallbackAnswers(t *testing.T) {
	up := failingUpstream(t, http.StatusServiceUnavailable, "down")
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 2, chain_max_attempts: 2, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1000}
models:
  - alias: m
    deployments:
      - `+openAIDep("a", "gpt-4o-mini", up.URL)+`
      - `+openAIDep("b", "gpt-4o-mini", up.URL)+`
`, nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat)
	typ, _, msg := decodeError(t, body)
	if resp.StatusCode != 503 || typ != "server_error" || msg == "" || resp.Header.Get("X-Belay-Attempts") != "2" {
		t.Fatalf("%d %v %s; want the upstream's 503 after 2 attempts", resp.StatusCode, resp.Header, body)
	}
}

// Adversary of session 9 (second): the admin API took trailing text after
// its JSON body, and a kill of "all" with a name answered the name but
// stored none; n × max_tokens wrapped past int64 into a tiny reservation.
func TestRegression_AdminStrictAndReservationSaturates(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, okCompletion, 10, 5) })
	g := newGW(t, oneAlias("admin_key: adm\n", openAIDep("d", "gpt-4o-mini", up.URL)), nil)
	for body, want := range map[string]string{
		`{"target":"tool","name":"x"} garbage`: "unexpected data after the JSON object",
		`{"target":"all","name":"oops"}`:       "name: must be empty for target all",
	} {
		resp, text := g.do("POST", "/admin/kill", body, "Authorization", "Bearer adm")
		if resp.StatusCode != 400 || !strings.Contains(text, want) {
			t.Errorf("%s: %d %s; want 400 %q", body, resp.StatusCode, text, want)
		}
	}
	if kills, _ := g.store.ListKills(context.Background()); len(kills) != 0 {
		t.Errorf("kill flags set by refused requests: %+v", kills)
	}
	for _, n := range []string{"2", "4"} {
		body := `{"model":"m","n":` + n + `,"max_tokens":4611686018427387905,"messages":[{"role":"user","content":"hi"}]}`
		resp, text := g.do("POST", "/v1/chat/completions", body)
		if _, code, _ := decodeError(t, text); resp.StatusCode != http.StatusPaymentRequired || code != "budget_exceeded" {
			t.Errorf("n=%s: %d %s; want 402 budget_exceeded", n, resp.StatusCode, text)
		}
	}
}

// Adversary of session 9 (second): a streamed attempt that failed before
// any output reached the client was charged nothing, even when the
// provider had stated its usage (Anthropic's message_start: the prompt and
// its cache reads and writes), which it bills. Such an attempt is charged
// what was stated; the retry's usage is its own.
func TestRegression_FailedStreamAttemptChargedItsReportedUsage(t *testing.T) {
	var calls atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":1000,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":200,\"output_tokens\":1}}}\n\n")
		fmt.Fprint(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	})
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 2, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1000}
models:
  - alias: c
    deployments:
      - {name: a, provider: anthropic, model: claude-sonnet-5-5, base_url: "`+up.URL+`", api_key: k}
`, nil)
	resp, body := g.do("POST", "/v1/messages", `{"model":"c","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"X-Belay-Run-Id", "cut-1")
	if resp.StatusCode < 500 || calls.Load() != 2 {
		t.Fatalf("%d after %d upstream calls: %s; want a 5xx after 2", resp.StatusCode, calls.Load(), body)
	}
	rec := g.run("cut-1")
	if rec.InputTokens < 2*1000 || rec.Cost <= 0 {
		t.Fatalf("run record %+v; want both attempts' stated prompts (1,000 input tokens each) charged", rec)
	}
	if cost, err := budget.ParseUSD(resp.Header.Get("X-Belay-Cost-Usd")); err != nil || cost != rec.Cost {
		t.Errorf("x-belay-cost-usd %q (%v); want the run's %v", resp.Header.Get("X-Belay-Cost-Usd"), err, rec.Cost)
	}
}

// failingUpstream answers every request with status and an OpenAI error
// whose message is msg.
func failingUpstream(t *testing.T, status int, msg string) *httptest.Server {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"server_error","param":null,"code":null}}`, msg)
	})
}
