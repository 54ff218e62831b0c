package budget

// Usage is the token usage of one model call, in belay's normalised shape.
// All counts are tokens; the zero value means nothing was used.
//
// The totals include their parts, as OpenAI reports them and as the
// OpenTelemetry GenAI conventions define gen_ai.usage.input_tokens:
//
//   - InputTokens is every prompt token: uncached, read from the cache
//     (CachedInputTokens) and written into it (CacheWriteTokens).
//   - OutputTokens is every generated token, ReasoningTokens included.
//
// Use UsageFromOpenAI and UsageFromAnthropic to build one from a provider's
// usage object: Anthropic's input_tokens excludes cache reads and writes, so
// it must be normalised before pricing.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int64 `json:"cache_write_tokens,omitempty"`
	// CacheWrite1hTokens is the part of CacheWriteTokens written into a
	// 1-hour cache (Anthropic's usage.cache_creation.ephemeral_1h_input_tokens),
	// which costs more than a 5-minute write (Price.CacheWrite1h).
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
	ReasoningTokens    int64 `json:"reasoning_tokens,omitempty"`
	// WebSearchCalls and FileSearchCalls count the calls of a provider's
	// built-in tools that it bills per call on top of their tokens
	// (Price.WebSearchCall, Price.FileSearchCall): OpenAI's Responses API
	// output items of type web_search_call and file_search_call,
	// Anthropic's usage.server_tool_use.web_search_requests.
	WebSearchCalls  int64 `json:"web_search_calls,omitempty"`
	FileSearchCalls int64 `json:"file_search_calls,omitempty"`
	// Priority is true for a call the provider served with priority
	// processing, billed at Price.Priority (OpenAI's service_tier
	// "priority" or "fast" in the answer, or asked for in the request).
	Priority bool `json:"priority,omitempty"`
}

// Empty reports whether u counts nothing: no token and no tool call (the
// tier alone is not usage).
func (u Usage) Empty() bool {
	u.Priority = false
	return u == Usage{}
}

// UsageFromOpenAI normalises an OpenAI usage object (Chat Completions
// usage.prompt_tokens, usage.completion_tokens,
// prompt_tokens_details.cached_tokens,
// completion_tokens_details.reasoning_tokens; the Responses API's
// input_tokens/output_tokens have the same meaning). OpenAI's prompt tokens
// already include the cached ones and its completion tokens already include
// the reasoning ones, so the values are taken as they are. Source: OpenAI API
// reference, "The chat completion object" (usage) and the prompt caching
// guide.
func UsageFromOpenAI(promptTokens, completionTokens, cachedTokens, reasoningTokens int64) Usage {
	return Usage{
		InputTokens:       promptTokens,
		OutputTokens:      completionTokens,
		CachedInputTokens: cachedTokens,
		ReasoningTokens:   reasoningTokens,
	}
}

// UsageFromAnthropic normalises an Anthropic Messages usage object
// (input_tokens, output_tokens, cache_read_input_tokens,
// cache_creation_input_tokens). Anthropic's input_tokens counts only the
// tokens after the last cache breakpoint, excluding cache reads and writes
// (Anthropic docs, "Prompt caching": total input = input_tokens +
// cache_creation_input_tokens + cache_read_input_tokens), so they are added
// here. Anthropic reports thinking inside output_tokens without a separate
// count, so ReasoningTokens is 0.
func UsageFromAnthropic(inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens int64) Usage {
	return Usage{
		InputTokens:       inputTokens + cacheReadTokens + cacheWriteTokens,
		OutputTokens:      outputTokens,
		CachedInputTokens: cacheReadTokens,
		CacheWriteTokens:  cacheWriteTokens,
	}
}

// UsageFromGemini normalises a Gemini usageMetadata object
// (promptTokenCount, candidatesTokenCount, cachedContentTokenCount,
// thoughtsTokenCount). promptTokenCount includes the cached tokens;
// thoughtsTokenCount is reported beside candidatesTokenCount, not inside it,
// and is billed as output (ai.google.dev/gemini-api/docs/pricing: "output
// price including thinking tokens"), so it is added to OutputTokens.
func UsageFromGemini(promptTokens, candidatesTokens, cachedTokens, thoughtsTokens int64) Usage {
	return Usage{
		InputTokens:       promptTokens,
		OutputTokens:      candidatesTokens + thoughtsTokens,
		CachedInputTokens: cachedTokens,
		ReasoningTokens:   thoughtsTokens,
	}
}

// UncachedInputTokens returns InputTokens − CachedInputTokens −
// CacheWriteTokens, never below 0 (a provider that reports parts larger than
// the total is trusted for the parts).
func (u Usage) UncachedInputTokens() int64 {
	return max(u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens, 0)
}

// TotalTokens returns InputTokens + OutputTokens.
func (u Usage) TotalTokens() int64 { return u.InputTokens + u.OutputTokens }

// Add returns the field-wise sum of u and v; Priority is set when either
// has it.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:        u.InputTokens + v.InputTokens,
		OutputTokens:       u.OutputTokens + v.OutputTokens,
		CachedInputTokens:  u.CachedInputTokens + v.CachedInputTokens,
		CacheWriteTokens:   u.CacheWriteTokens + v.CacheWriteTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens + v.CacheWrite1hTokens,
		ReasoningTokens:    u.ReasoningTokens + v.ReasoningTokens,
		WebSearchCalls:     u.WebSearchCalls + v.WebSearchCalls,
		FileSearchCalls:    u.FileSearchCalls + v.FileSearchCalls,
		Priority:           u.Priority || v.Priority,
	}
}
