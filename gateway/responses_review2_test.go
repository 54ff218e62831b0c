package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// Findings of a second adversarial review of the Responses API and the
// header check, fixed.

// A provider's refusal of the state a request names for a reason of its
// own (a malformed conversation) is the request's, not a missing state's:
// one deployment refuses it and the chain stops (a second review: it was
// sent to all five).
func TestResponsesMalformedStateStopsTheChain(t *testing.T) {
	var hits atomic.Int64
	h := func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"message":"Invalid type for 'conversation': expected a string or object.","type":"invalid_request_error","param":"conversation","code":"invalid_type"}}`)
	}
	var deps strings.Builder
	for i := range 5 {
		u := upstream(t, h)
		fmt.Fprintf(&deps, "      - {name: d%d, provider: openai, model: m, base_url: %s/v1, api_key: k}\n", i, u.URL)
	}
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 3, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1}
pricing: {"m": {input: 1, output: 1}}
models:
  - alias: m
    deployments:
`+deps.String(), nil)
	resp, body := g.do("POST", "/v1/responses", `{"model":"m","conversation":12,"input":"x"}`)
	t.Logf("status %d attempts %s upstream requests %d: %s", resp.StatusCode, resp.Header.Get("X-Belay-Attempts"), hits.Load(), body)
	if hits.Load() > 1 {
		t.Errorf("a malformed conversation (the client's own 400) was sent to %d deployments", hits.Load())
	}
}

// The deployment that holds the stored response refuses the continuation
// for a reason of its own (store=false): the client gets that reason, not
// the fallback's "not found" (the chain stops there).
func TestResponsesStateRefusedForItsOwnReason(t *testing.T) {
	a := canned(t, 400, `{"error":{"message":"Previous response resp_abc cannot be used: it was created with store=false.","type":"invalid_request_error","param":"previous_response_id","code":"invalid_value"}}`)
	b := canned(t, 400, prevNotFound)
	g := accountsGW(t, 2, "consecutive_failures: 1000", "acct-a", a.URL, "acct-b", b.URL)
	resp, body := g.do("POST", "/v1/responses", `{"model":"m","previous_response_id":"resp_abc","input":"and then?"}`)
	t.Logf("%d %s", resp.StatusCode, body)
	if !strings.Contains(body, "store=false") {
		t.Errorf("the client is not told acct-a's reason: %s", body)
	}
}

// When every deployment is misdirected, a refusal saying the previous
// response is missing is reported over a plain 404 of a deployment
// without the Responses API: it tells the client to resend the history.
func TestResponsesMissingStateOverMissingEndpoint(t *testing.T) {
	a := canned(t, 400, prevNotFound)
	b := canned(t, 404, unknownURL)
	g := accountsGW(t, 2, "", "openai", a.URL, "chat-only", b.URL)
	resp, body := g.do("POST", "/v1/responses", `{"model":"m","previous_response_id":"resp_abc","input":"and then?"}`)
	t.Logf("%d %s", resp.StatusCode, body)
	if !strings.Contains(body, "previous_response_not_found") {
		t.Errorf("client told %s instead of previous_response_not_found", body)
	}
}

// A request with a bad key and an unknown X-Belay-* header gets 401: the
// key is checked first.
func TestUnknownHeaderAfterTheKey(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "tenants:\n  - {name: acme, key: vk-acme}\n"})
	resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"X-Belay-Trace": "1", "Authorization": "Bearer wrong"})
	t.Logf("%d %s", resp.StatusCode, body)
	if resp.StatusCode != 401 {
		t.Errorf("bad key + unknown header: %d, want 401", resp.StatusCode)
	}
}

// A provider's error event after output whose data is JSON but not an
// object ends the client's stream with belay's own error event, which
// the SDK raises.
func TestResponsesErrorEventNotAnObject(t *testing.T) {
	f := respStream(t,
		respEvent("response.created", respCreated),
		respDelta(1, "partial"),
		"event: error\ndata: \"upstream overloaded\"\n\n")
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	_, raw := h.post("/v1/responses", `{"model":"fake","input":"hi","stream":true}`, nil)
	t.Logf("client stream tail: %q", raw[max(0, len(raw)-300):])
	types, err := sdkResponsesStream(h)
	t.Logf("events %v err %v", types, err)
	if err == nil {
		t.Errorf("stream ended cleanly after the provider's error event")
	}
}

// An output limit of 2^63-1 does not wrap the token estimate past a token
// limit (a second review: the sum went negative and the call was
// admitted under a 100-token limit).
func TestMaxOutputTokensAtTheLimitOfInt64(t *testing.T) {
	var hits atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"resp_2","object":"response","status":"completed","error":null,"output":[],"usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}}`)
	})
	g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1000}
pricing: {"m": {input: 0, output: 0}}
limits: {max_cost_usd: 0, max_turns: 0, deadline: 0, max_tokens: 0}
models:
  - alias: m
    deployments:
      - {name: a, provider: openai, model: m, base_url: %s/v1, api_key: k}
