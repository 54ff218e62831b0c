package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// The Responses API through the gateway, as an adversarial review broke
// it: each test is one finding, fixed.

// The SDK's own item reference (ResponseInputItemParamOfItemReference)
// marshals without "type", which the API's schema makes optional: belay
// passes it on (it refused it with 400).
func TestResponsesItemReferenceWithoutType(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	_, err := h.openai().Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("hi", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfItemReference("msg_123"),
		}}})
	if err != nil {
		t.Fatalf("belay refused what the SDK sends and OpenAI accepts: %v", err)
	}
}

// A deployment that does not serve the Responses API answers 404, which
// is misdirected (failure.Error.Misdirected): its breaker, which chat
// completions share, does not count it (three Responses calls opened it,
// and chat completions on a healthy deployment were refused).
func TestResponsesMissingEndpointLeavesTheBreaker(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, unknownURL)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	})
	g := accountsGW(t, 2, "consecutive_failures: 3, open_for: 60s", "chat-only", up.URL)
	resp, body := g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("chat before: %d %s", resp.StatusCode, body)
	}
	for i := 0; i < 3; i++ {
		// The provider's 404 is relayed as sent.
		resp, body = g.do("POST", "/v1/responses", `{"model":"m","input":"hi"}`)
		if resp.StatusCode != 404 || !strings.Contains(body, `"code":"unknown_url"`) {
			t.Errorf("responses #%d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body = g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("chat completions after 3 Responses calls: %d %s (the deployment serves chat fine)", resp.StatusCode, body)
	}
}

// respStream is a fake upstream that answers every request with the
// stream events given (respEvent's, or any SSE text), then ends its body.
func respStream(t *testing.T, events ...string) *fakeUpstream {
	return newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		io.WriteString(w, strings.Join(events, ""))
	})
}

// respDelta is a response.output_text.delta event of text, numbered seq.
func respDelta(seq int, text string) string {
	return respEvent("response.output_text.delta", fmt.Sprintf(
		`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"m","output_index":0,"content_index":0,"delta":%q}`, seq, text))
}

func respEvent(typ, data string) string {
	return "event: " + typ + "\ndata: " + data + "\n\n"
}

