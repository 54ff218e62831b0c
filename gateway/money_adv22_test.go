package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/budget"
)

// adv22Config serves alias "m" over one deployment of provider prov and
// model model at the upstream (%[1]s), one attempt, $50 run limit.
func adv22Config(prov, model, extra string) string {
	base := "%[1]s/v1"
	if prov == "anthropic" {
		base = "%[1]s"
	}
	return `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
breaker: {consecutive_failures: 1000}
limits: {max_turns: 50, deadline: 1m, max_cost_usd: 50}
` + extra + `
models:
  - alias: m
    deployments:
      - {name: d, provider: ` + prov + `, model: ` + model + `, base_url: ` + base + `, api_key: sk-x}
`
}

func mustUSD(t *testing.T, s string) budget.USD {
	t.Helper()
	v, err := budget.ParseUSD(s)
	if err != nil {
		t.Fatalf("cost %q: %v", s, err)
	}
	return v
}

// An OpenAI-compatible reasoning model (DeepSeek R1 on vLLM, say) streams
// its thinking as delta.reasoning_content, which it bills as output. A
// stream cut before its usage chunk is estimated from its output
// characters, reasoning included: 40,000 characters of reasoning are
// charged as about 10,000 output tokens, as 40,000 of content are (they
// were charged as none).
func TestAdv22_CutStreamReasoningContentChargedAsOutput(t *testing.T) {
	for _, field := range []string{"content", "reasoning_content"} {
		t.Run(field, func(t *testing.T) {
			url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"deepseek-r1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
				chunk := strings.Repeat("think ", 1000/6) + "abcd" // 1,000 characters
				for range 40 {
					fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"deepseek-r1","choices":[{"index":0,"delta":{"%s":"%s"}}]}`+"\n\n", field, chunk)
				}
				// The connection ends here: no usage chunk, no [DONE].
			}, adv22Config("openai", "deepseek-r1", "pricing:\n  deepseek-r1: {input: 1, output: 100}\n"))
			status, body, cost := postCost(t, url, "/v1/chat/completions",
				`{"model":"m","stream":true,"max_tokens":20000,"messages":[{"role":"user","content":"think hard"}]}`)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			// 40,000 characters ≈ 10,000 output tokens at $100/M = $1.00.
			if got := mustUSD(t, cost); got < budget.Dollars(1)*9/10 {
				t.Errorf("a stream cut after 40,000 characters of %s was charged %s; want ≈ $1.00 (10,000 output tokens estimated at $100/M)", field, got)
			}
		})
	}
}

// Claude Sonnet 4 and 4.5 bill a request above 200,000 input tokens (the
// 1M-context window) at the long-context rates, $6 in and $22.50 out per
// million (platform.claude.com pricing, "Long context pricing"), and the
// built-in table prices it so (it priced it at the standard $3 / $15:
// half its cost, and a reservation of half what it needs).
func TestAdv22_SonnetLongContextPricedAtLongContextRates(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],`+
			`"stop_reason":"end_turn","usage":{"input_tokens":500000,"output_tokens":10000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`)
	}, adv22Config("anthropic", "claude-sonnet-4-5", ""))
	status, body, cost := postCost(t, url, "/v1/messages",
		`{"model":"m","max_tokens":10000,"messages":[{"role":"user","content":"summarise the attached corpus"}]}`,
		"Anthropic-Beta", "context-1m-2025-08-07")
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	want := mustUSD(t, "3.225") // 500,000 × $6/M + 10,000 × $22.50/M
	if got := mustUSD(t, cost); got != want {
		t.Errorf("a 500,000-token Sonnet 4.5 prompt was charged %s; want %s at the long-context rates ($6 / $22.50 per million)", got, want)
	}
}

// The price table matches a model by the longest entry that is a prefix of
// its name followed by a snapshot or version (gpt-4o-2024-08-06 → gpt-4o).
// OpenAI's -pro models are other products at other prices, with entries
// of their own: gpt-5-pro ($15 / $120 per million) was priced as gpt-5
// ($1.25 / $10), o3-pro ($20 / $80) as o3 ($2 / $8), with no warning, and
// a run's limit held a twelfth of what the call cost.
func TestAdv22_ProModelsPricedAtTheirOwnPrices(t *testing.T) {
	for _, c := range []struct{ model, want string }{
		{"gpt-5-pro", "2.70"}, // 100,000 × $15/M + 10,000 × $120/M
		{"o3-pro", "2.80"},    // 100,000 × $20/M + 10,000 × $80/M
	} {
		t.Run(c.model, func(t *testing.T) {
			url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"id":"resp_1","object":"response","status":"completed","model":"%s","output":[{"type":"message","id":"m1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],`+
					`"usage":{"input_tokens":100000,"input_tokens_details":{"cached_tokens":0},"output_tokens":10000,"output_tokens_details":{"reasoning_tokens":9000},"total_tokens":110000}}`, c.model)
			}, adv22Config("openai", c.model, ""))
			status, body, cost := postCost(t, url, "/v1/responses", `{"model":"m","max_output_tokens":10000,"input":"prove it"}`)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			if got, want := mustUSD(t, cost), mustUSD(t, c.want); got != want {
				t.Errorf("%s charged %s for 100,000 in and 10,000 out; want %s at its own list price", c.model, got, want)
			}
		})
	}
}

