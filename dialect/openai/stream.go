package openai

import (
	"bytes"
	"cmp"
	"encoding/json"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/internal/fastjson"
)

// Done is the data of the event that ends an OpenAI stream.
const Done = "[DONE]"

// Chunk is one chat.completion.chunk of a stream. With
// stream_options.include_usage, every chunk carries "usage": null except the
// last one before [DONE], which has empty choices and the usage.
type Chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"` // "chat.completion.chunk"
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	ServiceTier       string        `json:"service_tier,omitempty"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *Usage        `json:"usage"`
}

// ChunkChoice is one choice's delta. FinishReason is null until the last
// content chunk of the choice.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is the increment a chunk adds to the assistant message.
// ReasoningContent and Reasoning are the reasoning that OpenAI-compatible
// servers stream beside the answer (DeepSeek's and vLLM's
// reasoning_content, OpenRouter's and Ollama's reasoning; some send both,
// with the same text), raw: a string, or an object with a text member
// (Envoy AI Gateway's), or another shape, which is not counted and does
// not fail the chunk. Output the provider bills, counted once in a cut
// stream's estimate (see reasoningChars).
type Delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	Refusal          *string         `json:"refusal,omitempty"`
	ReasoningContent json.RawMessage `json:"reasoning_content,omitempty"`
	Reasoning        json.RawMessage `json:"reasoning,omitempty"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is part of a tool call: the first delta for an Index has
// ID, Type and Function.Name; later ones add to Function.Arguments.
type ToolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function FunctionDelta `json:"function"`
}

// FunctionDelta is a tool call delta's function part. Name is omitted
// from the JSON when empty: OpenAI sends it only in a call's first delta,
// and a client that sets (rather than appends) the name from each delta
// would lose it to a later "name":"".
type FunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Accumulator folds an OpenAI stream; see dialect.Accumulator. The zero
// value is ready to use; it is not safe for concurrent use.
type Accumulator struct {
	// Keep, when set before the first Add, makes the accumulator keep the
	// answer for Answer: each choice's text, refusal and tool calls, up
	// to dialect.KeepMax bytes in all.
	Keep bool

	usage    *Usage
	chars    int64
	done     bool
	finished bool
	// id and model are the stream's (its chunks'); finish the finish
	// reason of each choice, by index.
	id, model string
	finish    []string
	err       *ErrorObject
	kept      keptAnswer
	// tier is the latest service_tier a chunk stated.
	tier string
}

// keptAnswer is what Keep keeps: the choices by index, and the bytes
// left out past dialect.KeepMax.
type keptAnswer struct {
	choices []keptChoice
	budget  dialect.KeepBudget
}

type keptChoice struct {
	index   int
	content []byte
	refusal []byte
	calls   []keptCall
	finish  string
	seen    bool // content or refusal began (null stays null otherwise)
}

type keptCall struct {
	index         int
	id, typ, name string
	arguments     []byte
}

func (k *keptAnswer) choice(i int) *keptChoice {
	return dialect.ByIndex(&k.choices, i, func(c *keptChoice) int { return c.index }, keptChoice{index: i})
}

func (c *keptChoice) call(i int) *keptCall {
	return dialect.ByIndex(&c.calls, i, func(k *keptCall) int { return k.index }, keptCall{index: i})
}

func (a *Accumulator) keep(ch ChunkChoice) {
	c := a.kept.choice(ch.Index)
	d := ch.Delta
	if d.Content != nil {
		c.seen = true
		a.kept.budget.Append(&c.content, *d.Content)
	}
	if d.Refusal != nil {
		a.kept.budget.Append(&c.refusal, *d.Refusal)
	}
	for _, tc := range d.ToolCalls {
		k := c.call(tc.Index)
		k.id = cmp.Or(k.id, tc.ID)
		k.typ = cmp.Or(k.typ, tc.Type)
		k.name += tc.Function.Name
		a.kept.budget.Append(&k.arguments, tc.Function.Arguments)
	}
	if ch.FinishReason != nil {
		c.finish = *ch.FinishReason
	}
}

// Answer returns the kept answer (Keep) as the "choices" array of a
// non-streamed chat.completion: each choice's index, its message (role
// assistant, content, refusal, tool_calls, annotations empty) and
// finish_reason (null when the stream ended before it). When the answer
// passed dialect.KeepMax, the last choice's content ends with a note of
// how many bytes were left out. Nil without Keep or before any choice.
func (a *Accumulator) Answer() []byte {
	if len(a.kept.choices) == 0 {
		return nil
	}
	type choice struct {
		Index        int             `json:"index"`
		Message      ResponseMessage `json:"message"`
		FinishReason *string         `json:"finish_reason"` // null: the stream ended before it
	}
	out := make([]choice, 0, len(a.kept.choices))
	for _, c := range a.kept.choices {
		m := ResponseMessage{Role: "assistant", Annotations: []any{}}
		if c.seen {
			s := string(c.content)
			m.Content = &s
		}
		if len(c.refusal) > 0 {
			s := string(c.refusal)
			m.Refusal = &s
		}
		for _, k := range c.calls {
			typ := cmp.Or(k.typ, "function")
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: k.id, Type: typ, Function: FunctionCall{Name: k.name, Arguments: string(k.arguments)}})
		}
		ch := choice{Index: c.index, Message: m}
		if c.finish != "" {
			f := c.finish
			ch.FinishReason = &f
		}
		out = append(out, ch)
	}
	if n := a.kept.budget.Dropped(); n > 0 {
		last := &out[len(out)-1].Message
		note := dialect.DroppedNote(n)
		if last.Content == nil {
			last.Content = &note
		} else {
			s := *last.Content + note
			last.Content = &s
		}
	}
	b, _ := json.Marshal(out)
	return b
}

