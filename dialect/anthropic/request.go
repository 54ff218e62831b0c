// Package anthropic holds the Anthropic Messages API wire shapes belay reads
// and writes (https://docs.claude.com/en/api/messages): the request fields
// belay needs, responses, stream events, usage, tool use and errors.
//
// Requests are decoded into the fields belay needs while the raw body is
// kept, so a gateway forwards the client's bytes unchanged except the model
// (see RewriteModel). Types here are plain data and safe to share once built.
package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/belay-run/belay/dialect"
)

// Path is the Messages endpoint path.
const Path = "/v1/messages"

// Request is a Messages request, reduced to what belay reads. Raw holds the
// body as received, unknown fields included.
type Request struct {
	Model      string          `json:"model"`
	Messages   []Message       `json:"messages"`
	System     json.RawMessage `json:"system,omitempty"` // a string or text blocks
	Tools      []Tool          `json:"tools,omitempty"`
	ToolChoice json.RawMessage `json:"tool_choice,omitempty"`
	Stream     bool            `json:"stream,omitempty"`
	MaxTokens  *int64          `json:"max_tokens,omitempty"`
	// CacheControl is the request's own breakpoint (automatic caching);
	// see CacheWrites.
	CacheControl *CacheControl `json:"cache_control,omitempty"`

	// Options belay does not read, declared so that a value of the wrong
	// type is refused with a 400 naming the field, as Anthropic refuses
	// it, before any upstream call.
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"top_p,omitempty"`
	TopK          *int64   `json:"top_k,omitempty"`
	StopSequences []string `json:"stop_sequences,omitempty"`

	Raw json.RawMessage `json:"-"`
}

// Message is one message; Content is a string or an array of content blocks.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ContentBlock is one content block of a message or response. Which fields
// are set depends on Type: "text" (Text), "tool_use" (ID, Name, Input),
// "tool_result" (ToolUseID, Content, IsError), "thinking" (Thinking,
// Signature); other types keep only Type.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	// Source is an image or document block's source:
	// {"type":"base64","media_type","data"}, {"type":"url","url"},
	// {"type":"text","data"} (documents) or {"type":"file","file_id"}.
	Source *Source `json:"source,omitempty"`
}

// Source is the source of an image or document block.
type Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
	FileID    string `json:"file_id,omitempty"`
}

// Blocks returns the message's content as blocks; a string content is one
// text block. Content that is neither yields nil.
func (m Message) Blocks() []ContentBlock { return blocks(m.Content) }

func blocks(raw json.RawMessage) []ContentBlock {
	c := bytes.TrimSpace(raw)
	if len(c) == 0 {
		return nil
	}
	if c[0] == '"' {
		var s string
		_ = json.Unmarshal(c, &s)
		return []ContentBlock{{Type: "text", Text: s}}
	}
	var bs []ContentBlock
	_ = json.Unmarshal(c, &bs)
	return bs
}

// Text returns the text of the message's text blocks joined by "\n".
func (m Message) Text() string { return joinText(m.Blocks()) }

// ResultText returns the text of a tool_result block's content (a string or
// text blocks).
func (b ContentBlock) ResultText() string { return joinText(blocks(b.Content)) }

func joinText(bs []ContentBlock) string {
	var b bytes.Buffer
	for _, x := range bs {
		if x.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(x.Text)
		}
	}
	return b.String()
}

// SystemText returns the system prompt's text.
func (r *Request) SystemText() string { return joinText(blocks(r.System)) }

// TextContent returns a string content value for Message.Content.
func TextContent(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// Tool is one entry of the request's tools. Client tools have Name and
// InputSchema; server tools (web search, ...) have a Type.
type Tool struct {
	Type        string          `json:"type,omitempty"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// MaxUses bounds the uses of a server tool (web_search) in one
	// response.
	MaxUses *int64 `json:"max_uses,omitempty"`
	// CacheControl marks the tool definitions up to this one for the cache.
	CacheControl *CacheControl `json:"cache_control,omitempty"`
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

// Validate checks what belay relies on and what the Messages API requires
// of every request: model, max_tokens >= 1, a non-empty messages array with
// roles user or assistant and content present, a string or an array of
// typed blocks (as is system; see dialect.CheckContent), and named tools.
// It returns a *dialect.FieldError for the first problem ("messages.1.role"
// style paths as Anthropic writes them). It does not check what only the
// provider can. The raw members it reads (contents, system) must be valid
// JSON, as ParseRequest's decoding leaves them.
func (r *Request) Validate() error {
	if r.Model == "" {
		return dialect.Field("model", "is required")
	}
	if r.MaxTokens == nil {
		return dialect.Field("max_tokens", "is required")
	}
	if *r.MaxTokens < 1 {
		return dialect.Field("max_tokens", "must be at least 1")
	}
	if len(r.Messages) == 0 {
		return dialect.Field("messages", "must be a non-empty array")
	}
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return dialect.Field(fmt.Sprintf("messages.%d.role", i), "must be \"user\" or \"assistant\"; got %q", m.Role)
		}
		if c := bytes.TrimSpace(m.Content); len(c) == 0 || string(c) == "null" {
			return dialect.Field(fmt.Sprintf("messages.%d.content", i), "is required")
		}
		if fe := dialect.CheckContent(m.Content, ".%d", false); fe != nil {
			fe.Field = fmt.Sprintf("messages.%d.content", i) + fe.Field
			return fe
		}
	}
	if fe := dialect.CheckContent(r.System, ".%d", true); fe != nil {
		fe.Field = "system" + fe.Field
		return fe
	}
	for i, t := range r.Tools {
		if t.Name == "" {
			return dialect.Field(fmt.Sprintf("tools.%d.name", i), "is required")
		}
	}
	return nil
}

// RewriteModel returns body with only its top-level model value replaced;
// see dialect.RewriteModel.
func RewriteModel(body []byte, model string) ([]byte, error) {
	return dialect.RewriteModel(body, model)
}

// MaxOutputTokens returns max_tokens; ok is false when it is not set (the
// request is then invalid).
func MaxOutputTokens(r *Request) (n int64, ok bool) {
	if r.MaxTokens == nil {
		return 0, false
	}
	return *r.MaxTokens, true
}

// WebSearches returns how many web searches the response to r may make,
// for its reservation: the max_uses of each web search server tool it
// declares (type web_search_YYYYMMDD), one for a tool without it (the API
// then sets no bound, and a response may search more).
func WebSearches(r *Request) int64 {
	var n int64
	for _, t := range r.Tools {
		if strings.HasPrefix(t.Type, "web_search_") {
			uses := int64(1)
			if t.MaxUses != nil && *t.MaxUses > 0 {
				uses = *t.MaxUses
			}
			if n > math.MaxInt64-uses {
				return math.MaxInt64
			}
			n += uses
		}
	}
	return n
}
