package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/gateway"
)

// negativeSearches answers a Messages call with 1,000 input and 500
// output tokens and -100 web searches.
func negativeSearches(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-tools","content":[{"type":"text","text":"found"}],`+
		`"stop_reason":"end_turn","usage":{"input_tokens":1000,"output_tokens":500,"server_tool_use":{"web_search_requests":-100}}}`)
}

const adv21bConfig = `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
limits: {max_turns: 50, deadline: 1m, max_cost_usd: 5}
max_upstream_body_bytes: 65536
pricing:
  tool-model: {input: 1, output: 2}
  claude-tools: {input: 1, output: 2}
models:
  - alias: tool-model
    deployments:
      - {name: oa, provider: openai, model: tool-model, base_url: %[1]s/v1, api_key: sk-x}
  - alias: claude-tools
    deployments:
      - {name: an, provider: anthropic, model: claude-tools, base_url: %[1]s, api_key: sk-x}
`

// A negative usage.server_tool_use.web_search_requests (an upstream's bug,
// or a hostile compatible server) is charged as none: the call costs its
// tokens ($0.002: 1,000 in at $1/M, 500 out at $2/M). An adversarial
// review found it a credit of $0.01 per "search" (clampUsage left the
// counts negative).
func TestAdv21bNegativeWebSearchRequestsLowerTheCost(t *testing.T) {
	url := gatewayOver(t, negativeSearches, adv21bConfig)
	status, body, cost := postCost(t, url, "/v1/messages",
		`{"model":"claude-tools","max_tokens":600,"messages":[{"role":"user","content":"search"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if cost != "0.002" {
		t.Errorf("cost %q, want 0.002 (the tokens; a negative search count charged as 0)", cost)
	}
}

// Two web search tools whose max_uses add past int64 (2^62 each) are
// reserved as the most searches there can be, and refused (402) like one
// such tool: an adversarial review found the sum wrapped negative and no
// search fee reserved.
func TestAdv21bMaxUsesOverflowReservesNoFee(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-tools","content":[{"type":"text","text":"x"}],`+
			`"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`)
	}, adv21bConfig)
	const big = 1 << 62
	one := fmt.Sprintf(`{"type":"web_search_20250305","name":"web_search","max_uses":%d}`, int64(big))
	two := fmt.Sprintf(`{"type":"web_search_20260209","name":"web_search","max_uses":%d}`, int64(big))
	for _, c := range []struct{ name, tools string }{
		{"one tool", one},
		{"two tools", one + "," + two},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := postCost(t, url, "/v1/messages",
				`{"model":"claude-tools","max_tokens":100,"messages":[{"role":"user","content":"search"}],"tools":[`+c.tools+`]}`,
				gateway.HeaderMaxCostUSD, "0.1")
			if status != 402 {
				t.Errorf("status %d, want 402 (the declared searches' fees exceed $0.10): %.300s", status, body)
			}
		})
	}
}

// A non-streamed Responses answer whose body is past max_upstream_body_bytes
// was generated whole by the provider, searches included, and is charged
// as a cut answer: the prompt, the output limit and its declared (and
// reserved) web searches, max_tool_calls 5 of web_search at $0.01 (an
// adversarial review found the searches left out).
func TestAdv21bCutAnswerChargesNoSearches(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		out := `[{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"` +
			strings.Repeat("a", 70000) + `","annotations":[]}]}]`
		body := `{"id":"resp_1","object":"response","status":"completed","model":"tool-model","output":` + out +
			`,"usage":{"input_tokens":10,"output_tokens":100,"total_tokens":110}}`
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	}, adv21bConfig)
	status, body, cost := postCost(t, url, "/v1/responses",
		`{"model":"tool-model","input":"search","max_output_tokens":1000,"max_tool_calls":5,"tools":[{"type":"web_search"}]}`)
	if status == 200 {
		t.Fatalf("status 200, want the attempt failed past the cap: %.200s", body)
	}
	c, err := budget.ParseUSD(cost)
	if err != nil {
		t.Fatalf("cost %q: %v", cost, err)
	}
	// The tokens alone: ≤ ~$0.002 (prompt estimate at $1/M + 1,000 out at $2/M).
	if c < budget.Micros(10_000) { // $0.01: at least one search's fee
		t.Errorf("cost %s: the cut answer is charged no web search fee (max_tool_calls 5 reserved $0.05)", c)
	}
}

