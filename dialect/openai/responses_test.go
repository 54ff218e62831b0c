package openai

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/failure"
)

func TestParseResponsesRequest(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","input":"hi"}`,
		`{"model":"m","previous_response_id":"resp_1"}`, // no input: the stored response continues
		`{"model":"m","instructions":null,"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"https://x/y.png"}]}]}`,
		`{"model":"m","input":[{"type":"message","role":"developer","content":"be brief"},{"type":"reasoning","id":"rs_1","summary":[]},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
		`{"model":"m","input":"hi","tools":[{"type":"web_search"},{"type":"function","name":"f","parameters":{}}],"max_output_tokens":16}`,
	} {
		if _, err := ParseResponsesRequest([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	for _, tc := range []struct{ body, field string }{
		{`{"input":"hi"}`, "model"},
		{`{"model":"m","input":7}`, "input"},
		{`{"model":"m","input":["hi"]}`, "input[0]"},
		{`{"model":"m","instructions":["a"],"input":"hi"}`, "instructions"},
		{`{"model":"m","input":[{"content":"hi"}]}`, "input[0].type"},
		{`{"model":"m","input":[{"role":"robot","content":"hi"}]}`, "input[0].role"},
		{`{"model":"m","input":[{"role":"user"}]}`, "input[0].content"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":5}]}]}`, "input[0].content[0].text"},
		{`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f"}]}`, "input[0].arguments"},
		{`{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id"},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output"},
		{`{"model":"m","input":"hi","tools":[{"type":"function"}]}`, "tools[0].name"},
		{`{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{`{"model":"m","input":"hi","stream":"yes"}`, "stream"},
	} {
		_, err := ParseResponsesRequest([]byte(tc.body))
		fe := dialect.AsFieldError(err)
		if fe == nil || fe.Field != tc.field || !errors.Is(err, failure.InvalidRequest) {
			t.Errorf("%s: error %v, want a field error naming %s", tc.body, err, tc.field)
		}
	}
}

func TestResponsesItems(t *testing.T) {
	r, err := ParseResponsesRequest([]byte(`{"model":"m","input":[` +
		`{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"},{"type":"input_text","text":"b"}]},` +
		`{"type":"function_call","call_id":"c1","name":"get","arguments":"{\"x\":1}"},` +
		`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"done"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := r.Items()
	want := []ResponsesItem{
		{Type: "message", Role: "user", Text: "a\nb"},
		{Type: "function_call", CallID: "c1", Name: "get", Arguments: `{"x":1}`},
		{Type: "function_call_output", CallID: "c1", Text: "done"},
	}
	if len(got) != len(want) {
		t.Fatalf("items %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("item %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	s, _ := ParseResponsesRequest([]byte(`{"model":"m","input":"just text"}`))
	if it := s.Items(); len(it) != 1 || it[0] != (ResponsesItem{Type: "message", Role: "user", Text: "just text"}) {
		t.Errorf("string input items %+v", it)
	}
}

func TestEstimateResponsesPromptTokens(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
	}{
		// "hello world": 11 chars → 3 tokens; 3 for the item, 3 for the reply.
		{`{"model":"m","input":"hello world","stream":true,"max_output_tokens":50}`, 9},
		// instructions "be brief" 8 chars + "hi" 2 = 10 → 3; one item.
		{`{"model":"m","instructions":"be brief","input":[{"role":"user","content":"hi"}]}`, 9},
		// parts: "abcd" 4 chars + an image (OpenAIImageTokens); one item.
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"abcd"},{"type":"input_image","image_url":"u"}]}]}`,
			1 + dialect.OpenAIImageTokens + 6},
		// a call's name "f" and arguments "{}" (3 chars) and its output "ok" (2): 5 chars → 2; two items.
		{`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`, 2 + 9},
	} {
		r, err := ParseResponsesRequest([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := EstimateResponsesPromptTokens(r); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.body, got, tc.want)
		}
	}
}

func TestResponsesUsageOf(t *testing.T) {
	u, ok := ResponsesUsageOf([]byte(`{"id":"resp_1","output":[],"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},` +
		`"output_tokens":30,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":130}}`))
	if !ok {
		t.Fatal("no usage")
	}
	if d := u.Dialect(); d != (dialect.Usage{Input: 60, CachedInput: 40, Output: 30, Reasoning: 12}) {
		t.Errorf("usage %+v", d)
	}
	if _, ok := ResponsesUsageOf([]byte(`{"id":"resp_1","status":"in_progress","usage":null}`)); ok {
		t.Error("a null usage read as usage")
	}
	back := ResponsesUsageFrom(dialect.Usage{Input: 60, CachedInput: 40, Output: 30, Reasoning: 12})
	if back.InputTokens != 100 || back.TotalTokens != 130 || back.InputTokensDetails.CachedTokens != 40 || back.OutputTokensDetails.ReasoningTokens != 12 {
		t.Errorf("ResponsesUsageFrom = %+v", back)
	}
}

func TestResponsesAccumulator(t *testing.T) {
	events := []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[],"usage":null}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","delta":"Hello, "}`,
		`{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","delta":"world"}`,
	}
	a := ResponsesAccumulator{Keep: true}
	for _, e := range events {
		a.Add([]byte(e))
	}
	if _, ok := a.Usage(); ok {
		t.Error("usage before the final event")
	}
	if a.NextSequence() != 4 {
		t.Errorf("next sequence %d, want 4", a.NextSequence())
	}
	// Cut here: 12 chars of output → 3 tokens.
	if est := a.Estimate(50); est != (dialect.Usage{Input: 50, Output: 3}) {
		t.Errorf("estimate %+v", est)
	}
	if ans := string(a.Answer()); !strings.Contains(ans, `"text":"Hello, world"`) || !strings.Contains(ans, `"status":"incomplete"`) {
		t.Errorf("answer of a cut stream %s", ans)
	}
	a.Add([]byte(`{"type":"response.completed","sequence_number":4,"response":{"id":"r","status":"completed",` +
		`"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello, world","annotations":[]}]}],` +
		`"usage":{"input_tokens":9,"output_tokens":3,"total_tokens":12}}}`))
	if u, ok := a.Usage(); !ok || u != (dialect.Usage{Input: 9, Output: 3}) {
		t.Errorf("usage %+v %v", u, ok)
	}
	if a.ResponseID() != "r" {
		t.Errorf("response id %q, want r", a.ResponseID())
	}
	if ans := string(a.Answer()); !strings.HasPrefix(ans, `[{"type":"message","id":"msg_1","status":"completed"`) {
		t.Errorf("answer %s", ans)
	}
	var none ResponsesAccumulator
	if none.NextSequence() != 0 || none.Answer() != nil {
		t.Error("an empty accumulator numbers from 0 and keeps nothing")
	}
}

func TestResponsesErrorEvent(t *testing.T) {
	ev := ResponsesErrorEvent("server_error", "stream_interrupted", "the stream was cut", 7)
	want := `event: error` + "\n" + `data: {"type":"error","code":"stream_interrupted","message":"the stream was cut","param":null,"sequence_number":7,` +
		`"error":{"message":"the stream was cut","type":"server_error","param":null,"code":"stream_interrupted"}}` + "\n\n"
	if !bytes.Equal(ev, []byte(want)) {
		t.Errorf("event\n%s\nwant\n%s", ev, want)
	}
}
