package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/sim"
)

const refundScript = `
captures: ['order (?P<order_id>[A-Z]-\d+)']
rules:
  - name: look up
    when: {contains: refund, no_tool_result: lookup_order}
    reply:
      tool_calls: [{name: lookup_order, arguments: {order_id: "{{order_id}}"}}]
  - name: refund
    when: {tool_result: lookup_order, no_tool_result: issue_refund}
    reply:
      text: "Refunding {{order_id}} now."
      tool_calls: [{name: issue_refund, arguments: {order_id: "{{order_id}}", amount: 25}}]
  - when: {tool_result: issue_refund}
    reply: {text: "Order {{order_id}} was refunded."}
`

func startSim(t *testing.T, cfg sim.Config) (*sim.Server, *httptest.Server) {
	t.Helper()
	s := sim.New(cfg)
	ts := httptest.NewServer(s) // listens on 127.0.0.1
	t.Cleanup(ts.Close)
	return s, ts
}

func mustScript(t *testing.T, y string) *sim.Script {
	t.Helper()
	sc, err := sim.ParseScript([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func openaiClient(ts *httptest.Server, path string) openai.Client {
	return openai.NewClient(ooption.WithBaseURL(ts.URL+path+"/v1"), ooption.WithAPIKey("sk-test"), ooption.WithMaxRetries(0))
}

func anthropicClient(ts *httptest.Server, path string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(ts.URL+path), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
}

var lookupTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:       "lookup_order",
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}},
})

func TestOpenAISDKToolLoop(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 7, Script: mustScript(t, refundScript)})
	c := openaiClient(ts, "")
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please refund order A-1001.")},
		Tools:    []openai.ChatCompletionToolUnionParam{lookupTool},
	}
	res, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	ch := res.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("want one tool call, got %+v", ch)
	}
	tc := ch.Message.ToolCalls[0]
	if tc.Function.Name != "lookup_order" || tc.Function.Arguments != `{"order_id":"A-1001"}` || !strings.HasPrefix(tc.ID, "call_") {
		t.Fatalf("tool call = %+v", tc)
	}
	if res.Usage.PromptTokens < 10 || res.Usage.CompletionTokens < 1 || res.Usage.TotalTokens != res.Usage.PromptTokens+res.Usage.CompletionTokens {
		t.Fatalf("usage = %+v", res.Usage)
	}

	params.Messages = append(params.Messages, ch.Message.ToParam(), openai.ToolMessage(`{"status":"delivered"}`, tc.ID))
	res, err = c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Choices[0].Message
	if m.Content != "Refunding A-1001 now." || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "issue_refund" {
		t.Fatalf("turn 2 = %+v", m)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(m.ToolCalls[0].Function.Arguments), &args); err != nil || args["amount"] != 25.0 {
		t.Fatalf("arguments %q: %v", m.ToolCalls[0].Function.Arguments, err)
	}
}

func TestOpenAISDKStreaming(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 1, Script: mustScript(t, refundScript)})
	c := openaiClient(ts, "")
	for _, tc := range []struct {
		name, prompt string
		wantTool     bool
	}{{"text", "Tell me a joke about queues.", false}, {"tool", "I want a refund for order B-42.", true}} {
		t.Run(tc.name, func(t *testing.T) {
			stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model:         "gpt-4o-mini",
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(tc.prompt)},
				Tools:         []openai.ChatCompletionToolUnionParam{lookupTool},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Usage.CompletionTokens < 1 || acc.Usage.PromptTokens < 5 {
				t.Fatalf("usage = %+v", acc.Usage)
			}
			msg := acc.Choices[0].Message
			if tc.wantTool {
				if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Arguments != `{"order_id":"B-42"}` {
					t.Fatalf("tool calls = %+v", msg.ToolCalls)
				}
				return
			}
			if !strings.Contains(msg.Content, "Tell me a joke about queues.") {
				t.Fatalf("content = %q", msg.Content)
			}
		})
	}
}

var anthropicTools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
	Name:        "lookup_order",
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"order_id": map[string]any{"type": "string"}}},
}}}

