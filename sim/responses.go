package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/retry"
)

// responsesWire renders OpenAI's Responses API
// (https://platform.openai.com/docs/api-reference/responses): a response
// object with its output items, and the typed stream events, numbered by
// sequence_number, that end with response.completed (response.incomplete
// when the output was cut). Errors and faults are the Chat Completions
// ones (OpenAI's error objects); a stream error is the API's error event.
type responsesWire struct{ openaiWire }

func (responsesWire) parse(body []byte) (*exchange, error) {
	req, err := openai.ParseResponsesRequest(body)
	if err != nil {
		return nil, err
	}
	max, _ := req.MaxOutput()
	if req.MaxOutputTokens != nil && max < minOutputTokens {
		// OpenAI's own limit (its 400 integer_below_min_value); belay's
		// gateway leaves it to each provider.
		return nil, dialect.Field("max_output_tokens", "integer below minimum value. Expected a value >= %d, but got %d instead", minOutputTokens, max)
	}
	ex := &exchange{model: req.Model, stream: req.Stream, maxOut: max,
		promptTokens: openai.EstimateResponsesPromptTokens(req), conv: fromResponses(req)}
	var text *struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	}
	if dialect.DecodeMember(body, "text", &text) == nil && text != nil &&
		(text.Format.Type == "json_schema" || text.Format.Type == "json_object") {
		ex.jsonOut, ex.schema = true, text.Format.Schema
	}
	ex.echo = &responsesEcho{instructions: req.InstructionsText(), previous: req.PreviousResponseID, store: req.Store == nil || *req.Store,
		parallel: req.ParallelToolCalls == nil || *req.ParallelToolCalls}
	_ = dialect.EachMember(body, func(name, value []byte) {
		switch string(name) {
		case "text":
			ex.echo.text = value
		case "tools":
			ex.echo.tools = value
		case "tool_choice":
			ex.echo.toolChoice = value
		}
	})
	return ex, nil
}

// responsesEcho is what a response object repeats of its request: the
// instructions, the output format, tools and tool choice as sent, the
// response it continues, and whether it is stored (the simulator keeps
// none: it answers from the input sent, whatever previous_response_id
// says).
type responsesEcho struct {
	instructions            string
	text, tools, toolChoice json.RawMessage
	previous                *string
	store, parallel         bool
}

// minOutputTokens is the smallest max_output_tokens OpenAI's Responses
// API accepts.
const minOutputTokens = 16

func (responsesWire) ids(ex *exchange, rng *rand.Rand, calls int) []string {
	ex.requestID = "req_" + randHex(rng, 32)
	ex.messageID = "resp_" + randHex(rng, 48)
	ex.itemIDs = nil
	for range calls + 1 { // the message item and each call's item
		ex.itemIDs = append(ex.itemIDs, randHex(rng, 48))
	}
	out := make([]string, calls)
	for i := range out {
		out[i] = randID(rng, "call_", 24)
	}
	return out
}

// items returns the reply's output items: a message when it has text (or
// nothing else), then a function_call per call.
func (responsesWire) items(ex *exchange, r reply) []openai.OutputItem {
	status := "completed"
	if r.cut {
		status = "incomplete"
	}
	var out []openai.OutputItem
	if r.text != "" || len(r.calls) == 0 {
		out = append(out, openai.OutputItem{Type: "message", ID: "msg_" + ex.itemIDs[0], Status: status, Role: "assistant",
			Content: []openai.OutputPart{{Type: "output_text", Text: r.text, Annotations: []any{}}}})
	}
	for i, c := range r.calls {
		args := c.args
		st := "completed"
		if c.partial {
			st = "incomplete"
		}
		out = append(out, openai.OutputItem{Type: "function_call", ID: "fc_" + ex.itemIDs[i+1], Status: st,
			CallID: c.id, Name: c.name, Arguments: &args})
	}
	return out
}

// responseObject returns exchange ex's response object in the given
// status, with output and usage (nil before the response is done).
func responseObject(ex *exchange, status string, output []openai.OutputItem, usage *openai.ResponsesUsage) openai.Response {
	e := ex.echo
	resp := openai.Response{ID: ex.messageID, Object: "response", CreatedAt: ex.created, Status: status,
		Model: ex.model, Output: output, ParallelToolCalls: e.parallel, Store: e.store, PreviousResponseID: e.previous,
		Text: orRaw(e.text, `{"format":{"type":"text"}}`), ToolChoice: orRaw(e.toolChoice, `"auto"`),
		Tools: orRaw(e.tools, `[]`), Usage: usage, Metadata: map[string]any{}}
	if e.instructions != "" {
		in := e.instructions
		resp.Instructions = &in
	}
	if ex.maxOut > 0 {
		m := ex.maxOut
		resp.MaxOutputTokens = &m
	}
	if status == "incomplete" {
		resp.IncompleteDetails = &openai.Incomplete{Reason: "max_output_tokens"}
	}
	if resp.Output == nil {
		resp.Output = []openai.OutputItem{}
	}
	return resp
}

// orRaw returns v, or def when v is absent or null.
func orRaw(v json.RawMessage, def string) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return json.RawMessage(def)
	}
	return v
}

