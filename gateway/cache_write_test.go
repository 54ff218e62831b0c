package gateway_test

// Reservations of Anthropic requests that write into the prompt cache
// (anthropic.CacheWrites), from an adversarial review: a byte search was
// evaded by JSON escapes and fooled by text that names cache_control.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/dialect/anthropic"
)

// semanticWrites is what Anthropic would write into the cache for body: it
// decodes the JSON (escapes resolved, as any JSON parser does) and looks for
// a non-null cache_control object anywhere, and a ttl "1h" inside one.
func semanticWrites(body []byte) (writes, long bool) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false, false
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				if k == "cache_control" {
					if cc, ok := val.(map[string]any); ok {
						writes = true
						if cc["ttl"] == "1h" {
							long = true
						}
					}
				}
				walk(val)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return writes, long
}

// cacheUpstream is a fake Anthropic that bills the whole prompt (belay's
// own estimate of it, so that reservation and bill are comparable) as a
// cache write when the request semantically has cache_control, 1-hour when
// one has ttl 1h. 20 output tokens.
func cacheUpstream(t *testing.T) string {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req, err := anthropic.ParseRequest(b)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		prompt := anthropic.EstimatePromptTokens(req)
		writes, long := semanticWrites(b)
		written, hour := int64(0), int64(0)
		if writes {
			written = prompt
			if long {
				hour = prompt
			}
		}
		usage := fmt.Sprintf(`"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":%d}`,
			prompt-written, written, written-hour, hour)
		if !strings.Contains(string(b), `"stream":true`) {
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{`+usage+`,"output_tokens":20}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{"+usage+",\"output_tokens\":1}}}\n\n")
		for _, ev := range [][2]string{
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":20}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
		}
	})
	return up.URL
}

const cacheGW = `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1, base: 1ms, cap: 2ms, max_retry_after: 30s}
models:
  - alias: c
    deployments:
      - {name: a, provider: anthropic, model: claude-sonnet-5-5, base_url: "%s", api_key: k}
`

var policy = strings.Repeat("policy text ", 3400) // about 10,000 tokens

type cacheCase struct {
	name string
	body string
	// what Anthropic bills (semantically): none, 5m or 1h
	billed budget.CacheWrites
}

// reservations returns belay's estimate of body's prompt and the three
// reservations (no writes, 5-minute, 1-hour) for max_tokens 20.
func reservations(t *testing.T, body string) (est int64, r [3]budget.USD) {
	t.Helper()
	req, err := anthropic.ParseRequest([]byte(body))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	est = anthropic.EstimatePromptTokens(req)
	p := budget.DefaultPricing()
	for i, w := range []budget.CacheWrites{budget.NoCacheWrites, budget.CacheWrites5m, budget.CacheWrites1h} {
		r[i], _ = p.EstimateWrites("anthropic", "claude-sonnet-5-5", est, 20, w)
	}
	return est, r
}