func TestAnthropicSDKToolLoop(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 7, Script: mustScript(t, refundScript)})
	c := anthropicClient(ts, "")
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:     "claude-sonnet-5-5",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Refund order C-7 please"))},
		Tools:     anthropicTools,
	}
	msg, err := c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 {
		t.Fatalf("message = %+v", msg)
	}
	tu := msg.Content[0]
	if tu.Type != "tool_use" || tu.Name != "lookup_order" || string(tu.Input) != `{"order_id":"C-7"}` || !strings.HasPrefix(tu.ID, "toolu_") {
		t.Fatalf("block = %+v", tu)
	}
	if msg.Usage.InputTokens < 5 || msg.Usage.OutputTokens < 1 {
		t.Fatalf("usage = %+v", msg.Usage)
	}
	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(tu.ID, `{"status":"delivered"}`, false)))
	msg, err = c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Text != "Refunding C-7 now." || msg.Content[1].Name != "issue_refund" {
		t.Fatalf("turn 2 = %+v", msg.Content)
	}
}

func TestAnthropicSDKStreaming(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 3, Script: mustScript(t, refundScript)})
	c := anthropicClient(ts, "")
	for _, tc := range []struct {
		name, prompt string
		wantTool     bool
	}{{"text", "What is a circuit breaker?", false}, {"tool", "refund for order D-9", true}} {
		t.Run(tc.name, func(t *testing.T) {
			stream := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
				Model:     "claude-haiku-4-5",
				MaxTokens: 512,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(tc.prompt))},
				Tools:     anthropicTools,
			})
			var msg anthropic.Message
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if msg.Usage.OutputTokens < 2 || msg.Usage.InputTokens < 5 {
				t.Fatalf("usage = %+v", msg.Usage)
			}
			if tc.wantTool {
				if msg.StopReason != anthropic.StopReasonToolUse || string(msg.Content[0].Input) != `{"order_id":"D-9"}` {
					t.Fatalf("message = %+v", msg)
				}
				return
			}
			if msg.StopReason != anthropic.StopReasonEndTurn || !strings.Contains(msg.Content[0].Text, "What is a circuit breaker?") {
				t.Fatalf("message = %+v", msg)
			}
		})
	}
}

func TestSDKErrorsFromFaults(t *testing.T) {
	_, ts := startSim(t, sim.Config{})
	oc := openaiClient(ts, "/d/rate_limited")
	_, err := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Code != "rate_limit_exceeded" || oe.Type != "requests" {
		t.Fatalf("openai error = %#v", err)
	}
	ac := anthropicClient(ts, "/d/down")
	_, err = ac.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "claude-sonnet-5-5", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 503 || ae.Type() != "api_error" || ae.RequestID == "" {
		t.Fatalf("anthropic error = %#v", err)
	}
}

// n: 2 gets two choices, as from OpenAI, streamed or not, and their usage
// counts both choices' output (newcomer finding: the simulator answered
// one). The official client's accumulator puts streamed choices by index.
func TestOpenAIChoices(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 1, Script: mustScript(t, refundScript)})
	c := openaiClient(ts, "")
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a joke about queues.")},
		N:        openai.Int(2),
	}
	// The simulator's usage: ceil(chars / 4) output tokens per choice.
	want := func(content string) int64 { return 2 * dialect.EstimateTokens(int64(len(content))) }
	got, err := c.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 2 || got.Choices[1].Index != 1 || got.Choices[0].Message.Content == "" ||
		got.Choices[1].Message.Content != got.Choices[0].Message.Content {
		t.Fatalf("choices = %+v; want two, the same answer", got.Choices)
	}
	if w := want(got.Choices[0].Message.Content); got.Usage.CompletionTokens != w {
		t.Errorf("usage %+v; want %d completion tokens, both choices", got.Usage, w)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 2 || acc.Choices[0].Message.Content == "" ||
		acc.Choices[1].Message.Content != acc.Choices[0].Message.Content || acc.Choices[1].FinishReason != "stop" {
		t.Fatalf("streamed choices = %+v", acc.Choices)
	}
	if w := want(acc.Choices[0].Message.Content); acc.Usage.CompletionTokens != w {
		t.Errorf("streamed usage %+v; want %d completion tokens", acc.Usage, w)
	}
}
