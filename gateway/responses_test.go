package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/sim"
	"github.com/belay-run/belay/trace"
)

var responsesWeather = responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
	Name:       "get_weather",
	Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
}}

// The official openai-go client's Responses API through the gateway: a
// function call, then its output in a second turn of the same run.
func TestResponsesWithTools(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.openai()
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: "gpt-4o-mini", Instructions: openai.String("You report the weather."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")},
		Tools: []responses.ToolUnionParam{responsesWeather}}
	var resp *http.Response
	res, err := c.Responses.New(ctx, params, ooption.WithResponseInto(&resp), ooption.WithHeader("X-Belay-Run-Id", "run-resp-1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) != 1 || res.Output[0].Type != "function_call" {
		t.Fatalf("output = %+v", res.Output)
	}
	fc := res.Output[0].AsFunctionCall()
	if fc.Name != "get_weather" || fc.Arguments != `{"city":"Paris"}` || fc.CallID == "" {
		t.Fatalf("function call = %+v", fc)
	}
	if res.Status != responses.ResponseStatusCompleted || res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 {
		t.Errorf("status %q usage %+v", res.Status, res.Usage)
	}
	hd := resp.Header
	if hd.Get("X-Belay-Run-Id") != "run-resp-1" || hd.Get("X-Belay-Attempts") != "1" || hd.Get("X-Belay-Deployment") != "oa-1" {
		t.Errorf("belay headers = %v", hd)
	}
	cost, err := budget.ParseUSD(hd.Get("X-Belay-Cost-Usd"))
	if err != nil || cost <= 0 {
		t.Errorf("x-belay-cost-usd = %q (%v)", hd.Get("X-Belay-Cost-Usd"), err)
	}
	// The first turn's charge is the usage the answer reports.
	h.quiesce()
	first := h.record("run-resp-1")
	if first.InputTokens != res.Usage.InputTokens || first.OutputTokens != res.Usage.OutputTokens {
		t.Errorf("run charged %d in / %d out; the answer reports %d / %d", first.InputTokens, first.OutputTokens,
			res.Usage.InputTokens, res.Usage.OutputTokens)
	}

	// Second turn: the call and its output, as the SDK's own input items.
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name),
		responses.ResponseInputItemParamOfFunctionCallOutput(`{"sky":"clear"}`),
	}}
	params.Input.OfInputItemList[2].OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	res, err = c.Responses.New(ctx, params, ooption.WithHeader("X-Belay-Run-Id", "run-resp-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.OutputText(); got != "It is sunny in Paris." {
		t.Errorf("turn 2 text = %q", got)
	}
	h.quiesce()
	run := h.record("run-resp-1")
	if run.Turns != 2 || run.Cost <= cost || run.InputTokens != first.InputTokens+res.Usage.InputTokens {
		t.Errorf("run = %+v", run)
	}
}

// A streamed response reaches the SDK whole, event by event, and the run
// is charged the usage of its response.completed event.
func TestResponsesStream(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var resp *http.Response
	s := h.openai().Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me about belay devices")}},
		ooption.WithResponseInto(&resp))
	var text strings.Builder
	var final responses.Response
	var seq []int64
	for s.Next() {
		ev := s.Current()
		seq = append(seq, ev.SequenceNumber)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() == "" || final.OutputText() != text.String() {
		t.Errorf("deltas %q, final text %q", text.String(), final.OutputText())
	}
	for i, n := range seq {
		if n != int64(i) {
			t.Fatalf("sequence numbers %v: the client must get every event, in order", seq)
		}
	}
	if resp.Header.Get("X-Belay-Deployment") != "oa-1" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("headers = %v", resp.Header)
	}
	h.quiesce()
	run := h.record(resp.Header.Get("X-Belay-Run-Id"))
	if run.InputTokens != final.Usage.InputTokens || run.OutputTokens != final.Usage.OutputTokens || run.Cost <= 0 {
		t.Errorf("run %+v; the stream reported %+v", run, final.Usage)
	}

	// The model span says which OpenAI API the call used (the GenAI
	// conventions' openai.api.type), as a chat call's says its own.
	chat, _ := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, nil)
	h.quiesce()
	for id, want := range map[string]string{resp.Header.Get("X-Belay-Run-Id"): "responses", chat.Header.Get("X-Belay-Run-Id"): "chat_completions"} {
		got := "no model span"
		for _, sp := range storedSpans(t, h.stack, id) {
			if sp.Kind == trace.KindModel {
				got, _ = sp.Attrs[trace.AttrOpenAIAPIType].(string)
			}
		}
		if got != want {
			t.Errorf("run %s: openai.api.type %q, want %q", id, got, want)
		}
	}
}

// Through a deployment that is down, the call falls back to the next one,
// for the Responses API as for chat completions.
func TestResponsesFallBack(t *testing.T) {
	down, _ := sim.LookupProfile("down")
	h := newHarness(t, harnessOpts{profiles: map[string]sim.Profile{"oa-1": down}})
	var resp *http.Response
	res, err := h.openai().Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, ooption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if res.OutputText() == "" || resp.Header.Get("X-Belay-Deployment") != "oa-2" || resp.Header.Get("X-Belay-Degraded") != "true" {
		t.Errorf("text %q headers %v", res.OutputText(), resp.Header)
	}
	if got := h.upstreamCalls("oa-1"); got != 2 { // retry: max_attempts 2
		t.Errorf("attempts on oa-1 = %d, want 2", got)
	}
}

