package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/internal/fastjson"
)

// The Responses API (https://platform.openai.com/docs/api-reference/responses):
// POST /v1/responses takes an input (a string, or an array of items:
// messages, function calls and their outputs, reasoning) and answers a
// response object whose "output" array holds the model's items; streamed,
// it sends typed events ("response.created", "response.output_text.delta",
// ..., "response.completed"), each with a sequence_number, and no [DONE].

// ResponsesPath is the Responses API endpoint path.
const ResponsesPath = "/v1/responses"

// ResponsesRequest is a Responses API request, reduced to what belay reads.
// Raw holds the body as received, unknown fields included.
type ResponsesRequest struct {
	Model string `json:"model"`
	// Input is a string or an array of input items; absent when the
	// request continues a stored response or conversation.
	Input json.RawMessage `json:"input,omitempty"`
	// Instructions is a string or null: a system (developer) message.
	Instructions json.RawMessage `json:"instructions,omitempty"`
	Tools        []ResponsesTool `json:"tools,omitempty"`
	// MaxToolCalls bounds the built-in tool calls of the response, all
	// tools together.
	MaxToolCalls    *int64 `json:"max_tool_calls,omitempty"`
	Stream          bool   `json:"stream,omitempty"`
	MaxOutputTokens *int64 `json:"max_output_tokens,omitempty"`
	// PreviousResponseID and Conversation name state the provider keeps:
	// the response or conversation lives in the account that made it.
	PreviousResponseID *string         `json:"previous_response_id,omitempty"`
	Conversation       json.RawMessage `json:"conversation,omitempty"`
	// Background asks the provider to run the response on its own and be
	// polled for it (GET /v1/responses/{id}).
	Background *bool `json:"background,omitempty"`
	// ServiceTier is the processing tier asked for, as sent (see
	// Request.ServiceTier).
	ServiceTier json.RawMessage `json:"service_tier,omitempty"`
	// Text holds the output format: {"format": {"type": "json_schema",
	// "schema": ...}} asks for structured output.
	Text json.RawMessage `json:"text,omitempty"`

	// Options belay does not read, declared so that a value of the wrong
	// type is refused with a 400 naming the field, as OpenAI refuses it.
	Temperature       *float64 `json:"temperature,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	ParallelToolCalls *bool    `json:"parallel_tool_calls,omitempty"`
	Store             *bool    `json:"store,omitempty"`
	User              *string  `json:"user,omitempty"`

	Raw json.RawMessage `json:"-"`
}

// ResponsesTool is one entry of a Responses request's tools. A function
// tool has its name, description and parameters at the top level (not
// under "function" as in Chat Completions); built-in tools (web_search,
// file_search, ...) have only their type and settings.
type ResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// responsesFields are the members ResponsesRequest decodes, for
// dialect.CaseMismatch.
var responsesFields = dialect.FieldsOf(reflect.TypeFor[ResponsesRequest]())

// ParseResponsesRequest decodes body into a ResponsesRequest, keeps body
// in Raw, and validates it (see Validate). Errors are *dialect.FieldError
// naming the field (matching errors.Is(err, failure.InvalidRequest)).
func ParseResponsesRequest(body []byte) (*ResponsesRequest, error) {
	var r ResponsesRequest
	if err := dialect.DecodeObject(body, &r); err != nil {
		return nil, err
	}
	r.Raw = body
	if err := dialect.CaseMismatch(body, responsesFields); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// inputRoles are the roles of a Responses input message.
var inputRoles = map[string]bool{"user": true, "assistant": true, "system": true, "developer": true}

// Validate checks what belay relies on: a model; instructions a string or
// null; input a string or an array of objects, where a message has a
// known role and a content that is a string or an array of typed parts
// (a text part's text a string), a function_call has a call_id, a name
// and string arguments, and a function_call_output has an output;
// function tools with names; a positive max_output_tokens. It
// returns a *dialect.FieldError for the first problem, named as OpenAI
// names fields ("input[1].content"). An item with only an id is an
// item reference (its type is optional). Item types it does not know
// (reasoning, item references, built-in tool calls) are the provider's to
// judge.
func (r *ResponsesRequest) Validate() error {
	if r.Model == "" {
		return dialect.Field("model", "is required")
	}
	if in := bytes.TrimSpace(r.Instructions); len(in) > 0 && in[0] != '"' && in[0] != 'n' {
		return dialect.Field("instructions", "must be a string or null")
	}
	in := bytes.TrimSpace(r.Input)
	switch {
	case len(in) == 0, in[0] == '"':
	case in[0] == '[':
		i := 0
		var bad *dialect.FieldError
		_ = dialect.EachElementOfValid(in, func(item []byte) {
			if bad == nil {
				bad = checkInputItem(item, fmt.Sprintf("input[%d]", i))
			}
			i++
		})
		if bad != nil {
			return bad
		}
	default:
		return dialect.Field("input", "must be a string or an array of input items")
	}
	for i, t := range r.Tools {
		if t.Type == "function" && t.Name == "" {
			return dialect.Field(fmt.Sprintf("tools[%d].name", i), "is required for a function tool")
		}
	}
	if r.MaxOutputTokens != nil && *r.MaxOutputTokens < 1 {
		return dialect.Field("max_output_tokens", "must be at least 1")
	}
	return nil
}

// responsesItem holds the members of an input item that Validate and
// Conversation read.
type responsesItem struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    *string         `json:"call_id"`
	Name      *string         `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// checkInputItem checks one input item (valid JSON) at path.
func checkInputItem(item []byte, path string) *dialect.FieldError {
	if item[0] != '{' {
		return dialect.Field(path, "must be an object")
	}
	var it responsesItem
	if err := json.Unmarshal(item, &it); err != nil {
		fe := dialect.DecodeError(err)
		fe.Field = path + "." + fe.Field
		return fe
	}
	switch {
	case it.Type == "message" || it.Type == "" && it.Role != "":
		if !inputRoles[it.Role] {
			return dialect.Field(path+".role", "must be one of user, assistant, system, developer; got %q", it.Role)
		}
		if len(it.Content) == 0 {
			return dialect.Field(path+".content", "is required")
		}
		if fe := dialect.CheckContent(it.Content, "[%d]", false); fe != nil {
			fe.Field = path + ".content" + fe.Field
			return fe
		}
		if fe := checkTextParts(it.Content, path+".content"); fe != nil {
			return fe
		}
	case it.Type == "" && it.ID != "":
		// An item reference: its type is optional (openai-go's
		// ResponseInputItemParamOfItemReference sends only the id).
	case it.Type == "":
		return dialect.Field(path+".type", "is required for an item that is not a message (one with a role) or an item reference (one with an id)")
	case it.Type == "function_call":
		switch {
		case it.CallID == nil:
			return dialect.Field(path+".call_id", "is required")
		case it.Name == nil:
			return dialect.Field(path+".name", "is required")
		case it.Arguments == nil:
			return dialect.Field(path+".arguments", "is required")
		}
	case it.Type == "function_call_output" && len(it.Output) == 0:
		return dialect.Field(path+".output", "is required")
	}
	return nil
}

// checkTextParts checks the Responses text parts (input_text,
// output_text) of an array content c, which dialect.CheckContent passed:
// each has a string text.
func checkTextParts(c []byte, path string) *dialect.FieldError {
	if c = bytes.TrimSpace(c); c[0] != '[' {
		return nil
	}
	var parts []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	_ = json.Unmarshal(c, &parts)
	for i, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" {
			continue
		}
		if t := bytes.TrimSpace(p.Text); len(t) == 0 || t[0] != '"' {
			return dialect.Field(fmt.Sprintf("%s[%d].text", path, i), "must be a string")
		}
	}
	return nil
}

