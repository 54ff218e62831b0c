package sim_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/belay-run/belay/sim"
)

func msgs(parts ...map[string]any) string {
	all := []any{map[string]any{"role": "system", "content": "You are a support agent. scenario: refund-flow"}}
	for _, p := range parts {
		all = append(all, p)
	}
	b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": all})
	return string(b)
}

func user(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
func assistantCall(id, name, args string) map[string]any {
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}
}
func toolResult(id, content string) map[string]any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": content}
}

func replyText(t *testing.T, s *sim.Server, body string, hdr ...string) (int, string) {
	t.Helper()
	rec := serve(s, context.Background(), chatPath, body, hdr...)
	var c struct {
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if rec.Code != 200 {
		return rec.Code, rec.Body.String()
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	var parts []string
	if m.Content != nil {
		parts = append(parts, *m.Content)
	}
	for _, tc := range m.ToolCalls {
		parts = append(parts, tc.Function.Name+tc.Function.Arguments)
	}
	return rec.Code, strings.Join(parts, "|")
}

func intp(n int) *int { return &n }

func TestScriptRules(t *testing.T) {
	script := &sim.Script{
		Captures: []string{`(?P<order>[A-Z]-\d+)`},
		Rules: []sim.Rule{
			{When: sim.Match{Scenario: "other"}, Reply: sim.Reply{Text: "wrong scenario"}},
			{When: sim.Match{Scenario: "refund-flow", AssistantTurns: intp(0), Regex: `(?i)refund (?P<what>\w+)`},
				Reply: sim.Reply{ToolCalls: []sim.ToolCall{{Name: "lookup_order", Arguments: map[string]any{
					"id": "{{order}}", "what": "{{what}}", "nested": []any{"{{order}}", 3}}}}}},
			{When: sim.Match{LastToolResult: "lookup_order", ConversationRegex: `"status":\s*"(\w+)"`},
				Reply: sim.Reply{Text: "Order {{order}} is {{1}}; turns={{assistant_turns}}; {{unknown}}"}},
			{When: sim.Match{MinAssistantTurns: intp(1), Contains: "THANKS"}, Reply: sim.Reply{Text: "You're welcome, {{last_user}}"}},
		},
	}
	s := sim.New(sim.Config{Script: script, Now: fixedNow})

	_, got := replyText(t, s, msgs(user("Please refund order B-77 today")))
	if got != `lookup_order{"id":"B-77","nested":["B-77",3],"what":"order"}` {
		t.Fatalf("turn 1: %s", got)
	}
	_, got = replyText(t, s, msgs(user("Please refund order B-77"), assistantCall("c1", "lookup_order", `{"id":"B-77"}`),
		toolResult("c1", `{"status": "shipped"}`)))
	if got != "Order B-77 is shipped; turns=1; {{unknown}}" {
		t.Fatalf("turn 2: %s", got)
	}
	_, got = replyText(t, s, msgs(user("refund B-77"), assistantCall("c1", "lookup_order", `{}`), toolResult("c1", "ok"),
		map[string]any{"role": "assistant", "content": "done"}, user("thanks!")))
	if got != "You're welcome, thanks!" {
		t.Fatalf("turn 3: %s", got)
	}
	_, got = replyText(t, s, msgs(user("what's the weather?")))
	if !strings.Contains(got, `"what's the weather?"`) {
		t.Fatalf("default reply: %s", got)
	}
}

func TestScriptedFaultOncePerRun(t *testing.T) {
	script, err := sim.ParseScript([]byte(`
rules:
  - name: refund call hangs once
    when: {tool_result: lookup_order}
    fault: server_error
    fault_times: 1
  - when: {tool_result: lookup_order}
    reply: {text: refunded}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(sim.Config{Script: script})
	body := msgs(user("refund A-1"), assistantCall("c1", "lookup_order", `{}`), toolResult("c1", "ok"))
	for i, want := range []struct {
		run  string
		code int
	}{{"r1", 500}, {"r1", 200}, {"r1", 200}, {"r2", 500}, {"r2", 200}} {
		code, got := replyText(t, s, body, "X-Belay-Run-Id", want.run)
		if code != want.code || (code == 200 && got != "refunded") {
			t.Fatalf("request %d (%s): %d %s", i, want.run, code, got)
		}
	}
	// Earlier turns do not match the rule and are never faulted.
	if code, _ := replyText(t, s, msgs(user("refund A-1")), "X-Belay-Run-Id", "r3"); code != 200 {
		t.Fatalf("turn 1 got %d", code)
	}
	if st := s.Stats(); st.Faults["server_error"] != 2 {
		t.Fatalf("stats %+v", st.Faults)
	}
}

func TestParseScriptErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"rules:\n  - when: {regex: '('}\n    reply: {text: x}", "rules[0].when.regex"},
		{"rules:\n  - reply: {text: x}\n  - fault: meltdown", "rules[1].fault"},
		{"rules:\n  - when: {contains: x}", "rules[0]: needs a reply"},
		{"rules:\n  - reply: {tool_calls: [{arguments: {a: 1}}]}", "rules[0].reply.tool_calls[0].name"},
		{"rules:\n  - whn: {contains: x}", `line 2: unknown field "whn"`},
		{"rules:\n  - reply: {text: [a, b]}", "line 2: cannot unmarshal !!seq as text"},
		{"captures: ['[']", "captures[0]"},
	} {
		_, err := sim.ParseScript([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestToolCallIDsUniqueAndDeterministic(t *testing.T) {
	script := &sim.Script{Rules: []sim.Rule{{Reply: sim.Reply{ToolCalls: []sim.ToolCall{{Name: "a"}, {Name: "b"}, {Name: "c"}}}}}}
	ids := func() []string {
		s := sim.New(sim.Config{Seed: 11, Script: script, Now: fixedNow})
		var out []string
		for _, p := range []string{"x", "y", "x"} {
			rec := serve(s, context.Background(), chatPath, chatBody(p, false))
			var c struct {
				Choices []struct {
					Message struct {
						ToolCalls []struct{ ID string } `json:"tool_calls"`
					} `json:"message"`
				} `json:"choices"`
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &c)
			for _, tc := range c.Choices[0].Message.ToolCalls {
				out = append(out, tc.ID)
			}
		}
		return out
	}
	a, b := ids(), ids()
	seen := map[string]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("ids differ across servers with one seed: %v %v", a, b)
		}
		if seen[a[i]] || !strings.HasPrefix(a[i], "call_") || len(a[i]) != 29 {
			t.Fatalf("bad or repeated id %q in %v", a[i], a)
		}
		seen[a[i]] = true
	}
	if len(a) != 9 {
		t.Fatalf("ids %v", a)
	}
}
