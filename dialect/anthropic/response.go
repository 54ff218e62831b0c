package anthropic

import (
	"encoding/json"

	"github.com/belay-run/belay/dialect"
)

// Response is a non-streamed Messages response ("type": "message").
// StopReason is "end_turn", "max_tokens", "stop_sequence", "tool_use",
// "pause_turn" or "refusal".
type Response struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"` // "message"
	Role         string          `json:"role"` // "assistant"
	Model        string          `json:"model"`
	Content      []ContentBlock  `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        Usage           `json:"usage"`
	Container    json.RawMessage `json:"container,omitempty"`
}

// Usage is Anthropic's usage object. input_tokens excludes cache reads and
// cache writes, which are reported separately.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	// CacheCreation splits cache_creation_input_tokens by the cache's
	// lifetime (absent from older API versions and other servers).
	CacheCreation *CacheCreation `json:"cache_creation,omitempty"`
	// ServerToolUse counts the calls of Anthropic's server tools (absent
	// when none ran).
	ServerToolUse *ServerToolUse `json:"server_tool_use,omitempty"`
	ServiceTier   string         `json:"service_tier,omitempty"`
}

// ServerToolUse is usage.server_tool_use: the web searches of the
// web_search tool, billed per search on top of tokens (Anthropic docs,
// "Web search tool", usage and pricing). Its web fetches have no fee and
// are not read.
type ServerToolUse struct {
	WebSearchRequests int64 `json:"web_search_requests"`
}

// isWebSearch reports whether a content block of type typ named name is a
// web search the web_search server tool ran (a server_tool_use block).
func isWebSearch(typ, name string) bool { return typ == "server_tool_use" && name == "web_search" }

// ContentWebSearches counts the web searches of a message body's content
// (its server_tool_use blocks named web_search), for an answer without
// usage; 0 when its content does not decode.
func ContentWebSearches(body []byte) int64 {
	var content []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if dialect.DecodeMember(body, "content", &content) != nil {
		return 0
	}
	var n int64
	for _, b := range content {
		if isWebSearch(b.Type, b.Name) {
			n++
		}
	}
	return n
}

// CacheCreation is usage.cache_creation: the prompt tokens written into a
// 5-minute and a 1-hour cache (their sum is cache_creation_input_tokens).
// A 1-hour write costs 2× base input, a 5-minute one 1.25× (Anthropic docs,
// "Prompt caching").
type CacheCreation struct {
	Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
}

// Dialect converts u to the dialect-neutral shape.
func (u Usage) Dialect() dialect.Usage {
	return dialect.Usage{
		Input:        u.InputTokens,
		Output:       u.OutputTokens,
		CachedInput:  u.CacheReadInputTokens,
		CacheWrite:   u.CacheCreationInputTokens,
		CacheWrite1h: u.cacheWrite1h(),
		WebSearches:  u.webSearches(),
	}
}

// webSearches is server_tool_use.web_search_requests, 0 when absent.
func (u Usage) webSearches() int64 {
	if u.ServerToolUse == nil {
		return 0
	}
	return u.ServerToolUse.WebSearchRequests
}

// cacheWrite1h is the 1-hour part of the cache writes.
func (u Usage) cacheWrite1h() int64 {
	if u.CacheCreation == nil {
		return 0
	}
	return u.CacheCreation.Ephemeral1hInputTokens
}

// FromDialect returns the Anthropic usage for d.
func FromDialect(d dialect.Usage) Usage {
	return Usage{
		InputTokens:              d.Input,
		OutputTokens:             d.Output,
		CacheCreationInputTokens: d.CacheWrite,
		CacheReadInputTokens:     d.CachedInput,
		CacheCreation:            cacheCreation(d),
		ServerToolUse:            serverToolUse(d),
		ServiceTier:              "standard",
	}
}

// serverToolUse is the server_tool_use object of d's web searches: nil
// when it has none.
func serverToolUse(d dialect.Usage) *ServerToolUse {
	if d.WebSearches == 0 {
		return nil
	}
	return &ServerToolUse{WebSearchRequests: d.WebSearches}
}

// cacheCreation is the cache_creation object of d's cache writes: nil
// when d has none in a 1-hour cache (then all of them are 5-minute ones,
// as cache_creation_input_tokens alone says).
func cacheCreation(d dialect.Usage) *CacheCreation {
	if d.CacheWrite1h == 0 {
		return nil
	}
	return &CacheCreation{Ephemeral5mInputTokens: max(d.CacheWrite-d.CacheWrite1h, 0), Ephemeral1hInputTokens: d.CacheWrite1h}
}
