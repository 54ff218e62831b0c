package failure

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/belay-run/belay/internal/fastjson"
)

// Observation is what one stream event says, as reported by
// StreamWatcher.Observe.
type Observation struct {
	// Output: the event carries model output: a non-empty content, refusal
	// or reasoning delta, or a tool call (name or arguments; in OpenAI
	// Responses, an output item begun that is neither a message nor
	// reasoning: a function call, or a built-in tool's call, which the
	// provider runs and bills). Role-only and
	// empty chunks, message_start, content_block_start of an empty text
	// block, ping and usage-only events are not output.
	Output bool
	// FirstOutput: this is the first event of the stream that carries output.
	FirstOutput bool
	// Err is the failure this event reports (an error event, an error data
	// line, a failed Responses event, a blocked Gemini prompt), with
	// OutputStarted set; nil otherwise.
	Err *Error
	// Terminator: the event ends the stream normally: "[DONE]" (OpenAI Chat),
	// message_stop (Anthropic), response.completed or response.incomplete
	// (OpenAI Responses), a candidate's finishReason (Gemini, which sends no
	// terminator).
	Terminator bool
	// Usage: the event carried token counts (see StreamWatcher.Usage).
	Usage bool
}

// StreamWatcher follows a server-sent-event stream one event at a time and
// tells a streaming proxy what it needs: whether model output has started
// (before that, a failure can still be retried invisibly), whether an event
// is a failure, whether the stream ended properly, and the usage reported.
//
// Sources for the event shapes: OpenAI Chat Completions streaming (chunks,
// "data: [DONE]", the final usage chunk with stream_options.include_usage)
// and Responses streaming events; Anthropic "Streaming Messages" (event
// flow, error events such as overloaded_error); Gemini streamGenerateContent
// with alt=sse. Every shape is recognised whatever the dialect, since
// compatible endpoints mix them; the dialect only names the provider type of
// Gemini errors.
//
// A StreamWatcher is not safe for concurrent use; use one per stream.
type StreamWatcher struct {
	dialect  Dialect
	started  bool
	done     bool
	err      *Error
	usage    StreamUsage
	hasUsage bool
}

// NewStreamWatcher returns a watcher for a stream in dialect d.
func NewStreamWatcher(d Dialect) *StreamWatcher {
	return &StreamWatcher{dialect: d}
}

// OutputStarted reports whether any event so far carried model output.
func (w *StreamWatcher) OutputStarted() bool { return w.started }

// Done reports whether the stream's terminator has been seen.
func (w *StreamWatcher) Done() bool { return w.done }

// Err returns the first failure seen, or nil.
func (w *StreamWatcher) Err() *Error { return w.err }

// Usage returns the latest token counts the stream reported; ok is false
// when it reported none.
func (w *StreamWatcher) Usage() (u StreamUsage, ok bool) { return w.usage, w.hasUsage }

// ObserveEvent is Observe(ev.Event, ev.Data).
func (w *StreamWatcher) ObserveEvent(ev SSEEvent) Observation { return w.Observe(ev.Event, ev.Data) }