// A request whose cache_control (or ttl) is written with JSON escapes is
// billed by Anthropic as a cache write; it is reserved as one, so a limit
// its bill does not fit refuses it (a byte search missed it, and the run
// spent past X-Belay-Max-Cost-Usd).
func TestCacheWritesSpelledWithEscapesAreReserved(t *testing.T) {
	g := newGW(t, fmt.Sprintf(cacheGW, cacheUpstream(t)), nil)
	sys := func(cc string) string {
		return `{"model":"c","max_tokens":20,"system":[{"type":"text","text":"` + policy + `",` + cc + `}],"messages":[{"role":"user","content":"hi"}]}`
	}
	cases := []cacheCase{
		{"escaped key, 1h", sys(`"cache\u005fcontrol":{"type":"ephemeral","ttl":"1h"}`), budget.CacheWrites1h},
		{"escaped key, 5m", sys(`"cache\u005fcontrol":{"type":"ephemeral"}`), budget.CacheWrites5m},
		{"escaped ttl value", sys(`"cache_control":{"type":"ephemeral","ttl":"\u0031h"}`), budget.CacheWrites1h},
		{"escaped ttl key", sys(`"cache_control":{"type":"ephemeral","t\u0074l":"1h"}`), budget.CacheWrites1h},
		{"escaped key, 1h, stream", strings.Replace(sys(`"cache\u005fcontrol":{"type":"ephemeral","ttl":"1h"}`), `"max_tokens":20,`, `"max_tokens":20,"stream":true,`, 1), budget.CacheWrites1h},
	}
	for i, c := range cases {
		_, r := reservations(t, c.body)
		billed := r[c.billed]
		limit := (r[c.billed-1] + billed) / 2 // above the reservation one step down, below the bill
		id := fmt.Sprintf("evade-%d", i)
		resp, b := g.do("POST", "/v1/messages", c.body, "X-Belay-Run-Id", id, "X-Belay-Max-Cost-Usd", limit.Decimal())
		rec := g.run(id)
		t.Logf("%s: limit %s, reservations none/5m/1h %s/%s/%s: status %d, cost header %s, run cost %s",
			c.name, limit, r[0], r[1], r[2], resp.StatusCode, resp.Header.Get("X-Belay-Cost-Usd"), rec.Cost)
		if rec.Cost > limit {
			t.Errorf("%s: run cost %s past its limit %s (status %d); want 402 at admission: %.200s", c.name, rec.Cost, limit, resp.StatusCode, b)
		}
	}
}

// The same spelling does not spend past a tenant's budget.
func TestCacheWritesWithEscapesKeepTheTenantBudget(t *testing.T) {
	y := fmt.Sprintf(cacheGW, cacheUpstream(t)) + "tenants: [{name: acme, key: vk-acme, budget: {usd: 0.03, period: day}}]\n"
	g := newGW(t, y, nil)
	body := `{"model":"c","max_tokens":20,"system":[{"type":"text","text":"` + policy + `","cache\u005fcontrol":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"}]}`
	resp, b := g.do("POST", "/v1/messages", body, "X-Belay-Run-Id", "tenant-evade", "Authorization", "Bearer vk-acme")
	rec := g.run("acme~tenant-evade")
	t.Logf("status %d, cost %s", resp.StatusCode, rec.Cost)
	if rec.Cost > budget.Micros(30_000) {
		t.Errorf("tenant with a $0.03 budget charged %s for one call (status %d); want 402 at admission: %.200s", rec.Cost, resp.StatusCode, b)
	}
	// The plain spelling is refused, for comparison.
	plain := strings.Replace(body, `cache\u005fcontrol`, `cache_control`, 1)
	resp, _ = g.do("POST", "/v1/messages", plain, "X-Belay-Run-Id", "tenant-plain", "Authorization", "Bearer vk-acme")
	t.Logf("plain spelling afterwards: status %d", resp.StatusCode)
}

// Breakpoints in tools, a tool_result, the request itself, with odd
// whitespace, a ttl on a later block, and streamed, are all reserved.
func TestCacheWritesDetectedWhereTheAPITakesThem(t *testing.T) {
	g := newGW(t, fmt.Sprintf(cacheGW, cacheUpstream(t)), nil)
	tools := `,"tools":[{"name":"t","description":"` + policy + `","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}]`
	cases := []cacheCase{
		{"tools", `{"model":"c","max_tokens":20` + tools + `,"messages":[{"role":"user","content":"hi"}]}`, budget.CacheWrites1h},
		{"tool_result", `{"model":"c","max_tokens":20,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"` + policy + `","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`, budget.CacheWrites1h},
		{"top-level", `{"model":"c","max_tokens":20,"cache_control":{"type":"ephemeral","ttl":"1h"},"system":"` + policy + `","messages":[{"role":"user","content":"hi"}]}`, budget.CacheWrites1h},
		{"whitespace", `{"model":"c","max_tokens":20,"system":[{"type":"text","text":"` + policy + `", "cache_control" :	{ "type" : "ephemeral" ,
 "ttl"
 :	"1h" } }],"messages":[{"role":"user","content":"hi"}]}`, budget.CacheWrites1h},
		{"ttl on a later block", `{"model":"c","max_tokens":20,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"` + policy + `","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"}]}`, budget.CacheWrites1h},
		{"stream", `{"model":"c","max_tokens":20,"stream":true,"system":[{"type":"text","text":"` + policy + `","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"}]}`, budget.CacheWrites1h},
	}
	for i, c := range cases {
		_, r := reservations(t, c.body)
		limit := (r[c.billed-1] + r[c.billed]) / 2
		id := fmt.Sprintf("detect-%d", i)
		resp, b := g.do("POST", "/v1/messages", c.body, "X-Belay-Run-Id", id, "X-Belay-Max-Cost-Usd", limit.Decimal())
		if resp.StatusCode != http.StatusPaymentRequired {
			t.Errorf("%s: status %d under %s (reservations %v); want 402: %.300s", c.name, resp.StatusCode, limit, r, b)
		}
	}
}