`, up.URL), nil)
	for _, mo := range []string{"9223372036854775807", "9223372036854775800", "9223372036854775000"} {
		resp, body := g.do("POST", "/v1/responses", `{"model":"m","input":"hi","max_output_tokens":`+mo+`}`, "X-Belay-Max-Tokens", "100")
		t.Logf("%s: %d %s", mo, resp.StatusCode, body[:min(len(body), 200)])
		if resp.StatusCode != 402 || !strings.Contains(body, "the run's limit of 100 tokens") {
			t.Errorf("max_output_tokens %s under a 100-token limit: %d %s", mo, resp.StatusCode, body)
		}
	}
}

// The same through chat completions and messages.
func TestMaxOutputTokensAtTheLimitOfInt64OtherAPIs(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}`)
			return
		}
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
	})
	g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1000}
pricing: {"m": {input: 0, output: 0}, "c": {input: 0, output: 0}}
limits: {max_cost_usd: 0, max_turns: 0, deadline: 0, max_tokens: 100}
models:
  - alias: m
    deployments:
      - {name: a, provider: openai, model: m, base_url: %[1]s/v1, api_key: k}
  - alias: c
    deployments:
      - {name: b, provider: anthropic, model: c, base_url: %[1]s, api_key: k}
`, up.URL), nil)
	resp, body := g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":9223372036854775807}`)
	t.Logf("chat, config max_tokens 100: %d %.150s", resp.StatusCode, body)
	if resp.StatusCode == 200 {
		t.Errorf("chat admitted under limits.max_tokens 100")
	}
	resp, body = g.do("POST", "/v1/messages", `{"model":"c","messages":[{"role":"user","content":"hi"}],"max_tokens":9223372036854775807}`, "anthropic-version", "2023-06-01")
	t.Logf("messages, config max_tokens 100: %d %.150s", resp.StatusCode, body)
	if resp.StatusCode == 200 {
		t.Errorf("messages admitted under limits.max_tokens 100")
	}
}

// A continuation (previous_response_id) of a response the gateway relayed
// is reserved with that response's context, which the provider bills
// again: under a $0.05 limit, a continuation of a 1,000,000-token context
// at $2.50 per million is refused before it goes upstream (a second
// review: eight concurrent ones were each reserved for "and then?" and
// charged $2.50). The context is the tenant's: another tenant's
// continuation of the same id is reserved for what it sends.
func TestResponsesContinuationReservesItsContext(t *testing.T) {
	var hits atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","error":null,"output":[{"type":"message","id":"m","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":{"input_tokens":1000000,"output_tokens":2,"total_tokens":1000002}}`)
	})
	g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1000}
pricing: {"m": {input: 2.5, output: 10}}
tenants:
  - {name: acme, key: vk-acme, limits: {max_cost_usd: 10}}
  - {name: globex, key: vk-globex, limits: {max_cost_usd: 10}}
models:
  - alias: m
    deployments:
      - {name: a, provider: openai, model: m, base_url: %s/v1, api_key: k}
`, up.URL), nil)
	resp, body := g.do("POST", "/v1/responses", `{"model":"m","input":"a very long document","max_output_tokens":16}`, "Authorization", "Bearer vk-acme")
	if resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}
	cont := `{"model":"m","previous_response_id":"resp_1","input":"and then?","max_output_tokens":16}`
	resp, body = g.do("POST", "/v1/responses", cont, "Authorization", "Bearer vk-acme", "X-Belay-Max-Cost-Usd", "0.05")
	if resp.StatusCode != 402 || !strings.Contains(body, "estimated cost $2.50") || !strings.Contains(body, "limit of $0.05") {
		t.Errorf("acme's continuation under $0.05: %d %s", resp.StatusCode, body)
	}
	if hits.Load() != 1 {
		t.Errorf("upstream calls %d, want 1: the continuation must be refused before it goes upstream", hits.Load())
	}
	resp, body = g.do("POST", "/v1/responses", cont, "Authorization", "Bearer vk-globex", "X-Belay-Max-Cost-Usd", "0.05")
	if resp.StatusCode != 200 {
		t.Errorf("globex's continuation (acme's response is not globex's context): %d %s", resp.StatusCode, body)
	}
}

// The same when the response was streamed: its context comes from the
// stream's response.completed.
func TestResponsesStreamedContinuationReservesItsContext(t *testing.T) {
	f := respStream(t,
		respEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_s","object":"response","status":"in_progress","output":[],"usage":null}}`),
		respDelta(1, "ok"),
		respEvent("response.completed", `{"type":"response.completed","sequence_number":2,"response":{"id":"resp_s","object":"response","status":"completed","output":[],"usage":{"input_tokens":1000000,"output_tokens":2,"total_tokens":1000002}}}`))
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	if resp, body := h.post("/v1/responses", `{"model":"fake","input":"a very long document","stream":true}`, nil); resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}
	resp, body := h.post("/v1/responses", `{"model":"fake","previous_response_id":"resp_s","input":"and then?","max_output_tokens":16}`,
		map[string]string{"X-Belay-Max-Cost-Usd": "0.05"})
	if resp.StatusCode != 402 || f.calls.Load() != 1 {
		t.Errorf("continuation of a 1,000,000-token context under $0.05: %d %s (upstream calls %d)", resp.StatusCode, body, f.calls.Load())
	}
}
