// Package openai holds the OpenAI Chat Completions wire shapes belay reads
// and writes (https://platform.openai.com/docs/api-reference/chat): the
// request fields belay needs, responses, stream chunks, usage, tool calls
// and errors.
//
// Requests are decoded into the fields belay needs while the raw body is
// kept, so a gateway forwards the client's bytes unchanged except the model
// (see RewriteModel). Types here are plain data and safe to share once built.
package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/belay-run/belay/dialect"
)

// Path is the Chat Completions endpoint path.
const Path = "/v1/chat/completions"

// Request is a Chat Completions request, reduced to what belay reads. Raw
// holds the body as received, unknown fields included.
type Request struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	MaxTokens           *int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens,omitempty"`
	// N is the number of choices to generate (default 1; OpenAI's API
	// reference allows 1 to 128). Each choice is generated, and billed, up
	// to the output limit.
	N *int64 `json:"n,omitempty"`

	// Options belay does not read, declared so that a value of the wrong
	// type is refused with a 400 naming the field, as OpenAI refuses it,
	// before any upstream call. Stop is a string, an array of strings or
	// null.
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	PresencePenalty   *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty,omitempty"`
	Seed              *int64          `json:"seed,omitempty"`
	Logprobs          *bool           `json:"logprobs,omitempty"`
	TopLogprobs       *int64          `json:"top_logprobs,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	User              *string         `json:"user,omitempty"`
	Stop              json.RawMessage `json:"stop,omitempty"`
	// ServiceTier is the processing tier asked for ("auto", "default",
	// "flex", "priority"), as sent: its price differs by tier.
	ServiceTier json.RawMessage `json:"service_tier,omitempty"`

	Raw json.RawMessage `json:"-"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// Message is one chat message. Content is a string, an array of content
// parts, or null (an assistant message with only tool calls); use Text.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Refusal    string          `json:"refusal,omitempty"`
}

// ContentPart is one element of an array content: "text" (Text),
// "image_url" (ImageURL), "input_audio" (InputAudio) or "file" (File).
type ContentPart struct {
	Type       string      `json:"type"`
	Text       string      `json:"text,omitempty"`
	ImageURL   *ImageURL   `json:"image_url,omitempty"`
	InputAudio *InputAudio `json:"input_audio,omitempty"`
	File       *FilePart   `json:"file,omitempty"`
}

// ImageURL is an image part's image: a URL or a data: URL; Detail is
// "low", "high" or "auto".
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// InputAudio is an audio part: base64 Data in Format ("wav", "mp3").
type InputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format,omitempty"`
}