// A pricing entry that sets only a built-in model's web_search_call, as
// the README asks for a non-reasoning model with web_search_preview,
// keeps the model's built-in token prices: an adversarial review found it
// replaced them with $0, a call of 1M input tokens charged only its fee.
func TestAdv21bFeeOnlyOverrideZeroesTokenPrices(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o-mini","output":[`+
			`{"type":"web_search_call","id":"ws_1","status":"completed"},`+
			`{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"x","annotations":[]}]}],`+
			`"usage":{"input_tokens":1000000,"output_tokens":1000000,"total_tokens":2000000}}`)
	}, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
limits: {max_turns: 50, deadline: 1m, max_cost_usd: 5}
pricing:
  gpt-4o-mini: {web_search_call: 0.025}
models:
  - alias: mini
    deployments:
      - {name: oa, provider: openai, model: gpt-4o-mini, base_url: %[1]s/v1, api_key: sk-x}
`)
	status, body, cost := postCost(t, url, "/v1/responses",
		`{"model":"mini","input":"search","max_output_tokens":100,"tools":[{"type":"web_search_preview"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	builtin, _, err := budget.DefaultPricing().Lookup("openai", "gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	want := builtin.Input.MulTokens(1_000_000).Add(builtin.Output.MulTokens(1_000_000)).Add(budget.Micros(25_000))
	if cost != want.Decimal() {
		t.Errorf("cost %q, want %s (gpt-4o-mini's built-in token prices and the $0.025 search)", cost, want.Decimal())
	}
}

// The run's record of a call with a negative search count has the
// tokens' cost, as its X-Belay-Cost-Usd (an adversarial review found the
// header at -0.998 and the record at $0.00).
func TestAdv21bNegativeWebSearchRequestsRecordedCost(t *testing.T) {
	url := gatewayOver(t, negativeSearches, adv21bConfig)
	status, body, _ := postCost(t, url, "/v1/messages",
		`{"model":"claude-tools","max_tokens":500,"messages":[{"role":"user","content":"search"}]}`,
		gateway.HeaderRunID, "adv21b-run")
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	resp, err := http.Get(url + gateway.RunsAPIPath + "adv21b-run")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"cost_usd":"0.002"`) {
		t.Errorf("the run's recorded cost is not the tokens' $0.002: %s", b)
	}
}

// An Anthropic answer without usage is charged an estimate that counts
// its server_tool_use blocks named web_search: two at $0.01. Its tokens
// are estimated (the prompt's and the output's characters), so only the
// fee part is checked: the cost is at least $0.02 and under $0.03.
func TestAnthropicAnswerWithoutUsageCountsSearches(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-tools","stop_reason":"end_turn","content":[`+
			`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"a"}},`+
			`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},`+
			`{"type":"server_tool_use","id":"srvtoolu_2","name":"web_search","input":{"query":"b"}},`+
			`{"type":"text","text":"found"}]}`)
	}, adv21bConfig)
	status, body, cost := postCost(t, url, "/v1/messages",
		`{"model":"claude-tools","max_tokens":100,"messages":[{"role":"user","content":"search"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	c, err := budget.ParseUSD(cost)
	if err != nil || c < budget.USD(20_000_000_000) || c >= budget.USD(30_000_000_000) {
		t.Errorf("cost %q: want two searches' $0.02 and the estimated tokens' (about $0.0002)", cost)
	}
}