const respCreated = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}`

// A Responses stream cut in the middle of a function call: the trace
// (capture: full) records the call's name and the arguments the client
// got, as the chat completions path records a partial tool call (it
// recorded nothing).
func TestResponsesCutFunctionCallRecorded(t *testing.T) {
	f := respStream(t,
		respEvent("response.created", respCreated),
		respEvent("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"refund","arguments":"","status":"in_progress"}}`),
		respEvent("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"order\":\"A-1"}`))
	h := newHarness(t, harnessOpts{extra: fakeAlias(f) + "capture: full\n"})
	var resp *http.Response
	resp, body := h.post("/v1/responses", `{"model":"fake","input":"refund A-1","stream":true}`, nil)
	if !strings.Contains(body, `"delta":"{\"order\":\"A-1"`) || !strings.Contains(body, "event: error") {
		t.Fatalf("client stream: %s", body)
	}
	h.quiesce()
	var out string
	for _, s := range storedSpans(t, h.stack, resp.Header.Get("X-Belay-Run-Id")) {
		if o, ok := s.Attrs["gen_ai.output.messages"].(string); ok {
			out = o
		}
	}
	if !strings.Contains(out, "refund") || !strings.Contains(out, "A-1") {
		t.Errorf("recorded output %q: the client saw a call of refund with arguments {\"order\":\"A-1; the trace has none of it", out)
	}
}

// A Responses stream that ends with "data: [DONE]" and no
// response.completed (an OpenAI-compatible server, a proxy that cut it
// and closed cleanly) is a cut: the client's stream ends with belay's
// error event, which the SDK raises (it ended cleanly).
func TestResponsesDoneWithoutCompletedIsACut(t *testing.T) {
	f := respStream(t,
		respEvent("response.created", respCreated),
		respDelta(1, "partial"),
		"data: [DONE]\n\n")
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	types, err := sdkResponsesStream(h)
	if err == nil {
		t.Errorf("events %v then a clean end: no response.completed and no error", types)
	}
}

// A request continuing a stored response (previous_response_id) whose
// first deployment fails transiently falls back to a deployment of another
// account, which cannot have the response: the client gets the first
// deployment's 500, which its SDK retries, naming the fallback's refusal
// (it got the fallback's 400 previous_response_not_found, x-should-retry:
// false, for a response that exists).
func TestResponsesPreviousResponseKeepsTheTransientFailure(t *testing.T) {
	a := canned(t, 500, serverError)
	b := canned(t, 400, prevNotFound)
	g := accountsGW(t, 2, "consecutive_failures: 1000", "acct-a", a.URL, "acct-b", b.URL)
	resp, body := g.do("POST", "/v1/responses", `{"model":"m","previous_response_id":"resp_abc","input":"and then?"}`)
	t.Logf("%d x-should-retry=%q deployment=%q %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), resp.Header.Get("X-Belay-Deployment"), body)
	if resp.StatusCode != 500 || !strings.Contains(body, `"type":"server_error"`) ||
		!strings.Contains(body, "then deployment acct-b refused the call: Previous response with id 'resp_abc' not found.") {
		t.Errorf("%d %s: want acct-a's 500, naming acct-b's refusal", resp.StatusCode, body)
	}
}

// The same usage (cached and reasoning tokens) reported by a Responses
// stream and by a chat stream is charged the same.
func TestResponsesUsageChargedAsChat(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		if strings.HasSuffix(r.URL.Path, "/responses") {
			io.WriteString(w, respEvent("response.created", respCreated)+
				respEvent("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"hello"}`)+
				respEvent("response.completed", `{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":100000,"input_tokens_details":{"cached_tokens":80000},"output_tokens":10000,"output_tokens_details":{"reasoning_tokens":9000},"total_tokens":110000}}}`))
			return
		}
		io.WriteString(w, roleChunk+chunk("hello")+stopChunk+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":100000,"prompt_tokens_details":{"cached_tokens":80000},"completion_tokens":10000,"completion_tokens_details":{"reasoning_tokens":9000},"total_tokens":110000}}`+"\n\n"+"data: [DONE]\n\n")
	})
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	r1, b1 := h.post("/v1/responses", `{"model":"fake","input":"hi","stream":true}`, nil)
	r2, b2 := h.post("/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":true}`, nil)
	_ = b1
	_ = b2
	h.quiesce()
	a, b := h.record(r1.Header.Get("X-Belay-Run-Id")), h.record(r2.Header.Get("X-Belay-Run-Id"))
	t.Logf("responses: in %d out %d cost %d; chat: in %d out %d cost %d", a.InputTokens, a.OutputTokens, a.Cost, b.InputTokens, b.OutputTokens, b.Cost)
	if a.Cost != b.Cost || a.InputTokens != b.InputTokens || a.OutputTokens != b.OutputTokens {
		t.Errorf("responses charged in %d out %d cost %d; chat in %d out %d cost %d", a.InputTokens, a.OutputTokens, a.Cost, b.InputTokens, b.OutputTokens, b.Cost)
	}
}

// The provider's own mid-stream error event (OpenAI's shape: no "error"
// member) reaches openai-go as an error (it was one more event, and
// Err() was nil: a clean end).
func TestResponsesProviderErrorEventRaised(t *testing.T) {
	f := respStream(t,
		respEvent("response.created", respCreated),
		respDelta(1, "partial"),
		respEvent("error", `{"type":"error","code":"server_error","message":"The server had an error while processing your request.","param":null,"sequence_number":2}`))
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	types, err := sdkResponsesStream(h)
	if err == nil {
		t.Errorf("events %v, Err() nil: the failure is not raised", types)
	}
}

// A non-streamed response without usage is charged its output's size,
// estimated, not its whole body's: a response object echoes the request's
// instructions and tools, and a long system prompt was charged as output.
func TestResponsesNoUsageEstimatesTheOutput(t *testing.T) {
	big := strings.Repeat("You are a careful agent. ", 2000) // 50 KB
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"resp_1","object":"response","status":"completed","instructions":%q,"output":[{"type":"message","id":"m","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":null}`, big)
	})
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	resp, _ := h.post("/v1/responses", fmt.Sprintf(`{"model":"fake","instructions":%q,"input":"hi"}`, big), nil)
	h.quiesce()
	r := h.record(resp.Header.Get("X-Belay-Run-Id"))
	t.Logf("charged in %d out %d for an answer of 2 characters", r.InputTokens, r.OutputTokens)
	if r.OutputTokens != 1 { // "ok": 2 characters, one token
		t.Errorf("output charged %d tokens; the answer is \"ok\"", r.OutputTokens)
	}
}