// MaxOutput returns the request's max_output_tokens; ok is false when it
// is unset.
func (r *ResponsesRequest) MaxOutput() (n int64, ok bool) {
	if r.MaxOutputTokens != nil {
		return *r.MaxOutputTokens, true
	}
	return 0, false
}

// InstructionsText returns the instructions, "" when absent or null.
func (r *ResponsesRequest) InstructionsText() string {
	in := bytes.TrimSpace(r.Instructions)
	if len(in) == 0 || in[0] != '"' {
		return ""
	}
	return unquote(in)
}

// ResponsesItem is one input item as a conversation reads it: a message
// (Role and Text), a function call the model made (CallID, Name,
// Arguments) or a function's output (CallID, Text).
type ResponsesItem struct {
	Type      string // "message", "function_call", "function_call_output", or the item's own type
	Role      string
	Text      string
	CallID    string
	Name      string
	Arguments string
}

// Items returns the request's input as items: a string input is one user
// message; a message's text is its string content or its text parts
// (input_text, output_text, text) joined by "\n"; an output that is an
// array of parts gives its text parts.
func (r *ResponsesRequest) Items() []ResponsesItem {
	in := bytes.TrimSpace(r.Input)
	if len(in) == 0 {
		return nil
	}
	if in[0] == '"' {
		return []ResponsesItem{{Type: "message", Role: "user", Text: unquote(in)}}
	}
	var out []ResponsesItem
	_ = dialect.EachElementOfValid(in, func(raw []byte) {
		var it responsesItem
		if json.Unmarshal(raw, &it) != nil {
			return
		}
		item := ResponsesItem{Type: it.Type, Role: it.Role}
		switch {
		case item.Type == "" && it.Role == "" && it.ID != "":
			item.Type = "item_reference"
		case item.Type == "":
			item.Type = "message"
		}
		if it.CallID != nil {
			item.CallID = *it.CallID
		}
		if it.Name != nil {
			item.Name = *it.Name
		}
		if it.Arguments != nil {
			item.Arguments = *it.Arguments
		}
		switch item.Type {
		case "message":
			item.Text = partsText(it.Content)
		case "function_call_output":
			item.Text = partsText(it.Output)
		}
		out = append(out, item)
	})
	return out
}

