package anthropic

import (
	"encoding/json"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/internal/fastjson"
)

// Stream event types, in the order a stream sends them
// (https://docs.claude.com/en/docs/build-with-claude/streaming): one
// message_start; per content block a content_block_start, deltas and a
// content_block_stop; one or more message_delta; message_stop. ping may
// appear anywhere; error ends the stream early.
const (
	EventMessageStart      = "message_start"
	EventContentBlockStart = "content_block_start"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventPing              = "ping"
	EventError             = "error"
)

// Event is any stream event's data; which fields are set depends on Type.
// The SSE event name equals Type.
type Event struct {
	Type         string        `json:"type"`
	Message      *Response     `json:"message,omitempty"`       // message_start
	Index        *int          `json:"index,omitempty"`         // content_block_*
	ContentBlock *ContentBlock `json:"content_block,omitempty"` // content_block_start
	Delta        *Delta        `json:"delta,omitempty"`         // content_block_delta, message_delta
	Usage        *DeltaUsage   `json:"usage,omitempty"`         // message_delta
	Error        *ErrorObject  `json:"error,omitempty"`         // error
}

// Delta is a content_block_delta's delta (Type "text_delta", "input_json_delta",
// "thinking_delta", "signature_delta") or a message_delta's delta
// (StopReason, StopSequence).
type Delta struct {
	Type         string  `json:"type,omitempty"`
	Text         string  `json:"text,omitempty"`
	PartialJSON  *string `json:"partial_json,omitempty"`
	Thinking     string  `json:"thinking,omitempty"`
	Signature    string  `json:"signature,omitempty"`
	StopReason   *string `json:"stop_reason,omitempty"`
	StopSequence *string `json:"stop_sequence,omitempty"`
}

