package openai

import (
	"github.com/belay-run/belay/dialect"
)

// Completion is a non-streamed chat.completion response.
type Completion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"` // "chat.completion"
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []Choice `json:"choices"`
	Usage             *Usage   `json:"usage,omitempty"`
	SystemFingerprint string   `json:"system_fingerprint,omitempty"`
	ServiceTier       string   `json:"service_tier,omitempty"`
	// Error is set when an OpenAI-compatible router answers HTTP 200 with an
	// error object instead of choices.
	Error *ErrorObject `json:"error,omitempty"`
}

// Choice is one completion choice. FinishReason is "stop", "length",
// "tool_calls", "content_filter" or "function_call".
type Choice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	Logprobs     any             `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

// ResponseMessage is the assistant message of a choice. Content is nil when
// the message has only tool calls.
type ResponseMessage struct {
	Role        string     `json:"role"`
	Content     *string    `json:"content"`
	Refusal     *string    `json:"refusal"`
	ToolCalls   []ToolCall `json:"tool_calls,omitempty"`
	Annotations []any      `json:"annotations"`
}

// Usage is OpenAI's usage object. prompt_tokens includes cached tokens;
// completion_tokens includes reasoning tokens.
type Usage struct {
	PromptTokens            int64                    `json:"prompt_tokens"`
	CompletionTokens        int64                    `json:"completion_tokens"`
	TotalTokens             int64                    `json:"total_tokens"`
	PromptTokensDetails     *PromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails breaks down prompt_tokens.
type PromptTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
	AudioTokens  int64 `json:"audio_tokens"`
}

// CompletionTokensDetails breaks down completion_tokens.
type CompletionTokensDetails struct {
	ReasoningTokens          int64 `json:"reasoning_tokens"`
	AudioTokens              int64 `json:"audio_tokens"`
	AcceptedPredictionTokens int64 `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int64 `json:"rejected_prediction_tokens"`
}

// Dialect converts u to the dialect-neutral shape (see dialect.Usage for
// the mapping: Input excludes cached tokens).
func (u Usage) Dialect() dialect.Usage {
	var d dialect.Usage
	d.Output = u.CompletionTokens
	d.Input = u.PromptTokens
	if u.PromptTokensDetails != nil {
		d.CachedInput = u.PromptTokensDetails.CachedTokens
		d.Input -= d.CachedInput
	}
	if u.CompletionTokensDetails != nil {
		d.Reasoning = u.CompletionTokensDetails.ReasoningTokens
	}
	return d
}

// FromDialect returns the OpenAI usage for d, with both detail objects
// present (as OpenAI sends them) and total_tokens filled in.
func FromDialect(d dialect.Usage) Usage {
	prompt := d.Prompt()
	return Usage{
		PromptTokens:            prompt,
		CompletionTokens:        d.Output,
		TotalTokens:             prompt + d.Output,
		PromptTokensDetails:     &PromptTokensDetails{CachedTokens: d.CachedInput},
		CompletionTokensDetails: &CompletionTokensDetails{ReasoningTokens: d.Reasoning},
	}
}