var _ dialect.Accumulator = (*Accumulator)(nil)

// Add folds one event's data: "[DONE]", a chunk, or an error object
// ({"error": {...}}), which is recorded and reported by Err.
func (a *Accumulator) Add(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == Done {
		a.done = true
		return nil
	}
	var c struct {
		Chunk
		Error json.RawMessage `json:"error"`
	}
	if err := fastjson.Unmarshal(data, &c); err != nil {
		return err
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		a.err = looseError(c.Error)
		return nil
	}
	if c.Usage != nil {
		u := *c.Usage
		a.usage = &u
	}
	a.tier = cmp.Or(c.ServiceTier, a.tier)
	if a.id == "" {
		a.id, a.model = c.ID, c.Model
	}
	for _, ch := range c.Choices {
		if a.Keep {
			a.keep(ch)
		}
		d := ch.Delta
		if d.Content != nil {
			a.chars += int64(len(*d.Content))
		}
		if d.Refusal != nil {
			a.chars += int64(len(*d.Refusal))
		}
		// Servers in the rename's deprecation window send the reasoning
		// under both names: it counts once.
		a.chars += max(reasoningChars(d.ReasoningContent), reasoningChars(d.Reasoning))
		for _, tc := range d.ToolCalls {
			a.chars += int64(len(tc.Function.Name) + len(tc.Function.Arguments))
		}
		if ch.FinishReason != nil {
			a.finished = true
			if ch.Index >= 0 && ch.Index < MaxChoices {
				for len(a.finish) <= ch.Index {
					a.finish = append(a.finish, "")
				}
				a.finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	return nil
}

// Usage returns the usage chunk's numbers, if the stream sent one.
func (a *Accumulator) Usage() (dialect.Usage, bool) {
	if a.usage == nil {
		return dialect.Usage{}, false
	}
	u := a.usage.Dialect()
	u.Tier = a.tier
	return u, true
}

// OutputChars returns the characters of content, refusals, tool names and
// tool arguments seen.
func (a *Accumulator) OutputChars() int64 { return a.chars }

// Complete reports whether "[DONE]" was seen.
func (a *Accumulator) Complete() bool { return a.done }

// ID and Model return the stream's completion id and model, as its first
// chunk that has an id gives them.
func (a *Accumulator) ID() string    { return a.id }
func (a *Accumulator) Model() string { return a.model }

// FinishReasons returns each choice's finish_reason, by index ("" for a
// choice that had none yet); nil before any.
func (a *Accumulator) FinishReasons() []string { return a.finish }

// Finished reports whether a chunk with a finish_reason was seen.
func (a *Accumulator) Finished() bool { return a.finished }

// Err returns the error object the stream carried, or nil.
func (a *Accumulator) Err() *ErrorObject { return a.err }

// Estimate returns the reported usage, or Input = promptTokens and Output
// estimated from the output characters.
func (a *Accumulator) Estimate(promptTokens int64) dialect.Usage {
	if u, ok := a.Usage(); ok {
		return u
	}
	return dialect.Usage{Input: promptTokens, Output: dialect.EstimateTokens(a.chars), Tier: a.tier}
}

// looseError reads an error object whose fields may not be strings (some
// routers send a numeric code).
func looseError(raw json.RawMessage) *ErrorObject {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	e := &ErrorObject{}
	if s, ok := m["message"].(string); ok {
		e.Message = s
	}
	if s, ok := m["type"].(string); ok {
		e.Type = s
	}
	switch v := m["code"].(type) {
	case string:
		e.Code = &v
	case float64:
		s, _ := json.Marshal(v)
		str := string(s)
		e.Code = &str
	}
	if s, ok := m["param"].(string); ok {
		e.Param = &s
	}
	return e
}

// reasoningChars returns the characters of a delta's reasoning member:
// a string's, or an object's text member's; 0 for any other shape.
func reasoningChars(raw json.RawMessage) int64 {
	if len(raw) == 0 {
		return 0
	}
	var text string
	if raw[0] == '{' {
		var obj struct {
			Text string `json:"text"`
		}
		if fastjson.Unmarshal(raw, &obj) != nil {
			return 0
		}
		text = obj.Text
	} else if fastjson.Unmarshal(raw, &text) != nil {
		return 0
	}
	return int64(len(text))
}
