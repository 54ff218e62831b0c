package failure

import (
	"encoding/json"
)

// StreamUsage is the token usage a response or stream reports, as the
// provider counts it (all values in tokens):
//
//	field              OpenAI (Chat / Responses)                    Anthropic                      Gemini
//	InputTokens        prompt_tokens / input_tokens (incl. cached)   input_tokens (excl. cache)     promptTokenCount
//	OutputTokens       completion_tokens / output_tokens             output_tokens                  candidatesTokenCount
//	                   (incl. reasoning)                                                            (excl. thoughts)
//	CachedInputTokens  *_tokens_details.cached_tokens                cache_read_input_tokens        cachedContentTokenCount
//	CacheWriteTokens   —                                             cache_creation_input_tokens    —
//	ReasoningTokens    *_tokens_details.reasoning_tokens             —                              thoughtsTokenCount
//
// Sources: OpenAI Chat Completions and Responses API references (usage
// object); Anthropic Messages API and streaming pages; Gemini API
// UsageMetadata reference. Pricing code must mind the differences in what
// InputTokens and OutputTokens include.
type StreamUsage struct {
	InputTokens       int64
	OutputTokens      int64
	CachedInputTokens int64
	CacheWriteTokens  int64
	ReasoningTokens   int64
}

// wireUsage holds every provider's usage fields; absent fields stay nil.
type wireUsage struct {
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheCreation    *int64 `json:"cache_creation_input_tokens"`
	CacheRead        *int64 `json:"cache_read_input_tokens"`
	PromptDetails    *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	CompletionDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	OutputDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`

	PromptTokenCount        *int64 `json:"promptTokenCount"`
	CandidatesTokenCount    *int64 `json:"candidatesTokenCount"`
	CachedContentTokenCount *int64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      *int64 `json:"thoughtsTokenCount"`
}

// merge overwrites u's fields with those raw reports (providers report
// running totals: Anthropic's message_delta and Gemini's usageMetadata repeat
// the counts so far). It returns whether raw held any usage field.
func (u *StreamUsage) merge(raw json.RawMessage) bool {
	if isNull(raw) {
		return false
	}
	var w wireUsage
	if json.Unmarshal(raw, &w) != nil {
		return false
	}
	seen := false
	set := func(dst *int64, srcs ...*int64) {
		for _, s := range srcs {
			if s != nil {
				*dst, seen = *s, true
				return
			}
		}
	}
	set(&u.InputTokens, w.PromptTokens, w.InputTokens, w.PromptTokenCount)
	set(&u.OutputTokens, w.CompletionTokens, w.OutputTokens, w.CandidatesTokenCount)
	set(&u.CacheWriteTokens, w.CacheCreation)
	set(&u.CachedInputTokens, w.CacheRead, w.CachedContentTokenCount)
	if w.PromptDetails != nil {
		set(&u.CachedInputTokens, w.PromptDetails.CachedTokens)
	}
	if w.InputDetails != nil {
		set(&u.CachedInputTokens, w.InputDetails.CachedTokens)
	}
	set(&u.ReasoningTokens, w.ThoughtsTokenCount)
	if w.CompletionDetails != nil {
		set(&u.ReasoningTokens, w.CompletionDetails.ReasoningTokens)
	}
	if w.OutputDetails != nil {
		set(&u.ReasoningTokens, w.OutputDetails.ReasoningTokens)
	}
	return seen
}

// ParseUsage returns the usage in a complete (non-streaming) response body:
// the top-level "usage" object (OpenAI Chat and Responses, Anthropic) or
// "usageMetadata" (Gemini). ok is false when the body reports none. Every
// provider's shape is read, so no dialect is needed.
func ParseUsage(body []byte) (u StreamUsage, ok bool) {
	top := topLevelObject(body)
	if top == nil {
		return u, false
	}
	ok = u.merge(top["usage"])
	if u.merge(top["usageMetadata"]) {
		ok = true
	}
	return u, ok
}