// FilePart is a file part: inline base64 FileData (a data: URL) or an
// uploaded file's FileID.
type FilePart struct {
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// parts returns an array content's parts; nil for a string or null content.
func (m Message) parts() []ContentPart {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || c[0] != '[' {
		return nil
	}
	var parts []ContentPart
	_ = json.Unmarshal(c, &parts)
	return parts
}

// Text returns the message's text: the content string, or the text parts
// joined by "\n". Non-text parts (images, audio) contribute nothing.
func (m Message) Text() string {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || c[0] == 'n' {
		return ""
	}
	if c[0] == '"' {
		return unquote(c)
	}
	var b bytes.Buffer
	for _, p := range m.parts() {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// unquote returns the JSON string c decoded, "" when it is not one. A
// string without escapes, quotes, control characters or invalid UTF-8
// between its quotes decodes to those bytes and is copied without going
// through json.Unmarshal.
func unquote(c []byte) string {
	if len(c) >= 2 && c[len(c)-1] == '"' {
		raw := c[1 : len(c)-1]
		plain := utf8.Valid(raw)
		for _, b := range raw {
			if b < 0x20 || b == '"' || b == '\\' {
				plain = false
				break
			}
		}
		if plain {
			return string(raw)
		}
	}
	var s string
	_ = json.Unmarshal(c, &s)
	return s
}

// TextContent returns a string content value for m.Content.
func TextContent(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// Tool is one entry of the request's tools.
type Tool struct {
	Type     string       `json:"type"`
	Function FunctionDecl `json:"function"`
}

// FunctionDecl declares a function tool; Parameters is its JSON Schema.
type FunctionDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is a function call made by the assistant. Arguments is a JSON
// text inside a string, as on the wire; it may be invalid JSON.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function name and arguments.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ParseRequest decodes body into a Request, keeps body in Raw, and
// validates it. Errors are *dialect.FieldError naming the field (matching
// errors.Is(err, failure.InvalidRequest)).
func ParseRequest(body []byte) (*Request, error) {
	var r Request
	if err := dialect.DecodeObject(body, &r); err != nil {
		return nil, err
	}
	r.Raw = body
	if err := dialect.CaseMismatch(body, requestFields); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// requestFields are the members Request decodes, for dialect.CaseMismatch.
var requestFields = dialect.FieldsOf(reflect.TypeFor[Request]())

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// Validate checks what belay relies on: a model, a non-empty messages array
// whose roles are known and whose contents are strings or arrays of typed
// parts (null only for an assistant or a function message, as OpenAI's
// API reference allows; see dialect.CheckContent), tool messages with a
// tool_call_id, function tools with names, positive token limits, n in
// range and stop a string or an array of strings. It returns a
// *dialect.FieldError for the first problem, naming the field as OpenAI
// does ("messages[1].role"). It does not check what only the provider can
// (model names, context size). The raw members it reads (contents, stop)
// must be valid JSON, as ParseRequest's decoding leaves them.
func (r *Request) Validate() error {
	if r.Model == "" {
		return dialect.Field("model", "is required")
	}
	if len(r.Messages) == 0 {
		return dialect.Field("messages", "must be a non-empty array")
	}
	for i, m := range r.Messages {
		switch {
		case m.Role == "":
			return dialect.Field(fmt.Sprintf("messages[%d].role", i), "is required")
		case !roles[m.Role]:
			return dialect.Field(fmt.Sprintf("messages[%d].role", i), "must be one of system, developer, user, assistant, tool, function; got %q", m.Role)
		case m.Role == "tool" && m.ToolCallID == "":
			return dialect.Field(fmt.Sprintf("messages[%d].tool_call_id", i), "is required for a tool message")
		}
		if fe := dialect.CheckContent(m.Content, "[%d]", m.Role == "assistant" || m.Role == "function"); fe != nil {
			fe.Field = fmt.Sprintf("messages[%d].content", i) + fe.Field
			return fe
		}
	}
	if err := checkStop(r.Stop); err != nil {
		return err
	}
	for i, t := range r.Tools {
		if t.Type == "function" && t.Function.Name == "" {
			return dialect.Field(fmt.Sprintf("tools[%d].function.name", i), "is required")
		}
	}
	if r.MaxTokens != nil && *r.MaxTokens < 1 {
		return dialect.Field("max_tokens", "must be at least 1")
	}
	if r.MaxCompletionTokens != nil && *r.MaxCompletionTokens < 1 {
		return dialect.Field("max_completion_tokens", "must be at least 1")
	}
	if r.N != nil && (*r.N < 1 || *r.N > MaxChoices) {
		return dialect.Field("n", "must be between 1 and %d; got %d", MaxChoices, *r.N)
	}
	return nil
}

// checkStop checks stop: absent, null, a string or an array of strings
// (null elements are let through, as encoding/json decodes them into a
// []string). stop is valid JSON: ParseRequest decoded it.
func checkStop(stop json.RawMessage) error {
	s := bytes.TrimSpace(stop)
	if len(s) == 0 || s[0] == '"' || s[0] == 'n' {
		return nil
	}
	ok := s[0] == '['
	if ok {
		_ = dialect.EachElementOfValid(s, func(v []byte) { ok = ok && (v[0] == '"' || v[0] == 'n') })
	}
	if !ok {
		return dialect.Field("stop", "must be a string or an array of strings")
	}
	return nil
}

// MaxChoices is the largest n (choices per request) OpenAI's Chat
// Completions API accepts.
const MaxChoices = 128

// Choices returns the number of choices the request asks for: n, or 1.
func (r *Request) Choices() int64 {
	if r.N != nil {
		return *r.N
	}
	return 1
}

// IncludeUsage reports whether a streamed response should end with a usage
// chunk (stream_options.include_usage).
func (r *Request) IncludeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// RewriteModel returns body with only its top-level model value replaced;
// see dialect.RewriteModel.
func RewriteModel(body []byte, model string) ([]byte, error) {
	return dialect.RewriteModel(body, model)
}

// MaxOutputTokens returns the request's output limit: max_completion_tokens
// when set, else the deprecated max_tokens; ok is false when neither is set.
func MaxOutputTokens(r *Request) (n int64, ok bool) {
	if r.MaxCompletionTokens != nil {
		return *r.MaxCompletionTokens, true
	}
	if r.MaxTokens != nil {
		return *r.MaxTokens, true
	}
	return 0, false
}