// DeltaUsage is a message_delta's usage: cumulative output_tokens, and, in
// newer API versions, cumulative input and cache counts.
type DeltaUsage struct {
	OutputTokens             int64          `json:"output_tokens"`
	InputTokens              *int64         `json:"input_tokens,omitempty"`
	CacheCreationInputTokens *int64         `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int64         `json:"cache_read_input_tokens,omitempty"`
	CacheCreation            *CacheCreation `json:"cache_creation,omitempty"`
	ServerToolUse            *ServerToolUse `json:"server_tool_use,omitempty"`
}

// Accumulator folds an Anthropic stream; see dialect.Accumulator. Usage
// starts from message_start's usage; each message_delta's counts replace
// the earlier ones (they are cumulative). The zero value is ready to use; it
// is not safe for concurrent use.
type Accumulator struct {
	// Keep, when set before the first Add, makes the accumulator keep the
	// answer for Answer: the content blocks (text, thinking, tool_use
	// with its input), up to dialect.KeepMax bytes in all.
	Keep bool

	usage    Usage
	reported bool
	// final: a message_delta stated usage (the output count;
	// message_start's is a placeholder).
	final bool
	chars int64
	// searches counts the web searches begun (server_tool_use blocks
	// named web_search), for a stream cut before its usage says.
	searches int64
	stopped  bool
	err      *ErrorObject
	// id and model are message_start's; stopReason message_delta's.
	id, model, stopReason string

	blocks []keptBlock
	budget dialect.KeepBudget
}

// keptBlock is a content block kept for Answer, by its stream index.
type keptBlock struct {
	index          int
	typ, id, name  string
	text, thinking []byte
	input          []byte // tool_use: the input JSON as streamed
	startInput     json.RawMessage
}

func (a *Accumulator) keep(ev *Event) {
	if ev.Index == nil {
		return
	}
	b := dialect.ByIndex(&a.blocks, *ev.Index, func(b *keptBlock) int { return b.index }, keptBlock{index: *ev.Index})
	switch {
	case ev.Type == EventContentBlockStart && ev.ContentBlock != nil:
		cb := ev.ContentBlock
		b.typ, b.id, b.name = cb.Type, cb.ID, cb.Name
		a.budget.Append(&b.text, cb.Text)
		a.budget.Append(&b.thinking, cb.Thinking)
		b.startInput = cb.Input
	case ev.Type == EventContentBlockDelta && ev.Delta != nil:
		d := ev.Delta
		a.budget.Append(&b.text, d.Text)
		a.budget.Append(&b.thinking, d.Thinking)
		if d.PartialJSON != nil {
			a.budget.Append(&b.input, *d.PartialJSON)
		}
	}
}

// Answer returns the kept answer (Keep) as the "content" array of a
// non-streamed message: text blocks with their text, thinking blocks
// with their thinking, tool_use blocks with id, name and input (the
// streamed input JSON; as a string when it is not valid JSON, a stream
// cut inside it). When the answer passed dialect.KeepMax, a last text
// block notes how many bytes were left out. Nil without Keep or before any
// block.
func (a *Accumulator) Answer() []byte {
	if len(a.blocks) == 0 {
		return nil
	}
	out := make([]map[string]any, 0, len(a.blocks)+1)
	for _, b := range a.blocks {
		m := map[string]any{"type": b.typ}
		switch b.typ {
		case "tool_use", "server_tool_use":
			m["id"], m["name"] = b.id, b.name
			in := json.RawMessage(b.input)
			if len(in) == 0 {
				in = b.startInput
			}
			switch {
			case len(in) == 0:
				m["input"] = map[string]any{}
			case json.Valid(in):
				m["input"] = in
			default:
				m["input"] = string(in)
			}
		case "thinking":
			m["thinking"] = string(b.thinking)
		default:
			m["text"] = string(b.text)
		}
		out = append(out, m)
	}
	if n := a.budget.Dropped(); n > 0 {
		out = append(out, map[string]any{"type": "text", "text": dialect.DroppedNote(n)})
	}
	j, _ := json.Marshal(out)
	return j
}

var _ dialect.Accumulator = (*Accumulator)(nil)

// Add folds one event's data.
func (a *Accumulator) Add(data []byte) error {
	var ev Event
	if err := fastjson.Unmarshal(data, &ev); err != nil {
		return err
	}
	if a.Keep {
		a.keep(&ev)
	}
	switch ev.Type {
	case EventMessageStart:
		if ev.Message != nil {
			a.usage = ev.Message.Usage
			a.reported = true
			a.id, a.model = ev.Message.ID, ev.Message.Model
		}
	case EventContentBlockStart:
		if b := ev.ContentBlock; b != nil {
			if isWebSearch(b.Type, b.Name) {
				a.searches++
			}
			a.chars += int64(len(b.Text) + len(b.Name) + len(b.Thinking))
		}
	case EventContentBlockDelta:
		if d := ev.Delta; d != nil {
			a.chars += int64(len(d.Text) + len(d.Thinking))
			if d.PartialJSON != nil {
				a.chars += int64(len(*d.PartialJSON))
			}
		}
	case EventMessageDelta:
		if d := ev.Delta; d != nil && d.StopReason != nil {
			a.stopReason = *d.StopReason
		}
		if u := ev.Usage; u != nil {
			a.usage.OutputTokens = u.OutputTokens
			setIf(&a.usage.InputTokens, u.InputTokens)
			setIf(&a.usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
			setIf(&a.usage.CacheReadInputTokens, u.CacheReadInputTokens)
			if u.CacheCreation != nil {
				cc := *u.CacheCreation
				a.usage.CacheCreation = &cc
			}
			if u.ServerToolUse != nil {
				st := *u.ServerToolUse
				a.usage.ServerToolUse = &st
			}
			a.reported, a.final = true, true
		}
	case EventMessageStop:
		a.stopped = true
	case EventError:
		a.err = ev.Error
		if a.err == nil {
			a.err = &ErrorObject{}
		}
	}
	return nil
}

func setIf(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

// Usage returns the usage the stream reported so far. After a cut stream
// this holds message_start's numbers, whose output_tokens is a placeholder
// (usually 1), so callers charging a cut stream should use Estimate.
func (a *Accumulator) Usage() (dialect.Usage, bool) {
	u := a.usage.Dialect()
	u.WebSearches = max(u.WebSearches, a.searches)
	return u, a.reported
}

// OutputChars returns the characters of text, thinking, tool names and
// tool input JSON seen.
func (a *Accumulator) OutputChars() int64 { return a.chars }

// Complete reports whether message_stop was seen.
func (a *Accumulator) Complete() bool { return a.stopped }

// Err returns the error event's error object, or nil.
func (a *Accumulator) Err() *ErrorObject { return a.err }

// Estimate returns the reported usage, with output_tokens raised to the
// estimate from the output characters when the stream did not complete or
// no message_delta stated its usage (message_start's output count is a
// placeholder: an Anthropic-compatible server, or a proxy, that leaves the
// delta's usage out would have 40,000 characters charged as one token);
// without any reported usage, Input = promptTokens. Its web searches are
// at least those begun (server_tool_use blocks named web_search).
func (a *Accumulator) Estimate(promptTokens int64) dialect.Usage {
	est := dialect.EstimateTokens(a.chars)
	if !a.reported {
		return dialect.Usage{Input: promptTokens, Output: est, WebSearches: a.searches}
	}
	u, _ := a.Usage()
	if !a.stopped || !a.final {
		u.Output = max(u.Output, est)
	}
	return u
}

// Final reports whether a message_delta stated the stream's usage: its
// output count is then the provider's, not message_start's placeholder.
func (a *Accumulator) Final() bool { return a.final }

// ID, Model and StopReason return the streamed message's id and model
// (message_start) and its stop_reason (message_delta); "" before them.
func (a *Accumulator) ID() string         { return a.id }
func (a *Accumulator) Model() string      { return a.model }
func (a *Accumulator) StopReason() string { return a.stopReason }
