package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/trace"
)

// With capture full, a model call's span holds its messages; with the
// default (redacted), an email address in them is removed before storing.
func TestCapturedMessages(t *testing.T) {
	for _, c := range []struct{ capture, want, notWant string }{
		{"full", "ada@example.com", ""},
		{"redacted", "[REDACTED:email]", "ada@example.com"},
	} {
		t.Run(c.capture, func(t *testing.T) {
			h := newHarness(t, harnessOpts{extra: "capture: " + c.capture + "\n"})
			ctx := context.Background()
			var resp *http.Response
			_, err := h.openai().Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
				Messages: userMsg("my email is ada@example.com")}, ooption.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			var in, out string
			for _, s := range storedSpans(t, h.stack, resp.Header.Get("X-Belay-Run-Id")) {
				if s.Kind == trace.KindModel {
					in, _ = s.Attrs[trace.AttrInputMessages].(string)
					out, _ = s.Attrs[trace.AttrOutputMessages].(string)
					if a := s.Attrs[trace.AttrAlias]; a != "gpt-4o-mini" {
						t.Errorf("span %s: %s = %v, want the alias asked for", s.Name, trace.AttrAlias, a)
					}
				}
			}
			if !strings.Contains(in, c.want) || (c.notWant != "" && strings.Contains(in, c.notWant)) {
				t.Errorf("input messages %q; want %q and not %q", in, c.want, c.notWant)
			}
			if !strings.Contains(out, "assistant") {
				t.Errorf("output messages %q; want the answer's message", out)
			}
			if body := scrape(t, h, "/metrics"); !strings.Contains(body, "belay_store_write_failures_total 0") {
				t.Errorf("metrics lack belay_store_write_failures_total")
			}
		})
	}
}

// A streamed answer is recorded as the non-streamed one is (OpenAI
// choices with the text and tool calls, Anthropic content blocks), from
// what the stream relayed: the tool call's name and arguments, the
// Anthropic text (newcomer finding: streamed calls recorded no answer).
func TestStreamedAnswerRecorded(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "capture: full\n"})
	ctx := context.Background()
	var resp *http.Response
	s := h.openai().Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: userMsg("Weather in Paris?"), Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}, ooption.WithResponseInto(&resp))
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	oaID := resp.Header.Get("X-Belay-Run-Id")

	as := h.anthropic().Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 256,
		Messages: anthropicMsg("hello there")}, aoption.WithResponseInto(&resp))
	var msg anthropic.Message
	for as.Next() {
		if err := msg.Accumulate(as.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := as.Err(); err != nil {
		t.Fatal(err)
	}
	anID := resp.Header.Get("X-Belay-Run-Id")

	output := func(id string) string {
		for _, s := range storedSpans(t, h.stack, id) {
			if s.Kind == trace.KindModel {
				out, _ := s.Attrs[trace.AttrOutputMessages].(string)
				return out
			}
		}
		return ""
	}
	want := `[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":`
	if out := output(oaID); !strings.HasPrefix(out, want) ||
		!strings.Contains(out, `"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}],"annotations":[]},"finish_reason":"tool_calls"}]`) {
		t.Errorf("OpenAI streamed answer recorded as %s", out)
	}
	wantText, _ := json.Marshal(msg.Content[0].Text)
	if out := output(anID); out != `[{"text":`+string(wantText)+`,"type":"text"}]` {
		t.Errorf("Anthropic streamed answer recorded as %s; the client got %s", out, wantText)
	}
}
