package openai_test

import (
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect/openai"
)

// smallRequest is an agent's ordinary turn: a system prompt, a user
// message, a tool call and its result, one tool, and sampling settings.
const smallRequest = `{"model":"gpt-4o-mini","temperature":0.2,"max_completion_tokens":512,"stream":true,"stream_options":{"include_usage":true},
"tools":[{"type":"function","function":{"name":"lookup_order","description":"Look up an order by its id.","parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}}],
"messages":[{"role":"system","content":"You are a support agent.\nBe brief and polite."},
{"role":"user","content":"Where is my order 1234?"},
{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup_order","arguments":"{\"id\":\"1234\"}"}}]},
{"role":"tool","tool_call_id":"call_1","content":"{\"status\":\"shipped\",\"eta\":\"tomorrow\"}"},
{"role":"user","content":[{"type":"text","text":"And the invoice?"}]}]}`

func BenchmarkEstimatePromptTokens(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"small", smallRequest},
		{"text200KB", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 200_000/12) + `"}]}`},
	} {
		r, err := openai.ParseRequest([]byte(bc.body))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				openai.EstimatePromptTokens(r)
			}
		})
	}
}