// streamChunk holds the members of every dialect's stream events that the
// watcher reads.
type streamChunk struct {
	Type           string          `json:"type"`
	Object         string          `json:"object"`
	Error          json.RawMessage `json:"error"`
	PromptFeedback json.RawMessage `json:"promptFeedback"`
	Choices        []struct {
		Delta struct {
			Content      json.RawMessage   `json:"content"`
			ToolCalls    []json.RawMessage `json:"tool_calls"`
			FunctionCall json.RawMessage   `json:"function_call"`
			// Raw: a member of another shape than OpenAI's (an object
			// reasoning_content, Envoy AI Gateway's) must not make the
			// whole chunk undecodable, its output and usage unseen.
			Refusal          json.RawMessage `json:"refusal"`
			ReasoningContent json.RawMessage `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
		} `json:"delta"`
	} `json:"choices"`
	Usage         json.RawMessage `json:"usage"`
	Message       json.RawMessage `json:"message"`
	ContentBlock  json.RawMessage `json:"content_block"`
	Delta         json.RawMessage `json:"delta"`
	UsageMetadata json.RawMessage `json:"usageMetadata"`
	Response      json.RawMessage `json:"response"`
	Item          json.RawMessage `json:"item"`
	Candidates    []struct {
		Content struct {
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
}

// Observe feeds one event: its event name (may be empty) and its data.
// An event without data is ignored. An "error" event is a failure
// (Unknown) whatever its data; another event whose data is not JSON (nor
// OpenAI's [DONE]) is a ServerError: no client's SDK can read it, so it
// must not be relayed as if the stream were well. JSON whose members have
// types belay does not expect is ignored, as any member belay does not read.
func (w *StreamWatcher) Observe(event string, data []byte) Observation {
	var o Observation
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("[DONE]")) {
		w.done, o.Terminator = true, true
		return o
	}
	if len(data) == 0 {
		return o
	}
	var c streamChunk
	if fastjson.Unmarshal(data, &c) != nil {
		switch {
		case event == "error":
			o.Err = w.fail(New(Unknown, "stream error event: "+plainMessage(data, false)))
		case !fastjson.Valid(data):
			o.Err = w.fail(New(ServerError, "malformed stream event (its data is not JSON): "+plainMessage(data, false)))
		}
		// Valid JSON whose members have other types than belay reads (a
		// provider's extension, say) is not belay's to judge: ignored.
		return o
	}
	typ := event
	if typ == "" {
		typ = c.Type
	}
	if !isNull(c.Error) || !isNull(c.PromptFeedback) || c.Object == "error" || event == "error" || typ == "error" {
		// Only error-looking events pay for the second decode.
		if e := w.eventFailure(event, typ, data); e != nil {
			o.Err = w.fail(e)
			return o
		}
	}
	o.Usage = w.readUsage(&c)
	switch typ {
	case "message_stop", "response.completed", "response.incomplete":
		w.done, o.Terminator = true, true
	case "response.failed":
		we := parseWireError(c.Response)
		o.Err = w.fail(wireFailure(w.dialect, 0, &we))
		return o
	}
	for _, cand := range c.Candidates {
		if cand.FinishReason != "" && cand.FinishReason != "FINISH_REASON_UNSPECIFIED" {
			w.done, o.Terminator = true, true
		}
	}
	if hasOutput(typ, &c) {
		o.Output = true
		o.FirstOutput = !w.started
		w.started = true
	}
	return o
}

// eventFailure returns the failure an event reports, or nil.
func (w *StreamWatcher) eventFailure(event, typ string, data []byte) *Error {
	we := parseWireError(data)
	if we.found || event == "error" || typ == "error" {
		e := wireFailure(w.dialect, 0, &we)
		if e.Message == "" {
			e.Message = plainMessage(data, false)
		}
		return e
	}
	if we.BlockReason != "" {
		e := New(ContentFiltered, "prompt blocked: "+we.BlockReason)
		e.ProviderType = we.BlockReason
		return e
	}
	return nil
}

// fail records e as the stream's failure (the first one wins) and returns it.
func (w *StreamWatcher) fail(e *Error) *Error {
	e.OutputStarted = w.started
	if w.err == nil {
		w.err = e
	}
	return e
}

func (w *StreamWatcher) readUsage(c *streamChunk) bool {
	seen := w.usage.merge(c.Usage)
	if w.usage.merge(c.UsageMetadata) {
		seen = true
	}
	for _, raw := range []json.RawMessage{c.Message, c.Response} {
		var inner struct {
			Usage json.RawMessage `json:"usage"`
		}
		if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &inner) == nil && w.usage.merge(inner.Usage) {
			seen = true
		}
	}
	w.hasUsage = w.hasUsage || seen
	return seen
}

// hasOutput reports whether a chunk carries model output.
func hasOutput(typ string, c *streamChunk) bool {
	for _, ch := range c.Choices { // OpenAI Chat
		d := &ch.Delta
		if nonEmptyJSON(d.Content) || len(d.ToolCalls) > 0 || !isNull(d.FunctionCall) ||
			nonEmptyJSON(d.Refusal) || nonEmptyJSON(d.ReasoningContent) || nonEmptyJSON(d.Reasoning) {
			return true
		}
	}
	for _, cand := range c.Candidates { // Gemini
		for _, part := range cand.Content.Parts {
			for k, v := range part {
				if k == "text" && nonEmptyJSON(v) || k != "text" && k != "thought" && k != "thoughtSignature" {
					return true
				}
			}
		}
	}
	switch {
	case typ == "content_block_start": // Anthropic
		var b struct{ Type, Text, Thinking string }
		_ = json.Unmarshal(c.ContentBlock, &b)
		switch b.Type {
		case "text", "thinking":
			return b.Text != "" || b.Thinking != ""
		case "redacted_thinking", "":
			return false
		}
		return true // tool_use, server tool use and result blocks
	case typ == "content_block_delta":
		var d struct {
			Type        string
			Text        string
			PartialJSON string `json:"partial_json"`
			Thinking    string
		}
		_ = json.Unmarshal(c.Delta, &d)
		return d.Text != "" || d.PartialJSON != "" || d.Thinking != "" || d.Type == "citations_delta"
	case strings.HasPrefix(typ, "response.") && strings.HasSuffix(typ, ".delta"): // OpenAI Responses
		return nonEmptyJSON(c.Delta)
	case typ == "response.output_item.added": // OpenAI Responses: a call begun (function or built-in tool)
		var it struct{ Type string }
		_ = json.Unmarshal(c.Item, &it)
		return it.Type != "" && it.Type != "message" && it.Type != "reasoning"
	}
	return false
}

// nonEmptyJSON reports whether raw is a JSON value other than null, "", []
// or {}.
func nonEmptyJSON(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", `""`, "[]", "{}":
		return false
	}
	return true
}

// End reports how the stream ended, given the error that stopped reading
// (nil or io.EOF for a clean end). It returns the first failure observed;
// else nil when the terminator was seen; else a StreamInterrupted failure
// (transient) with OutputStarted set and readErr as Cause, or, when readErr
// is a cancellation, the Fatal Canceled failure.
func (w *StreamWatcher) End(readErr error) *Error {
	if w.err != nil || w.done {
		return w.err
	}
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		if ce := ClassifyError(readErr); ce.Kind == Fatal {
			c := *ce
			return w.fail(&c)
		}
	}
	e := New(StreamInterrupted, "stream ended before its terminator")
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		e = Wrap(StreamInterrupted, readErr)
	}
	return w.fail(e)
}

// ClassifyStream classifies a whole received stream body (up to where the
// connection closed) with a StreamWatcher and returns the failure (nil when
// the stream ended with its terminator and no error) and the usage reported.
//
// A body that is not an event stream is read as what it is: one JSON object
// (the server ignored stream: true, or sent an error) is classified as a
// complete response; a JSON array is Gemini's non-SSE stream, each element
// an event; an HTML page is a proxy's ServerError.
func ClassifyStream(d Dialect, body []byte) (*Error, StreamUsage) {
	w := NewStreamWatcher(d)
	trimmed := bytes.TrimSpace(body)
	var first byte
	if len(trimmed) > 0 {
		first = trimmed[0]
	}
	switch first {
	case '{':
		u, _ := ParseUsage(trimmed)
		we := parseWireError(trimmed)
		if !we.found && we.BlockReason == "" {
			return nil, u
		}
		w.Observe("", trimmed)
		return w.err, u
	case '[':
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		_, _ = dec.Token()
		var readErr error
		for dec.More() {
			var el json.RawMessage
			if readErr = dec.Decode(&el); readErr != nil {
				break
			}
			w.Observe("", el)
		}
		u, _ := w.Usage()
		return w.End(readErr), u
	case '<':
		e := New(ServerError, plainMessage(trimmed, true))
		return e, StreamUsage{}
	}
	r := NewSSEReader(bytes.NewReader(body))
	var readErr error
	for {
		ev, err := r.Next()
		if err != nil {
			readErr = err
			break
		}
		w.ObserveEvent(ev)
	}
	u, _ := w.Usage()
	return w.End(readErr), u
}
