package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/belay-run/belay/sim"
)

// The simulator's Responses API, read by openai-go: the scripted refund
// conversation in function calls and their outputs, then its answer.
func TestResponsesScriptedConversation(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 3, Script: mustScript(t, refundScript)})
	c := openaiClient(ts, "")
	ctx := context.Background()
	tools := []responses.ToolUnionParam{
		{OfFunction: &responses.FunctionToolParam{Name: "lookup_order", Parameters: map[string]any{"type": "object"}}},
		{OfFunction: &responses.FunctionToolParam{Name: "issue_refund", Parameters: map[string]any{"type": "object"}}},
	}
	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Please refund order A-17", responses.EasyInputMessageRoleUser)}
	res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) != 1 || res.Output[0].Type != "function_call" {
		t.Fatalf("turn 1 output %+v", res.Output)
	}
	fc := res.Output[0].AsFunctionCall()
	if fc.Name != "lookup_order" || fc.Arguments != `{"order_id":"A-17"}` || !strings.HasPrefix(fc.CallID, "call_") ||
		!strings.HasPrefix(fc.ID, "fc_") || !strings.HasPrefix(res.ID, "resp_") {
		t.Fatalf("call %+v (response %s)", fc, res.ID)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"status":"delivered"}`)
	out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	input = append(input, responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name), out)
	res, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	if err != nil {
		t.Fatal(err)
	}
	// The refund rule: text and a call, a message item then a function_call item.
	if len(res.Output) != 2 || res.OutputText() != "Refunding A-17 now." || res.Output[1].AsFunctionCall().Name != "issue_refund" {
		t.Fatalf("turn 2 output %+v", res.Output)
	}
	if res.Usage.TotalTokens != res.Usage.InputTokens+res.Usage.OutputTokens || res.Usage.InputTokens == 0 {
		t.Errorf("usage %+v", res.Usage)
	}
}

// A streamed response cut by max_output_tokens ends with
// response.incomplete, its status and reason set, and its events are
// numbered from 0 without a gap.
func TestResponsesStreamIncomplete(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 3})
	c := openaiClient(ts, "")
	s := c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini",
		MaxOutputTokens: openai.Int(16), Instructions: openai.String("scenario: long"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(strings.Repeat("tell me more ", 20))}})
	var text strings.Builder
	var last responses.ResponseStreamEventUnion
	n := int64(0)
	for s.Next() {
		ev := s.Current()
		if ev.SequenceNumber != n {
			t.Fatalf("event %d numbered %d", n, ev.SequenceNumber)
		}
		n++
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
		last = ev
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	r := last.Response
	if last.Type != "response.incomplete" || r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Fatalf("last event %s, status %s, details %+v", last.Type, r.Status, r.IncompleteDetails)
	}
	if text.Len() > 16*4 || r.OutputText() != text.String() || r.Usage.OutputTokens != 16 {
		t.Errorf("text %d bytes %q, final %q, usage %+v", text.Len(), text.String(), r.OutputText(), r.Usage)
	}
	if r.Instructions.OfString != "scenario: long" {
		t.Errorf("instructions echoed as %+v", r.Instructions)
	}
}

// max_output_tokens below OpenAI's minimum (16) is refused as OpenAI
// refuses it; belay's gateway leaves that to each provider.
func TestResponsesMinimumOutputTokens(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 3})
	c := openaiClient(ts, "")
	_, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini", MaxOutputTokens: openai.Int(15),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Param != "max_output_tokens" || !strings.Contains(oe.Message, ">= 16, but got 15") {
		t.Errorf("max_output_tokens 15: %v", err)
	}
}

// Structured output: text.format's JSON schema gives JSON valid under it.
func TestResponsesStructuredOutput(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 3})
	c := openaiClient(ts, "")
	res, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("give me a city")},
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "city", Schema: map[string]any{
				"type": "object", "required": []string{"name", "population"},
				"properties": map[string]any{"name": map[string]any{"type": "string"}, "population": map[string]any{"type": "integer", "minimum": 1}},
			}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Name       *string `json:"name"`
		Population *int64  `json:"population"`
	}
	if err := json.Unmarshal([]byte(res.OutputText()), &v); err != nil || v.Name == nil || v.Population == nil || *v.Population < 1 {
		t.Errorf("output %q (%v)", res.OutputText(), err)
	}
}
