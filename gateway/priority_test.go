package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// chatAnswer is a non-streamed chat.completion of 100,000 prompt and
// 1,000 completion tokens, stating tier as its service_tier ("" states
// none).
func chatAnswer(tier string) string {
	st := ""
	if tier != "" {
		st = `"service_tier":"` + tier + `",`
	}
	return `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06",` + st +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":100000,"completion_tokens":1000,"total_tokens":101000}}`
}

// A call served with priority processing is charged gpt-4o's priority
// price ($4.25 in, $17 out per million; https://openai.com/api-priority-processing/),
// whether the request asked for it or the project's default tier gave
// it (the request said "auto" or nothing, the answer says "priority").
// The answer's tier decides: a priority request that OpenAI served at the
// default tier is charged the standard price.
func TestPriorityChargedAtPriorityPrice(t *testing.T) {
	const priority, standard = "0.442", "0.26" // 100,000 × $4.25/M + 1,000 × $17/M; 100,000 × $2.50/M + 1,000 × $10/M
	for _, c := range []struct {
		name, asked, served, want string
	}{
		{"asked and served", `"service_tier":"priority",`, "priority", priority},
		{"asked fast, served", `"service_tier":"fast",`, "priority", priority},
		{"auto, project default priority", `"service_tier":"auto",`, "priority", priority},
		{"nothing asked, served priority", ``, "priority", priority},
		{"asked, downgraded to default", `"service_tier":"priority",`, "default", standard},
		{"asked, answer states no tier", `"service_tier":"priority",`, "", priority},
		{"default", `"service_tier":"default",`, "default", standard},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, chatAnswer(c.served))
			}, adv22Config("openai", "gpt-4o", ""))
			status, body, cost := postCost(t, url, "/v1/chat/completions",
				`{"model":"m",`+c.asked+`"max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)
			if status != 200 || mustUSD(t, cost) != mustUSD(t, c.want) {
				t.Errorf("status %d, cost %s; want 200 at $%s: %s", status, cost, c.want, body)
			}
		})
	}
}

// Streams state their tier too: each chat.completion.chunk carries
// service_tier, and a Responses stream's final response event does (its
// response.created may still say "auto", as asked).
func TestPriorityStreamsChargedAtPriorityPrice(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasSuffix(r.URL.Path, "/responses") {
			ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
			ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4o","service_tier":"auto","output":[]}}`)
			ev("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"m1","output_index":0,"content_index":0,"delta":"ok"}`)
			ev("response.completed", `{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-4o","service_tier":"priority",`+
				`"output":[{"type":"message","id":"m1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],`+
				`"usage":{"input_tokens":100000,"input_tokens_details":{"cached_tokens":0},"output_tokens":1000,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":101000}}}`)
			return
		}
		chunk := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","service_tier":"priority",`
		fmt.Fprintf(w, "data: %s\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"hi\"},\"finish_reason\":null}]}\n\n", chunk)
		fmt.Fprintf(w, "data: %s\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", chunk)
		fmt.Fprintf(w, "data: %s\"choices\":[],\"usage\":{\"prompt_tokens\":100000,\"completion_tokens\":1000,\"total_tokens\":101000}}\n\n", chunk)
		io.WriteString(w, "data: [DONE]\n\n")
	}, adv22Config("openai", "gpt-4o", ""))
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"m","stream":true,"max_output_tokens":1000,"input":"hi"}`},
	} {
		req, _ := http.NewRequest("POST", url+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cost := resp.Trailer.Get("X-Belay-Cost-Usd")
		if resp.StatusCode != 200 || cost == "" || mustUSD(t, cost) != mustUSD(t, "0.442") {
			t.Errorf("%s stream served at priority: status %d, cost trailer %q; want $0.442: %s", c.path, resp.StatusCode, cost, b)
		}
	}
}

// A priority request is reserved at the priority price: with a $0.20
// limit, 15,000 output tokens fit at gpt-4o's standard $10/M ($0.15) but
// not at its priority $17/M ($0.255), so the priority request is refused
// before anything is sent and the standard one goes on.
func TestPriorityReservedAtPriorityPrice(t *testing.T) {
	var calls atomic.Int32
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","service_tier":"default",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}`)
	}, adv22Config("openai", "gpt-4o", ""))
	status, body, _ := postCost(t, url, "/v1/chat/completions",
		`{"model":"m","service_tier":"priority","max_tokens":15000,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Max-Cost-Usd", "0.20")
	if status != http.StatusPaymentRequired && status != http.StatusTooManyRequests && status != http.StatusBadRequest || calls.Load() != 0 ||
		!strings.Contains(body, "budget") {
		t.Errorf("priority request over its money limit at the priority price: status %d, %d upstream calls: %s; want a budget refusal and no call",
			status, calls.Load(), body)
	}
	status, body, _ = postCost(t, url, "/v1/chat/completions",
		`{"model":"m","max_tokens":15000,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Max-Cost-Usd", "0.20")
	if status != 200 || calls.Load() != 1 {
		t.Errorf("standard request within its money limit: status %d, %d upstream calls: %s; want 200 after one call", status, calls.Load(), body)
	}
}

// A config may price a model's priority tier (pricing: {o3: {priority:
// …}}): the table's standard prices stay, and priority requests of it are
// served and charged the configured tier.
func TestPriorityPricedInConfig(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"o3","service_tier":"priority",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":100000,"completion_tokens":1000,"total_tokens":101000}}`)
	}, adv22Config("openai", "o3", "pricing: {o3: {priority: {input: 3.50, cached_input: 0.875, output: 14}}}"))
	status, body, cost := postCost(t, url, "/v1/chat/completions",
		`{"model":"m","service_tier":"priority","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 || mustUSD(t, cost) != mustUSD(t, "0.364") { // 100,000 × $3.50/M + 1,000 × $14/M
		t.Errorf("o3 priced for priority in config: status %d, cost %s; want 200 at $0.364: %s", status, cost, body)
	}
}
