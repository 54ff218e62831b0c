package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/memstore"
)

// toolFeesGateway is a gateway over one upstream that answers a
// Responses call with two web searches and a file search, and a Messages
// call with three web searches (usage.server_tool_use), streamed or not.
// Prices: tool-model $1/$2 per million tokens, its web search $0.02 a call
// (an override), its file search OpenAI's list fee ($0.0025);
// claude-tools $1/$2, its web search Anthropic's list fee ($0.01).
func toolFeesGateway(t *testing.T) (url string, upstreamCalls *atomic.Int64) {
	t.Helper()
	upstreamCalls = &atomic.Int64{}
	h := func(w http.ResponseWriter, r *http.Request) {
		upstreamCalls.Add(1)
		b, _ := io.ReadAll(r.Body)
		stream := strings.Contains(string(b), `"stream":true`)
		usage := `{"input_tokens":1000,"output_tokens":500,"total_tokens":1500}`
		output := `[{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"web_search_call","id":"ws_2","status":"completed"},` +
			`{"type":"file_search_call","id":"fs_1","status":"completed","queries":["q"]},` +
			`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"found","annotations":[]}]}]`
		switch {
		case r.URL.Path == "/v1/responses" && stream:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
			for i, id := range []string{"ws_1", "ws_2"} {
				fmt.Fprintf(w, "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":%d,\"output_index\":%d,\"item\":{\"type\":\"web_search_call\",\"id\":%q,\"status\":\"in_progress\"}}\n\n", i+1, i, id)
			}
			fmt.Fprintf(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":3,\"content_index\":0,\"delta\":\"found\"}\n\n")
			fmt.Fprintf(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":4,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"tool-model\",\"output\":%s,\"usage\":%s}}\n\n", output, usage)
		case r.URL.Path == "/v1/responses":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"resp_1","object":"response","status":"completed","model":"tool-model","output":%s,"usage":%s}`, output, usage)
		case r.URL.Path == "/v1/messages" && stream:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-tools\",\"content\":[],\"usage\":{\"input_tokens\":1000,\"output_tokens\":1}}}\n\n"+
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"found\"}}\n\n"+
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":500,\"server_tool_use\":{\"web_search_requests\":3}}}\n\n"+
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		case r.URL.Path == "/v1/messages":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-tools","content":[{"type":"text","text":"found"}],`+
				`"stop_reason":"end_turn","usage":{"input_tokens":1000,"output_tokens":500,"server_tool_use":{"web_search_requests":3}}}`)
		default:
			http.NotFound(w, r)
		}
	}
	return gatewayOver(t, h, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
limits: {max_turns: 50, deadline: 1m, max_cost_usd: 5}
pricing:
  tool-model: {input: 1, output: 2, web_search_call: 0.02}
  claude-tools: {input: 1, output: 2}
models:
  - alias: tool-model
    deployments:
      - {name: oa, provider: openai, model: tool-model, base_url: %[1]s/v1, api_key: sk-x}
  - alias: claude-tools
    deployments:
      - {name: an, provider: anthropic, model: claude-tools, base_url: %[1]s, api_key: sk-x}
`), upstreamCalls
}

// A call is charged its built-in tool calls' fees on top of its tokens:
// 1,000 input tokens at $1/M and 500 output at $2/M are $0.002; two web
// searches at $0.02 and a file search at $0.0025 add $0.0425 (Responses);
// three web searches at $0.01 add $0.03 (Messages). Streamed, the cost
// comes in the trailer.
func TestBuiltinToolCallsAreCharged(t *testing.T) {
	url, _ := toolFeesGateway(t)
	for _, c := range []struct {
		name, path, body, want string
	}{
		{"responses", "/v1/responses", `{"model":"tool-model","input":"search","tools":[{"type":"web_search"},{"type":"file_search","vector_store_ids":["vs_1"]}]}`, "0.0445"},
		{"responses stream", "/v1/responses", `{"model":"tool-model","input":"search","stream":true,"tools":[{"type":"web_search"},{"type":"file_search","vector_store_ids":["vs_1"]}]}`, "0.0445"},
		{"messages", "/v1/messages", `{"model":"claude-tools","max_tokens":600,"messages":[{"role":"user","content":"search"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`, "0.032"},
		{"messages stream", "/v1/messages", `{"model":"claude-tools","max_tokens":600,"stream":true,"messages":[{"role":"user","content":"search"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`, "0.032"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", url+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			got := resp.Header.Get(gateway.HeaderCostUSD)
			if got == "" {
				got = resp.Trailer.Get(gateway.HeaderCostUSD)
			}
			if got != c.want {
				t.Errorf("cost %q, want %q (body %.200s)", got, c.want, body)
			}
		})
	}
}

// The reservation holds the fees of the built-in tool calls a request
// declares: max_tool_calls (Responses) or max_uses (Messages) of them,
// one per tool without. 50 web searches at $0.02 ($1) do not fit a $0.10
// limit, and the call is refused before it goes upstream; one does.
func TestBuiltinToolCallsAreReserved(t *testing.T) {
	url, upstream := toolFeesGateway(t)
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set(gateway.HeaderMaxCostUSD, "0.1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		name, path, body string
		status           int
		calls            int64
	}{
		{"50 searches", "/v1/responses", `{"model":"tool-model","input":"search","max_output_tokens":100,"max_tool_calls":50,"tools":[{"type":"web_search"}]}`, 402, 0},
		{"one search", "/v1/responses", `{"model":"tool-model","input":"search","max_output_tokens":100,"tools":[{"type":"web_search"}]}`, 200, 1},
		{"max_uses 20", "/v1/messages", `{"model":"claude-tools","max_tokens":100,"messages":[{"role":"user","content":"search"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":20}]}`, 402, 1},
		{"max_uses 5", "/v1/messages", `{"model":"claude-tools","max_tokens":100,"messages":[{"role":"user","content":"search"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`, 200, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := post(c.path, c.body)
			if status != c.status {
				t.Errorf("status %d, want %d: %.300s", status, c.status, body)
			}
			if n := upstream.Load(); n != c.calls {
				t.Errorf("upstream called %d times so far, want %d", n, c.calls)
			}
		})
	}
}

// gatewayOver builds a gateway over an upstream served by h (both on
// 127.0.0.1) from the config yaml, whose %[1]s is the upstream's URL.
func gatewayOver(t *testing.T, h http.HandlerFunc, yaml string) string {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	cfg, err := config.Parse([]byte(fmt.Sprintf(yaml, up.URL)), "test.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	st, err := gateway.Build(context.Background(), cfg, gateway.Options{Store: memstore.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	gw := httptest.NewServer(st.Server.Handler())
	t.Cleanup(gw.Close)
	return gw.URL
}

// postCost posts body to the gateway at url+path (hdr: more header name,
// value pairs) and returns the status, the body and the call's cost
// (X-Belay-Cost-Usd, from the header or the trailer).
func postCost(t *testing.T, url, path, body string, hdr ...string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cost := resp.Header.Get(gateway.HeaderCostUSD)
	if cost == "" {
		cost = resp.Trailer.Get(gateway.HeaderCostUSD)
	}
	return resp.StatusCode, string(b), cost
}