// partsText returns a string value, or the text of an array of parts
// (types input_text, output_text and text) joined by "\n".
func partsText(c json.RawMessage) string {
	c = bytes.TrimSpace(c)
	if len(c) == 0 {
		return ""
	}
	if c[0] == '"' {
		return unquote(c)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// responsesSettings are the top-level Responses request members that are
// not prompt (names from OpenAI's API reference, "Create a model
// response"). Every other member counts toward the prompt estimate.
var responsesSettings = map[string]bool{
	"model": true, "stream": true, "stream_options": true, "temperature": true, "top_p": true,
	"max_output_tokens": true, "max_tool_calls": true, "top_logprobs": true, "user": true,
	"safety_identifier": true, "prompt_cache_key": true, "prompt_cache_retention": true, "store": true,
	"metadata": true, "parallel_tool_calls": true, "tool_choice": true, "service_tier": true,
	"reasoning": true, "truncation": true, "include": true, "background": true,
	"previous_response_id": true, "conversation": true,
}

// EstimateResponsesPromptTokens estimates the prompt tokens of r for a
// budget reservation, from r.Raw as EstimatePromptTokens does for Chat
// Completions: the instructions and a string input as text; each input
// item's members but its type, id, role, call_id and status by their
// JSON size, a message's content part by part (images and files as
// addPart counts them, input_image and input_file included); tools and
// text.format by their JSON size; 3 tokens per item and 3 for the reply.
// Server-side state (previous_response_id, a conversation) is not known
// to belay and not counted. It is never below 1.
func EstimateResponsesPromptTokens(r *ResponsesRequest) int64 {
	var s dialect.PromptSize
	var items int64
	_ = dialect.EachMemberOfValid(r.Raw, func(name, value []byte) {
		switch {
		case string(name) == "input" && len(value) > 0 && value[0] == '[':
			_ = dialect.EachElementOfValid(value, func(it []byte) {
				items++
				addResponsesItem(&s, it)
			})
		case string(name) == "input":
			items++
			s.AddJSON(value)
		case !responsesSettings[string(name)]:
			s.AddJSON(value) // instructions, tools, text, prompt, ...
		}
	})
	return max(s.Tokens()+perMessageTokens*items+perMessageTokens, 1)
}

// addResponsesItem adds one input item (see EstimateResponsesPromptTokens).
func addResponsesItem(s *dialect.PromptSize, it []byte) {
	if dialect.EachMemberOfValid(it, func(name, value []byte) {
		switch string(name) {
		case "type", "id", "role", "call_id", "status":
		case "content", "output":
			if dialect.EachElementOfValid(value, func(p []byte) { addResponsesPart(s, p) }) != nil {
				s.AddJSON(value)
			}
		default:
			s.AddJSON(value)
		}
	}) != nil {
		s.AddJSON(it)
	}
}

// addResponsesPart adds a content part: text parts by their text,
// input_image and input_file as Chat Completions' image and file parts
// count, any other by its JSON size.
func addResponsesPart(s *dialect.PromptSize, p []byte) {
	var typ, text, detail, fileData []byte
	_ = dialect.EachMemberOfValid(p, func(name, value []byte) {
		switch string(name) {
		case "type":
			typ = value
		case "text":
			text = value
		case "detail":
			detail = value
		case "file_data":
			fileData = value
		}
	})
	switch string(typ) {
	case `"input_text"`, `"output_text"`, `"text"`:
		s.AddText(text)
	case `"input_image"`:
		addImage(s, detail)
	case `"input_file"`:
		s.AddMedia(dialect.EstimateDocumentTokens(dataURLLen(fileData)))
	default:
		s.AddJSON(p)
	}
}

// ResponsesUsage is the usage object of a response. input_tokens includes
// the cached ones; output_tokens includes the reasoning ones.
type ResponsesUsage struct {
	InputTokens         int64                   `json:"input_tokens"`
	InputTokensDetails  *ResponsesInputDetails  `json:"input_tokens_details,omitempty"`
	OutputTokens        int64                   `json:"output_tokens"`
	OutputTokensDetails *ResponsesOutputDetails `json:"output_tokens_details,omitempty"`
	TotalTokens         int64                   `json:"total_tokens"`
}

// ResponsesInputDetails breaks down input_tokens.
type ResponsesInputDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// ResponsesOutputDetails breaks down output_tokens.
type ResponsesOutputDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Dialect converts u to the dialect-neutral shape (Input excludes cached
// tokens; see dialect.Usage).
func (u ResponsesUsage) Dialect() dialect.Usage {
	d := dialect.Usage{Input: u.InputTokens, Output: u.OutputTokens}
	if u.InputTokensDetails != nil {
		d.CachedInput = u.InputTokensDetails.CachedTokens
		d.Input -= d.CachedInput
	}
	if u.OutputTokensDetails != nil {
		d.Reasoning = u.OutputTokensDetails.ReasoningTokens
	}
	return d
}

// ResponsesUsageFrom returns the Responses usage for d, with both detail
// objects present, as OpenAI sends them.
func ResponsesUsageFrom(d dialect.Usage) ResponsesUsage {
	in := d.Prompt()
	return ResponsesUsage{
		InputTokens: in, OutputTokens: d.Output, TotalTokens: in + d.Output,
		InputTokensDetails:  &ResponsesInputDetails{CachedTokens: d.CachedInput},
		OutputTokensDetails: &ResponsesOutputDetails{ReasoningTokens: d.Reasoning},
	}
}

// ResponsesUsageOf returns the top-level "usage" of a response object
// (body); ok is false when it is absent, null or does not decode.
func ResponsesUsageOf(body []byte) (u ResponsesUsage, ok bool) {
	var p *ResponsesUsage
	if dialect.DecodeMember(body, "usage", &p) != nil || p == nil {
		return ResponsesUsage{}, false
	}
	return *p, true
}

// Response is a response object, as the simulator writes it. Status is
// "completed", "incomplete" (IncompleteDetails says why: max_output_tokens,
// content_filter), "failed" (Error), "in_progress" or "queued".
type Response struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"` // "response"
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Error              *ErrorObject    `json:"error"`
	IncompleteDetails  *Incomplete     `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int64          `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []OutputItem    `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              bool            `json:"store"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	Usage              *ResponsesUsage `json:"usage"`
	Metadata           map[string]any  `json:"metadata"`
}

// Incomplete says why a response is incomplete.
type Incomplete struct {
	Reason string `json:"reason"`
}

// OutputItem is one item of a response's output: a "message" (Role,
// Content) or a "function_call" (CallID, Name, Arguments). Status is
// "in_progress", "completed" or "incomplete".
type OutputItem struct {
	Type      string       `json:"type"`
	ID        string       `json:"id"`
	Status    string       `json:"status"`
	Role      string       `json:"role,omitempty"`
	Content   []OutputPart `json:"content,omitzero"` // [] kept: a message item in progress has it empty
	CallID    string       `json:"call_id,omitempty"`
	Name      string       `json:"name,omitempty"`
	Arguments *string      `json:"arguments,omitempty"`
}

// OutputPart is a message's content part: {"type": "output_text", "text",
// "annotations"}.
type OutputPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

// ResponsesErrorEvent returns the error event belay ends a Responses
// stream with: "event: error" and data in the shape of the API's error
// event ({"type": "error", "code", "message", "param", "sequence_number"})
// with the error object under "error" as well. The official SDKs end a
// stream with an error on an event whose data has an "error" member
// (openai-go's ssestream, openai-python's Stream); an error event without
// one is handed to the caller as one more event, and a caller that does
// not look for it sees a stream that ended well.
func ResponsesErrorEvent(errType, code, message string, seq int64) []byte {
	e := NewError(errType, code, message)
	body, _ := json.Marshal(struct {
		Type           string      `json:"type"`
		Code           *string     `json:"code"`
		Message        string      `json:"message"`
		Param          *string     `json:"param"`
		SequenceNumber int64       `json:"sequence_number"`
		Error          ErrorObject `json:"error"`
	}{"error", e.Code, message, nil, seq, e})
	return sse.Format("error", body)
}

// ResponsesAccumulator folds a Responses stream: the usage of its final
// response event (response.completed, response.incomplete or
// response.failed), the output characters of its deltas (for an estimate
// when the stream is cut before it), the last sequence_number, and, with
// Keep, the answer. The zero value is ready to use; it is not safe for
// concurrent use.
type ResponsesAccumulator struct {
	// Keep, when set before the first Add, keeps the answer for Answer:
	// the output items, up to dialect.KeepMax bytes in all.
	Keep bool

	usage   *ResponsesUsage
	id      string // the response's id, from its response events
	model   string // and its model
	finish  string // the final response's status (see FinishOf)
	chars   int64
	seq     int64
	seqSeen bool
	final   json.RawMessage   // the final response's output, when it fits
	done    []json.RawMessage // output items done
	open    []*openItem       // items begun and not done, in order
	kept    int64             // bytes of done, and of open items' text
	dropped int64             // bytes left out past dialect.KeepMax
	// web and file count the built-in tool calls the stream began
	// (response.output_item.added), or the final response's output
	// counts, whichever is more.
	web, file int64
	// tier is the latest service_tier a response event stated (a
	// response.created one may say "auto", as asked; the final one says
	// the tier that served it).
	tier string
}

// Built-in tool call output items that OpenAI bills per call on top of
// their tokens (platform.openai.com/docs/pricing, "Built-in tools").
const (
	itemWebSearchCall  = "web_search_call"
	itemFileSearchCall = "file_search_call"
)

// ResponsesToolCalls counts the web_search_call and file_search_call
// items of a response's output (the output member's JSON; anything else
// counts none).
func ResponsesToolCalls(output json.RawMessage) (web, file int64) {
	var items []struct {
		Type string `json:"type"`
	}
	if fastjson.Unmarshal(output, &items) != nil {
		return 0, 0
	}
	for _, it := range items {
		switch it.Type {
		case itemWebSearchCall:
			web++
		case itemFileSearchCall:
			file++
		}
	}
	return web, file
}

// BuiltinToolCalls returns how many calls of the built-in web search
// (tools of type web_search, web_search_preview and their dated versions)
// and file search (file_search) the request's response may make, for its
// reservation: max_tool_calls of each tool it declares, or one when it
// sets none (the API then sets no bound, and a response may call more).
func (r *ResponsesRequest) BuiltinToolCalls() (web, file int64) {
	n := int64(1)
	if r.MaxToolCalls != nil && *r.MaxToolCalls > 0 {
		n = *r.MaxToolCalls
	}
	for _, t := range r.Tools {
		switch {
		case strings.HasPrefix(t.Type, "web_search"):
			web = n
		case t.Type == "file_search":
			file = n
		}
	}
	return web, file
}

// ResponsesBodyUsageOfValid returns the usage of a response object
// (body, already known to be valid JSON: see dialect.EachMemberOfValid):
// its top-level "usage", with the built-in tool calls of its "output"
// counted (ResponsesToolCalls) and its service_tier read (Tier), all in
// one pass over the body (the last of duplicate
// members counts, names matched as DecodeMember does); ok is false when
// the usage is absent, null or does not decode.
func ResponsesBodyUsageOfValid(body []byte) (dialect.Usage, bool) {
	var usage, output, tier []byte
	if dialect.EachMemberOfValid(body, func(name, value []byte) {
		switch {
		case bytes.EqualFold(name, []byte("usage")):
			usage = value
		case bytes.EqualFold(name, []byte("output")):
			output = value
		case bytes.EqualFold(name, []byte("service_tier")):
			tier = value
		}
	}) != nil {
		return dialect.Usage{}, false
	}
	var p *ResponsesUsage
	if len(usage) == 0 || fastjson.Unmarshal(usage, &p) != nil || p == nil {
		return dialect.Usage{}, false
	}
	u := p.Dialect()
	u.WebSearches, u.FileSearches = ResponsesToolCalls(output)
	u.Tier = tierMember(tier)
	return u, true
}

// ResponsesBodyToolCalls is ResponsesToolCalls of a response body's
// output member.
func ResponsesBodyToolCalls(body []byte) (web, file int64) {
	var out json.RawMessage
	if dialect.DecodeMember(body, "output", &out) != nil {
		return 0, 0
	}
	return ResponsesToolCalls(out)
}

// openItem is an output item the stream has begun: a message (its text
// so far) or a function call (its arguments so far).
type openItem struct {
	id, typ, callID, name string
	text                  []byte
}

// responsesEvent holds the members of a stream event the accumulator reads.
type responsesEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int64          `json:"sequence_number"`
	Delta          json.RawMessage `json:"delta"`
	ItemID         string          `json:"item_id"`
	Item           json.RawMessage `json:"item"`
	Response       *struct {
		ID                string          `json:"id"`
		Model             string          `json:"model"`
		Status            string          `json:"status"`
		IncompleteDetails *Incomplete     `json:"incomplete_details"`
		Usage             *ResponsesUsage `json:"usage"`
		Output            json.RawMessage `json:"output"`
		ServiceTier       string          `json:"service_tier"`
	} `json:"response"`
}

// Add folds one event's data; data that is not a JSON object is ignored.
func (a *ResponsesAccumulator) Add(data []byte) {
	var ev responsesEvent
	if fastjson.Unmarshal(data, &ev) != nil {
		return
	}
	if ev.SequenceNumber != nil {
		a.seq, a.seqSeen = *ev.SequenceNumber, true
	}
	var added struct { // a response.output_item.added event's item
		ID     string `json:"id"`
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Name   string `json:"name"`
	}
	if ev.Type == "response.output_item.added" && fastjson.Unmarshal(ev.Item, &added) == nil {
		switch added.Type {
		case itemWebSearchCall:
			a.web++
		case itemFileSearchCall:
			a.file++
		}
	}
	switch {
	case strings.HasSuffix(ev.Type, ".delta"):
		var d string
		if json.Unmarshal(ev.Delta, &d) == nil {
			a.chars += int64(len(d))
			if a.Keep && (ev.Type == "response.output_text.delta" || ev.Type == "response.refusal.delta" ||
				ev.Type == "response.function_call_arguments.delta") {
				a.keepDelta(ev.ItemID, d)
			}
		}
	case !a.Keep:
	case ev.Type == "response.output_item.added":
		if added.Type == "message" || added.Type == "function_call" {
			a.open = append(a.open, &openItem{id: added.ID, typ: added.Type, callID: added.CallID, name: added.Name})
		}
	case ev.Type == "response.output_item.done" && len(ev.Item) > 0:
		var it struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(ev.Item, &it)
		for i, o := range a.open {
			if o.id == it.ID {
				a.kept -= int64(len(o.text))
				a.open = append(a.open[:i:i], a.open[i+1:]...)
				break
			}
		}
		if a.kept+int64(len(ev.Item)) > dialect.KeepMax {
			a.dropped += int64(len(ev.Item))
			return
		}
		a.kept += int64(len(ev.Item))
		a.done = append(a.done, ev.Item)
	case ev.Type == "response.completed" || ev.Type == "response.incomplete" || ev.Type == "response.failed":
		if ev.Response != nil && int64(len(ev.Response.Output)) <= dialect.KeepMax {
			a.final = ev.Response.Output
		}
	}
	if r := ev.Response; r != nil {
		if r.ID != "" {
			a.id = r.ID
		}
		if r.Model != "" {
			a.model = r.Model
		}
		a.tier = cmp.Or(r.ServiceTier, a.tier)
		if ev.Type == "response.completed" || ev.Type == "response.incomplete" || ev.Type == "response.failed" {
			a.finish = FinishOf(r.Status, r.IncompleteDetails)
		}
	}
	if ev.Response != nil && ev.Response.Usage != nil &&
		(ev.Type == "response.completed" || ev.Type == "response.incomplete" || ev.Type == "response.failed") {
		u := *ev.Response.Usage
		a.usage = &u
		web, file := ResponsesToolCalls(ev.Response.Output)
		a.web, a.file = max(a.web, web), max(a.file, file)
	}
}

// keepDelta adds delta d to the open item id (the latest open item when
// the event names none), within dialect.KeepMax.
func (a *ResponsesAccumulator) keepDelta(id string, d string) {
	var o *openItem
	for i := len(a.open) - 1; i >= 0; i-- {
		if id == "" || a.open[i].id == id {
			o = a.open[i]
			break
		}
	}
	if o == nil { // a delta of an item whose beginning was not seen
		o = &openItem{id: id, typ: "message"}
		a.open = append(a.open, o)
	}
	if a.kept+int64(len(d)) > dialect.KeepMax {
		a.dropped += int64(len(d))
		return
	}
	a.kept += int64(len(d))
	o.text = append(o.text, d...)
}

// ResponseID returns the id of the response the stream carries (its
// response.created, response.completed, ... events); "" before one.
func (a *ResponsesAccumulator) ResponseID() string { return a.id }

// Model returns the response's model, as its events give it.
func (a *ResponsesAccumulator) Model() string { return a.model }

// Finish returns how the response ended (FinishOf its final event's
// status); "" before its final event.
func (a *ResponsesAccumulator) Finish() string { return a.finish }

// FinishOf is a response's finish reason, for a trace: its status
// ("completed", "failed"), or for an incomplete one the reason given
// ("max_output_tokens", "content_filter"), else "incomplete".
func FinishOf(status string, incomplete *Incomplete) string {
	if status == "incomplete" && incomplete != nil && incomplete.Reason != "" {
		return incomplete.Reason
	}
	return status
}

// Usage returns the usage of the final response event; ok is false
// before one came with usage.
func (a *ResponsesAccumulator) Usage() (dialect.Usage, bool) {
	if a.usage == nil {
		return dialect.Usage{}, false
	}
	u := a.usage.Dialect()
	u.WebSearches, u.FileSearches = a.web, a.file
	u.Tier = a.tier
	return u, true
}

// Estimate returns an estimated usage: promptTokens in, the output
// characters of the deltas so far as tokens out (at least 1), and the
// built-in tool calls begun so far.
func (a *ResponsesAccumulator) Estimate(promptTokens int64) dialect.Usage {
	return dialect.Usage{Input: promptTokens, Output: max(dialect.EstimateTokens(a.chars), 1), WebSearches: a.web, FileSearches: a.file,
		Tier: a.tier}
}

// NextSequence returns the sequence_number an event appended to the
// stream takes: one past the last one seen, 0 before any.
func (a *ResponsesAccumulator) NextSequence() int64 {
	if !a.seqSeen {
		return 0
	}
	return a.seq + 1
}

// Answer returns the kept answer as a response's output array: the final
// response's (when it came, within dialect.KeepMax), or the items done so
// far and those begun, with what they had (a message's text, a function
// call's arguments) and status "incomplete"; a last message item says
// how many bytes were left out past dialect.KeepMax. nil without Keep or
// before any output.
func (a *ResponsesAccumulator) Answer() []byte {
	if !a.Keep {
		return nil
	}
	if len(a.final) > 0 && a.dropped == 0 {
		return a.final
	}
	items := slices.Clone(a.done)
	for _, o := range a.open {
		var b []byte
		switch o.typ {
		case "function_call":
			args := string(o.text)
			b, _ = json.Marshal(OutputItem{Type: "function_call", ID: o.id, Status: "incomplete", CallID: o.callID, Name: o.name, Arguments: &args})
		default:
			b, _ = json.Marshal(OutputItem{Type: "message", ID: o.id, Status: "incomplete", Role: "assistant",
				Content: []OutputPart{{Type: "output_text", Text: string(o.text), Annotations: []any{}}}})
		}
		items = append(items, b)
	}
	if a.dropped > 0 {
		b, _ := json.Marshal(OutputItem{Type: "message", Status: "incomplete", Role: "assistant",
			Content: []OutputPart{{Type: "output_text", Text: dialect.DroppedNote(a.dropped), Annotations: []any{}}}})
		items = append(items, b)
	}
	if len(items) == 0 {
		return nil
	}
	b, _ := json.Marshal(items)
	return b
}
