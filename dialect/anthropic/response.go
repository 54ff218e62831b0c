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
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	ServiceTier              string `json:"service_tier,omitempty"`
}

// Dialect converts u to the dialect-neutral shape.
func (u Usage) Dialect() dialect.Usage {
	return dialect.Usage{
		Input:       u.InputTokens,
		Output:      u.OutputTokens,
		CachedInput: u.CacheReadInputTokens,
		CacheWrite:  u.CacheCreationInputTokens,
	}
}

// FromDialect returns the Anthropic usage for d.
func FromDialect(d dialect.Usage) Usage {
	return Usage{
		InputTokens:              d.Input,
		OutputTokens:             d.Output,
		CacheCreationInputTokens: d.CacheWrite,
		CacheReadInputTokens:     d.CachedInput,
		ServiceTier:              "standard",
	}
}