// finalStatus is the status of a finished reply: "incomplete" when it
// was cut, else "completed".
func finalStatus(r reply) string {
	if r.cut {
		return "incomplete"
	}
	return "completed"
}

func (w responsesWire) body(ex *exchange, r reply) []byte {
	u := openai.ResponsesUsageFrom(ex.usage(r))
	b, _ := json.Marshal(responseObject(ex, finalStatus(r), w.items(ex, r), &u))
	return b
}

func (w responsesWire) stream(hw http.ResponseWriter, r *http.Request, ex *exchange, rep reply, p streamPlan) {
	var events []namedEvent
	firstDelta := -1
	add := func(typ string, fields map[string]any) {
		// "type" and "sequence_number" first, as the API writes them.
		rest, _ := json.Marshal(fields)
		b := fmt.Appendf(nil, `{"type":%q,"sequence_number":%d,`, typ, len(events))
		events = append(events, namedEvent{name: typ, data: append(b, rest[1:]...)})
	}
	delta := func(typ string, fields map[string]any) {
		if firstDelta < 0 {
			firstDelta = len(events)
		}
		add(typ, fields)
	}
	add("response.created", map[string]any{"response": responseObject(ex, "in_progress", nil, nil)})
	add("response.in_progress", map[string]any{"response": responseObject(ex, "in_progress", nil, nil)})
	items := w.items(ex, rep)
	for oi, it := range items {
		started := it
		started.Status = "in_progress"
		if it.Type == "message" {
			started.Content = []openai.OutputPart{}
			add("response.output_item.added", map[string]any{"output_index": oi, "item": started})
			part := openai.OutputPart{Type: "output_text", Text: "", Annotations: []any{}}
			add("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": oi, "content_index": 0, "part": part})
			for _, piece := range pieces(it.Content[0].Text, 16) {
				delta("response.output_text.delta", map[string]any{"item_id": it.ID, "output_index": oi, "content_index": 0,
					"delta": piece, "logprobs": []any{}})
			}
			add("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": oi, "content_index": 0,
				"text": it.Content[0].Text, "logprobs": []any{}})
			add("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": oi, "content_index": 0,
				"part": it.Content[0]})
		} else {
			empty := ""
			started.Arguments = &empty
			add("response.output_item.added", map[string]any{"output_index": oi, "item": started})
			for _, piece := range pieces(*it.Arguments, 12) {
				delta("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": oi, "delta": piece})
			}
			add("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": oi,
				"name": it.Name, "arguments": *it.Arguments})
		}
		add("response.output_item.done", map[string]any{"output_index": oi, "item": it})
	}
	u := openai.ResponsesUsageFrom(ex.usage(rep))
	final := finalStatus(rep)
	add("response."+final, map[string]any{"response": responseObject(ex, final, items, &u)})

	stopAt := -1
	if p.stopAfter >= 0 {
		// As in the other dialects: the fault strikes after the first
		// output (one delta) has gone out.
		stopAt = max(firstDelta, 0) + max(p.stopAfter-1, 0)
	}
	sse.SetHeaders(hw.Header())
	hw.WriteHeader(http.StatusOK)
	_ = sse.Flush(hw)
	if retry.Sleep(r.Context(), p.firstDelay) != nil {
		return
	}
	for i, ev := range events {
		if i == stopAt {
			if p.fail {
				// The API's own error event: no "error" member.
				b := fmt.Appendf(nil, `{"type":"error","sequence_number":%d,"code":"server_error","message":%q,"param":null}`,
					i, "The server had an error while processing your request.")
				_ = sse.Write(hw, "error", b)
				_ = sse.Flush(hw)
			}
			return
		}
		if i > 0 && retry.Sleep(r.Context(), p.chunkDelay) != nil {
			return
		}
		if sse.Write(hw, ev.name, ev.data) != nil {
			return
		}
	}
}

// fromResponses reads a Responses request as a conversation: the
// instructions and system or developer messages are its system prompt;
// a function_call item is a call of the assistant turn before it (or of
// a new one); a function_call_output item is a tool turn.
func fromResponses(r *openai.ResponsesRequest) *Conversation {
	c := &Conversation{Model: r.Model}
	var sys []string
	if in := r.InstructionsText(); in != "" {
		sys = append(sys, in)
	}
	names := map[string]string{}
	for _, it := range r.Items() {
		switch it.Type {
		case "message":
			switch it.Role {
			case "system", "developer":
				sys = append(sys, it.Text)
			default:
				c.Turns = append(c.Turns, Turn{Role: it.Role, Text: it.Text})
			}
		case "function_call":
			names[it.CallID] = it.Name
			sc := SeenCall{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}
			if n := len(c.Turns); n > 0 && c.Turns[n-1].Role == "assistant" {
				c.Turns[n-1].ToolCalls = append(c.Turns[n-1].ToolCalls, sc)
			} else {
				c.Turns = append(c.Turns, Turn{Role: "assistant", ToolCalls: []SeenCall{sc}})
			}
		case "function_call_output":
			c.Turns = append(c.Turns, Turn{Role: "tool", Text: it.Text, ToolName: names[it.CallID]})
		}
	}
	c.System = strings.Join(sys, "\n")
	for _, t := range r.Tools {
		if t.Type == "function" {
			c.Tools = append(c.Tools, t.Name)
		}
	}
	return c
}