// Requests that write nothing (or only a 5-minute write) into the cache
// are not reserved at a write price for data that names cache_control or
// "ttl":"1h" (a text block, a tool's schema, a tool_use's input).
func TestCacheControlAsDataIsNotAWrite(t *testing.T) {
	g := newGW(t, fmt.Sprintf(cacheGW, cacheUpstream(t)), nil)
	cases := []cacheCase{
		// A user message whose text is the word cache_control.
		{"text is cache_control", `{"model":"c","max_tokens":20,"system":"` + policy + `","messages":[{"role":"user","content":[{"type":"text","text":"cache_control"}]}]}`, budget.NoCacheWrites},
		// A tool whose input schema has a property named cache_control
		// (a CDN or HTTP-header tool).
		{"schema property", `{"model":"c","max_tokens":20,"system":"` + policy + `","tools":[{"name":"set_headers","input_schema":{"type":"object","properties":{"cache_control":{"type":"string"}}}}],"messages":[{"role":"user","content":"hi"}]}`, budget.NoCacheWrites},
		// Ordinary 5-minute caching of the system prompt, and an earlier
		// tool call whose input has "ttl":"1h" (a cache/session tool).
		{"tool input ttl 1h", `{"model":"c","max_tokens":20,"system":[{"type":"text","text":"` + policy + `","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"keep it"},{"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"set_ttl","input":{"key":"s1","ttl":"1h"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"ok"}]}]}`, budget.CacheWrites5m},
	}
	for i, c := range cases {
		_, r := reservations(t, c.body)
		limit := (r[c.billed] + r[c.billed+1]) / 2 // fits the bill and its honest reservation
		id := fmt.Sprintf("fp-%d", i)
		resp, b := g.do("POST", "/v1/messages", c.body, "X-Belay-Run-Id", id, "X-Belay-Max-Cost-Usd", limit.Decimal())
		if resp.StatusCode != 200 {
			t.Errorf("%s: status %d under %s (the call costs %s); want 200: %.300s", c.name, resp.StatusCode, limit, r[c.billed], b)
		}
	}
}

// A model that is not Claude, served over Anthropic's API and priced with
// cached_input: 0 and cache_write: 0, is billed those tokens at input
// (Claude's multipliers were applied to every model of provider anthropic).
func TestNonClaudeModelKeepsItsZeroCachePrices(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":500000,"cache_read_input_tokens":500000,"output_tokens":0}}`)
	})
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
pricing:
  anthropic/kimi-k2: {input: 1, output: 2, cached_input: 0, cache_write: 0}
models:
  - alias: c
    deployments:
      - {name: a, provider: anthropic, model: kimi-k2, base_url: "`+up.URL+`", api_key: k}
`, nil)
	resp, b := g.do("POST", "/v1/messages", `{"model":"c","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", "zero")
	t.Logf("status %d cost %s", resp.StatusCode, resp.Header.Get("X-Belay-Cost-Usd"))
	if resp.StatusCode != 200 {
		t.Fatalf("%s", b)
	}
	if got := resp.Header.Get("X-Belay-Cost-Usd"); got != "1" && got != "1.00" {
		t.Errorf("1M prompt tokens (500K written, 500K read) at input $1 with cached_input: 0 and cache_write: 0 cost %s; config.Price says 0 bills them at input ($1)", got)
	}
}
