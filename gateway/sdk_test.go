package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/budget"
)

func TestOpenAIChatWithTools(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.openai()
	ctx := context.Background()
	var resp *http.Response
	params := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("Weather in Paris?"),
		Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}
	res, err := c.Chat.Completions.New(ctx, params, ooption.WithResponseInto(&resp), ooption.WithHeader("X-Belay-Run-Id", "run-oa-1"))
	if err != nil {
		t.Fatal(err)
	}
	tc := res.Choices[0].Message.ToolCalls
	if len(tc) != 1 || tc[0].Function.Name != "get_weather" || tc[0].Function.Arguments != `{"city":"Paris"}` {
		t.Fatalf("tool calls = %+v", tc)
	}
	if res.Model == "" || res.Usage.PromptTokens == 0 {
		t.Errorf("model %q usage %+v", res.Model, res.Usage)
	}
	hd := resp.Header
	if hd.Get("X-Belay-Run-Id") != "run-oa-1" || hd.Get("X-Belay-Attempts") != "1" || hd.Get("X-Belay-Deployment") != "oa-1" || hd.Get("X-Belay-Degraded") != "false" {
		t.Errorf("belay headers = %v", hd)
	}
	cost, err := budget.ParseUSD(hd.Get("X-Belay-Cost-Usd"))
	if err != nil || cost <= 0 {
		t.Errorf("x-belay-cost-usd = %q (%v)", hd.Get("X-Belay-Cost-Usd"), err)
	}

	// Second turn of the same run, with the tool result.
	params.Messages = append(params.Messages, res.Choices[0].Message.ToParam(), openai.ToolMessage(`{"sky":"clear"}`, tc[0].ID))
	res, err = c.Chat.Completions.New(ctx, params, ooption.WithHeader("X-Belay-Run-Id", "run-oa-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != "It is sunny in Paris." {
		t.Errorf("turn 2 content = %q", got)
	}
	run := h.record("run-oa-1")
	if run.Turns != 2 || run.Tenant != "default" || run.Cost <= cost || run.InputTokens == 0 {
		t.Errorf("run = %+v", run)
	}
}

func TestOpenAIStreamStripsUsageChunk(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.openai()
	for _, includeUsage := range []bool{false, true} {
		t.Run("include_usage="+strconv.FormatBool(includeUsage), func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("Weather in Paris?"),
				Tools: []openai.ChatCompletionToolUnionParam{weatherTool}}
			if includeUsage {
				params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			}
			var resp *http.Response
			stream := c.Chat.Completions.NewStreaming(context.Background(), params, ooption.WithResponseInto(&resp))
			var acc openai.ChatCompletionAccumulator
			usageChunks := 0
			for stream.Next() {
				ch := stream.Current()
				if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
					usageChunks++
				}
				acc.AddChunk(ch)
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			want := 0
			if includeUsage {
				want = 1
			}
			if usageChunks != want {
				t.Errorf("usage chunks seen by the client = %d, want %d", usageChunks, want)
			}
			tcs := acc.Choices[0].Message.ToolCalls
			if len(tcs) != 1 || tcs[0].Function.Arguments != `{"city":"Paris"}` {
				t.Errorf("tool calls = %+v", tcs)
			}
			if resp.Header.Get("X-Belay-Deployment") != "oa-1" || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
				t.Errorf("headers = %v", resp.Header)
			}
			// The SDK stops reading at [DONE], before the trailer; the
			// run record has the charge, from the usage chunk belay asked for.
			h.quiesce()
			run := h.record(resp.Header.Get("X-Belay-Run-Id"))
			if run.OutputTokens == 0 || run.InputTokens == 0 || run.Cost <= 0 {
				t.Errorf("run %+v", run)
			}
		})
	}
}

func TestAnthropicMessagesWithTools(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.anthropic()
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 256, Messages: anthropicMsg("Weather in Paris?"), Tools: anthropicWeather}
	var resp *http.Response
	msg, err := c.Messages.New(ctx, params, aoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || msg.Content[0].Name != "get_weather" || string(msg.Content[0].Input) != `{"city":"Paris"}` {
		t.Fatalf("message = %+v", msg)
	}
	if resp.Header.Get("X-Belay-Deployment") != "an-1" || resp.Header.Get("X-Belay-Run-Id") == "" {
		t.Errorf("headers = %v", resp.Header)
	}

	params.Messages = append(params.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[0].ID, `{"sky":"clear"}`, false)))
	stream := c.Messages.NewStreaming(ctx, params)
	var out anthropic.Message
	for stream.Next() {
		if err := out.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != anthropic.StopReasonEndTurn || !strings.Contains(out.Content[0].Text, "sunny") || out.Usage.OutputTokens == 0 {
		t.Errorf("streamed message = %+v", out)
	}
}

// An Anthropic client whose base URL ends in /v1 (as an OpenAI client's
// does) gets a typed not-found error that says to drop it (newcomer
// finding: the 404 named /v1/v1/messages and gave no hint).
func TestAnthropicBaseURLWithV1IsNamed(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.anthropic(aoption.WithBaseURL(h.gw.URL+"/v1"), aoption.WithMaxRetries(0))
	_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 16, Messages: anthropicMsg("hi")})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Fatalf("err = %v; want a 404 *anthropic.Error", err)
	}
	if !strings.Contains(ae.Error(), "did you mean /v1/messages?") || !strings.Contains(ae.Error(), "an Anthropic client's base URL is http://HOST:PORT,") {
		t.Errorf("error %q does not tell the client to drop /v1 from its base URL", ae.Error())
	}
	if h.upstreamCalls("an-1") != 0 {
		t.Error("the upstream was called")
	}
}

// A model served only in the other dialect is a 404 that names the
// dialect and the endpoint that serves it (newcomer finding: "it is
// served as [anthropic]").
func TestModelOfTheOtherDialectNamesItsEndpoint(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	resp, body := h.post("/v1/chat/completions", `{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"hi"}]}`, nil)
	want := `model \"claude-sonnet-5-5\" is not served in the openai dialect (it is served in the anthropic dialect, POST /v1/messages)`
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, want) {
		t.Errorf("%d %s; want 404 with %s", resp.StatusCode, body, want)
	}
}
