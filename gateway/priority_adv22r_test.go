package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A service_tier that asks for priority processing is recognised (and, for
// a model without a priority price, refused) also when written with JSON
// escapes or after a first service_tier member of another type (a
// duplicate member: the decoder, like OpenAI's, keeps the last). Both
// reached the provider once, which billed them at priority rates.
func TestAdv22r_PriorityTierBypasses(t *testing.T) {
	for _, c := range []struct{ name, path, body string }{
		{"chat escape", "/v1/chat/completions", `{"model":"m","service_tier":"priorit\u0079","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat escape all", "/v1/chat/completions", `{"model":"m","service_tier":"\u0070\u0072\u0069\u006f\u0072\u0069\u0074\u0079","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat fast escaped", "/v1/chat/completions", `{"model":"m","service_tier":"f\u0061st","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses escape", "/v1/responses", `{"model":"m","service_tier":"p\u0072iority","max_output_tokens":100,"input":"hi"}`},
		{"chat duplicate after number", "/v1/chat/completions", `{"model":"m","service_tier":1,"service_tier":"priority","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat duplicate after object", "/v1/chat/completions", `{"model":"m","service_tier":{},"service_tier":"priority","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
		{"responses duplicate after bool", "/v1/responses", `{"model":"m","service_tier":true,"service_tier":"priority","max_output_tokens":100,"input":"hi"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			var sent atomic.Value
			url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				sent.Store(string(b))
				calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				if strings.HasSuffix(r.URL.Path, "/responses") {
					io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","model":"o3","service_tier":"priority","output":[{"type":"message","id":"m1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ok","annotations":[]}]}],`+
						`"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":10,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":20}}`)
					return
				}
				io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"o3","service_tier":"priority",`+
					`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+
					`"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}`)
			}, adv22Config("openai", "o3", ""))
			status, body, _ := postCost(t, url, c.path, c.body)
			if status != http.StatusBadRequest || calls.Load() != 0 || !strings.Contains(body, `"param":"service_tier"`) {
				s, _ := sent.Load().(string)
				t.Errorf("service_tier that decodes to a priority tier, model without a priority price: status %d, %d upstream calls (sent %s); want 400 service_tier and no call: %s",
					status, calls.Load(), s, body)
			}
		})
	}
}

// "flex" and "default" and a prompt that talks about priority still pass
// (no false refusal), also when a member nested in the body is named
// service_tier with "priority" (metadata is the client's, not a tier).
func TestAdv22r_PriorityTierNoFalseRefusal(t *testing.T) {
	var calls atomic.Int32
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"o3",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}`)
	}, adv22Config("openai", "o3", ""))
	for _, b := range []string{
		`{"model":"m","service_tier":"default","max_tokens":100,"messages":[{"role":"user","content":"priority"}]}`,
		`{"model":"m","metadata":{"service_tier":"priority"},"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		if status, body, _ := postCost(t, url, "/v1/chat/completions", b); status != 200 {
			t.Errorf("%s: status %d %s; want 200", b, status, body)
		}
	}
}