// A provider's error event after output has started ends the SDK's
// stream with an error (newcomer finding: the API's own error event has
// no "error" member, so the SDKs handed it over as one more event and the
// stream looked finished); it is not retried. The event keeps every
// member the provider sent.
func TestResponsesMidStreamError(t *testing.T) {
	p := sim.Profile{Name: "mid", Faults: []sim.Weighted{{Fault: sim.StreamError, P: 1}}}
	h := newHarness(t, harnessOpts{profiles: map[string]sim.Profile{"oa-1": p, "oa-2": p}})
	s := h.openai().Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")}})
	var text strings.Builder
	for s.Next() {
		text.WriteString(s.Current().Delta)
	}
	err := s.Err()
	if text.Len() == 0 || err == nil || !strings.Contains(err.Error(), "The server had an error while processing your request.") {
		t.Errorf("text %q, err %v: want output, then the provider's error", text.String(), err)
	}
	if n := h.upstreamCalls("oa-1") + h.upstreamCalls("oa-2"); n != 1 {
		t.Errorf("upstream calls = %d, want 1", n)
	}

	_, body := h.post("/v1/responses", `{"model":"gpt-4o-mini","input":"hello there","stream":true}`, nil)
	_, last, _ := strings.Cut(body, "event: error\ndata: ")
	want := `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":"server_error"},` +
		`"type":"error","sequence_number":5,"code":"server_error","message":"The server had an error while processing your request.","param":null}` + "\n\n"
	if last != want {
		t.Errorf("the client's error event:\n%q\nwant\n%q", last, want)
	}
}

// A stream cut after its output started ends with belay's error event,
// numbered after the stream's last event, which the SDK reports as an
// error; the cut stream is charged from an estimate.
func TestResponsesStreamCutIsAnError(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/responses" {
			http.NotFound(w, r)
			return
		}
		sseHeader(w)
		io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[],\"usage\":null}}\n\n"+
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"partial answer\"}\n\n")
	})
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	var resp *http.Response
	s := h.openai().Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "fake",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, ooption.WithResponseInto(&resp))
	var text strings.Builder
	for s.Next() {
		text.WriteString(s.Current().Delta)
	}
	err := s.Err()
	if err == nil || text.String() != "partial answer" {
		t.Fatalf("text %q err %v; want the partial text and an error", text.String(), err)
	}
	if !strings.Contains(err.Error(), "received error while streaming") || !strings.Contains(err.Error(), "stream_interrupted") {
		t.Errorf("error %v: want belay's stream_interrupted", err)
	}
	if f.calls.Load() != 1 {
		t.Errorf("upstream calls %d: a failure after output must not be retried", f.calls.Load())
	}
	h.quiesce()
	r := h.record(resp.Header.Get("X-Belay-Run-Id"))
	if r.OutputTokens != 4 || r.Turns != 1 { // ceil(14 chars / 4), estimated
		t.Errorf("run = %+v", r)
	}
}

// Bad input is refused in OpenAI's error shape, naming the field; a
// background request is refused; the stored responses' endpoints are not
// served, and say so.
func TestResponsesBadInput(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, tc := range []struct {
		body, param, status string
	}{
		{`{"model":"gpt-4o-mini","input":42}`, "input", "400"},
		{`{"model":"gpt-4o-mini","input":[{"role":"robot","content":"hi"}]}`, "input[0].role", "400"},
		{`{"model":"gpt-4o-mini","input":[{"type":"function_call_output","call_id":"call_1"}]}`, "input[0].output", "400"},
		{`{"model":"gpt-4o-mini","input":[{"type":"function_call","call_id":"call_1","name":"f","arguments":{}}]}`, "input[0].arguments", "400"},
		{`{"model":"gpt-4o-mini","input":"hi","max_output_tokens":0}`, "max_output_tokens", "400"},
		{`{"model":"gpt-4o-mini","input":"hi","background":true}`, "background", "400"},
		{`{"input":"hi"}`, "model", "400"},
	} {
		resp, body := h.post("/v1/responses", tc.body, nil)
		if resp.Status[:3] != tc.status || !strings.Contains(body, `"param":"`+tc.param+`"`) || resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s → %s %s; want %s naming %s", tc.body, resp.Status, body, tc.status, tc.param)
		}
	}
	resp, body := h.post("/v1/responses", `{"model":"claude-sonnet-5-5","input":"hi"}`, nil)
	if resp.StatusCode != 404 || !strings.Contains(body, "/v1/messages") {
		t.Errorf("anthropic-only model → %s %s", resp.Status, body)
	}
	req, _ := http.NewRequest("GET", h.gw.URL+"/v1/responses/resp_123", nil)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 404 || !strings.Contains(string(b), "stored response") {
		t.Errorf("GET /v1/responses/{id} → %d %s", r.StatusCode, b)
	}
}
