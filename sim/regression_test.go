package sim_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/sim"
)

const limitScript = `
rules:
  - when: {contains: long}
    reply: {text: "The quick brown fox jumps over the lazy dog, twice over."}
  - when: {contains: call}
    reply:
      text: "ok"
      tool_calls: [{name: lookup, arguments: {order_id: "A-1001"}}, {name: second, arguments: {x: 1}}]
`

// Finding 3 (sim part): the simulator ignored max_tokens (max_tokens: 1
// returned 22 tokens), so cost tests on the sim overshot. The reply is now
// cut to the limit (chars/4), with finish_reason "length" / stop_reason
// "max_tokens", and the usage reports at most the limit.
func TestRegression_3_SimHonoursMaxTokens(t *testing.T) {
	_, ts := startSim(t, sim.Config{Script: mustScript(t, limitScript)})
	msg := []any{map[string]any{"role": "user", "content": "long"}}
	body := func(v map[string]any) string { b, _ := json.Marshal(v); return string(b) }

	for _, field := range []string{"max_tokens", "max_completion_tokens"} {
		_, b, err := post(t, ts.URL+chatPath, body(map[string]any{"model": "gpt-4o", field: 2, "messages": msg}))
		if err != nil {
			t.Fatal(err)
		}
		var c openai.Completion
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		if got := *c.Choices[0].Message.Content; got != "The quic" || c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 2 {
			t.Errorf("%s: content %q finish %q usage %+v", field, got, c.Choices[0].FinishReason, c.Usage)
		}
	}
	// A limit above the reply's size changes nothing.
	_, b, _ := post(t, ts.URL+chatPath, body(map[string]any{"model": "gpt-4o", "max_tokens": 100, "messages": msg}))
	var c openai.Completion
	_ = json.Unmarshal(b, &c)
	if c.Choices[0].FinishReason != "stop" || c.Usage.CompletionTokens != 14 {
		t.Errorf("no cut: finish %q usage %+v", c.Choices[0].FinishReason, c.Usage)
	}

	// Anthropic, not streamed and streamed.
	_, b, _ = post(t, ts.URL+messagesPath, body(map[string]any{"model": "claude-sonnet-5-5", "max_tokens": 1, "messages": msg}))
	var r anthropic.Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Content[0].Text != "The " || *r.StopReason != "max_tokens" || r.Usage.OutputTokens != 1 {
		t.Errorf("anthropic: %s", b)
	}
	_, b, _ = post(t, ts.URL+messagesPath, body(map[string]any{"model": "claude-sonnet-5-5", "max_tokens": 1, "stream": true, "messages": msg}))
	var acc anthropic.Accumulator
	rd := sse.NewReader(strings.NewReader(string(b)))
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		_ = acc.Add(ev.Data)
	}
	if u, ok := acc.Usage(); !ok || u.Output != 1 || acc.OutputChars() != 4 || !strings.Contains(string(b), `"stop_reason":"max_tokens"`) {
		t.Errorf("anthropic stream: usage %+v chars %d\n%s", u, acc.OutputChars(), b)
	}

	// Tool calls: the limit cuts into the first call's arguments and drops
	// the second call.
	call := []any{map[string]any{"role": "user", "content": "call"}}
	_, b, _ = post(t, ts.URL+chatPath, body(map[string]any{"model": "gpt-4o", "max_tokens": 4, "messages": call}))
	c = openai.Completion{}
	_ = json.Unmarshal(b, &c)
	m := c.Choices[0].Message
	// 16 chars: "ok" (2) + "lookup" (6) + 8 chars of arguments.
	if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"order_` || c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 4 {
		t.Errorf("tool calls cut: %s", b)
	}
}