// A continuation (previous_response_id) that the first deployment's
// account does not have falls back to the next deployment, whose account
// may (an agent's earlier turn was served there while the first was
// down): a previous_response_not_found is misdirected, not a refusal of
// the request, and the first deployment's breaker does not count it.
func TestResponsesPreviousResponseFoundOnTheFallback(t *testing.T) {
	a := canned(t, 400, prevNotFound)
	b := canned(t, 200, `{"id":"resp_2","object":"response","status":"completed","error":null,"output":[{"type":"message","id":"m","status":"completed","role":"assistant","content":[{"type":"output_text","text":"continued","annotations":[]}]}],"usage":{"input_tokens":20,"output_tokens":2,"total_tokens":22}}`)
	g := accountsGW(t, 2, "consecutive_failures: 1", "acct-a", a.URL, "acct-b", b.URL)
	for range 2 {
		resp, body := g.do("POST", "/v1/responses", `{"model":"m","previous_response_id":"resp_abc","input":"and then?"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-Belay-Deployment") != "acct-b" || !strings.Contains(body, "continued") {
			t.Fatalf("%d deployment %q %s", resp.StatusCode, resp.Header.Get("X-Belay-Deployment"), body)
		}
		// One attempt on acct-a: the refusal is not retried there, and
		// its breaker (open after one failure) stays closed.
		if got := resp.Header.Get("X-Belay-Attempts"); got != "2" {
			t.Errorf("attempts %s, want 2", got)
		}
	}
}

// accountsGW is a gateway whose alias m (priced $1 per million tokens in
// and out) has one openai deployment per name and upstream URL pair
// (nameURL: name, url, name, url, ...), in order, with retry
// max_attempts attempts and breaker settings breaker ("" for the
// defaults).
func accountsGW(t *testing.T, attempts int, breaker string, nameURL ...string) *gw {
	t.Helper()
	var y strings.Builder
	fmt.Fprintf(&y, "listen: 127.0.0.1:0\nstore: memory://\nretry: {max_attempts: %d, base: 1ms, cap: 2ms}\n", attempts)
	if breaker != "" {
		fmt.Fprintf(&y, "breaker: {%s}\n", breaker)
	}
	y.WriteString("pricing: {\"m\": {input: 1, output: 1}}\nmodels:\n  - alias: m\n    deployments:\n")
	for i := 0; i+1 < len(nameURL); i += 2 {
		fmt.Fprintf(&y, "      - {name: %s, provider: openai, model: m, base_url: %s/v1, api_key: k%d}\n", nameURL[i], nameURL[i+1], i)
	}
	return newGW(t, y.String(), nil)
}

// canned returns an upstream that answers every request with status and
// the JSON body.
func canned(t *testing.T, status int, body string) *httptest.Server {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

// OpenAI's Responses API refusals the review tests answer with.
const (
	prevNotFound = `{"error":{"message":"Previous response with id 'resp_abc' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`
	unknownURL   = `{"error":{"message":"Unknown request URL: POST /v1/responses.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`
	serverError  = `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`
)

// sdkResponsesStream streams a Responses call to alias "fake" through the
// official openai-go client and returns the event types it yielded and its
// Err().
func sdkResponsesStream(h *harness) ([]string, error) {
	s := h.openai().Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "fake",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var types []string
	for s.Next() {
		types = append(types, s.Current().Type)
	}
	return types, s.Err()
}
