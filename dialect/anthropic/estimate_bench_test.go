package anthropic_test

import (
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect/anthropic"
)

// smallRequest is an agent's ordinary turn: a system prompt, a user
// message, a tool use and its result, one tool, and sampling settings.
const smallRequest = `{"model":"claude-sonnet-4-5","max_tokens":512,"temperature":0.2,"stream":true,"metadata":{"user_id":"u1"},
"system":[{"type":"text","text":"You are a support agent.\nBe brief and polite.","cache_control":{"type":"ephemeral"}}],
"tools":[{"name":"lookup_order","description":"Look up an order by its id.","input_schema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}],
"messages":[{"role":"user","content":"Where is my order 1234?"},
{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t1","name":"lookup_order","input":{"id":"1234"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"{\"status\":\"shipped\",\"eta\":\"tomorrow\"}"},{"type":"text","text":"And the invoice?"}]}]}`

func BenchmarkEstimatePromptTokens(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"small", smallRequest},
		{"text200KB", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 200_000/12) + `"}]}`},
	} {
		r, err := anthropic.ParseRequest([]byte(bc.body))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				anthropic.EstimatePromptTokens(r)
			}
		})
	}
}