// A request may ask for OpenAI's priority processing ("service_tier":
// "priority"), which is billed above the standard rates (gpt-4o: $4.25 /
// $17 per million rather than $2.50 / $10). Priced at the standard table,
// it let any client spend up to 1.7× its run's and tenant's limits. A
// model belay has no priority price for is refused (400, param
// service_tier) before anything is sent, on Chat Completions and Responses
// alike, also under the tier's newer name "fast"; "flex" (billed below the
// standard rates) passes and is charged the standard price.
func TestAdv22_PriorityServiceTierRefused(t *testing.T) {
	var calls atomic.Int32
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"o3-2025-04-16","service_tier":"flex",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":100000,"completion_tokens":1000,"total_tokens":101000}}`)
	}, adv22Config("openai", "o3", ""))
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","service_tier":"priority","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"m","service_tier":"fast","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"m","service_tier":"priority","max_output_tokens":1000,"input":"hi"}`},
		{"/v1/responses", `{"model":"m","service_tier":"fast","max_output_tokens":1000,"input":"hi"}`},
	} {
		status, body, _ := postCost(t, url, c.path, c.body)
		if status != http.StatusBadRequest || !strings.Contains(body, `"param":"service_tier"`) || !strings.Contains(body, `no priority price for model \"o3\"`) {
			t.Errorf("%s %s: status %d, %s; want 400 naming service_tier and the model", c.path, c.body, status, body)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d upstream calls; want none for refused requests", n)
	}
	status, body, cost := postCost(t, url, "/v1/chat/completions",
		`{"model":"m","service_tier":"flex","max_tokens":1000,"messages":[{"role":"user","content":"the word priority in a prompt"}]}`)
	if status != 200 || calls.Load() != 1 || mustUSD(t, cost) != mustUSD(t, "0.208") { // 100,000 × $2/M + 1,000 × $8/M
		t.Errorf("flex: status %d, cost %s, %d calls: %s; want 200 at $0.208 after one call", status, cost, calls.Load(), body)
	}
}

// A Messages stream states its output in message_delta's usage; the
// output_tokens of message_start is a placeholder (1). A stream that
// completes (message_stop) without a message_delta usage — an
// Anthropic-compatible server, a proxy that drops it — is charged its
// output estimated from its characters, as a cut one is, not that
// placeholder (40,000 characters of answer were charged one token).
func TestAdv22_AnthropicStreamWithoutDeltaUsageChargedItsEstimate(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		chunk := strings.Repeat("word ", 200) // 1,000 characters
		for range 40 {
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+chunk+`"}}`)
		}
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null}}`)
		ev("message_stop", `{"type":"message_stop"}`)
	}, adv22Config("anthropic", "claude-x", "pricing:\n  claude-x: {input: 1, output: 100}\n"))
	status, body, cost := postCost(t, url, "/v1/messages",
		`{"model":"m","stream":true,"max_tokens":20000,"messages":[{"role":"user","content":"write"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	// 40,000 characters ≈ 10,000 output tokens at $100/M = $1.00.
	if got := mustUSD(t, cost); got < budget.Dollars(1)*9/10 {
		t.Errorf("a complete 40,000-character stream without message_delta usage was charged %s; want ≈ $1.00 (its output estimated, as a cut one is)", got)
	}
}

// A non-streamed call is generated whole before its answer's headers go
// out, and the provider bills it whole even when belay stops waiting: a
// 2xx body cut on its way is charged its prompt and its output limit
// (chargeCut: "the provider generated it whole"), and so is the same call
// timed out at timeouts.first_byte while the provider was generating it,
// as a reasoning model does for minutes (it was charged its prompt only,
// and its retry admitted as if no output were billed).
func TestAdv22_NonStreamFirstByteTimeoutChargedItsOutputLimit(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // still generating when belay gives up
	}, adv22Config("openai", "slow-model", "timeouts: {first_byte: 100ms}\npricing:\n  slow-model: {input: 1, output: 100}\n"))
	status, body, cost := postCost(t, url, "/v1/chat/completions",
		`{"model":"m","max_completion_tokens":10000,"messages":[{"role":"user","content":"think"}]}`)
	if status == 200 {
		t.Fatalf("status 200: %s", body)
	}
	// Its output limit, 10,000 tokens at $100/M = $1.00, as a cut answer is charged.
	if got := mustUSD(t, cost); got < budget.Dollars(1) {
		t.Errorf("a non-streamed call timed out at first_byte was charged %s; want its prompt and output limit (≥ $1.00), as a cut 2xx answer is", got)
	}
}

// Usage counts near 2^62 (a hostile or broken upstream) are capped at
// 2^40 each before they are summed: an Anthropic prompt's input, cache
// reads and cache writes of 2^62 each wrapped past int64 to a negative
// prompt, which a run's token limit let through. The run records a huge
// positive prompt and cost, and its next call is refused for its tokens.
func TestAdv22_HugeUsageCountsDoNotWrap(t *testing.T) {
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"ok"}],`+
			`"stop_reason":"end_turn","usage":{"input_tokens":4611686018427387904,"output_tokens":1,`+
			`"cache_creation_input_tokens":4611686018427387904,"cache_read_input_tokens":4611686018427387904}}`)
	})
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
limits: {max_turns: 10, deadline: 1m, max_tokens: 1000000}
models:
  - alias: m
    deployments:
      - {name: d, provider: anthropic, model: claude-sonnet-5-5, base_url: "`+up.URL+`", api_key: k}
`, nil)
	msg := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	if resp, body := g.do("POST", "/v1/messages", msg, "X-Belay-Run-Id", "huge"); resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}
	rec := g.run("huge")
	if rec.InputTokens < 3<<40 || rec.Cost <= 0 {
		t.Errorf("run %+v; want a prompt of at least 3 × 2^40 tokens and a positive cost", rec)
	}
	resp, body := g.do("POST", "/v1/messages", msg, "X-Belay-Run-Id", "huge")
	if resp.StatusCode == 200 || calls.Load() != 1 {
		t.Errorf("second call: %d after %d upstream calls, %s; want it refused for the run's tokens before it is sent", resp.StatusCode, calls.Load(), body)
	}
}
