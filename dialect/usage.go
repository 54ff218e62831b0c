// Package dialect holds what the OpenAI and Anthropic wire dialects share:
// token usage in one shape, request-field errors, the stream accumulator
// interface and the token estimate used for budget reservations.
//
// The per-dialect shapes live in dialect/openai and dialect/anthropic; SSE
// framing lives in dialect/sse.
package dialect

import "cmp"

// Usage is the token usage of one model call in a dialect-neutral shape.
// All counts are tokens; the zero value means nothing was used.
//
// The fields do not overlap, so the cost of a call is
//
//	Input*inputPrice + CachedInput*cachedPrice + CacheWrite*cacheWritePrice + Output*outputPrice
//
// Mapping from the wire:
//   - OpenAI: Input = prompt_tokens − prompt_tokens_details.cached_tokens;
//     CachedInput = cached_tokens; CacheWrite = 0; Output = completion_tokens;
//     Reasoning = completion_tokens_details.reasoning_tokens.
//   - Anthropic: Input = input_tokens; CachedInput = cache_read_input_tokens;
//     CacheWrite = cache_creation_input_tokens; CacheWrite1h =
//     cache_creation.ephemeral_1h_input_tokens; Output = output_tokens;
//     Reasoning = 0 (Anthropic counts thinking inside output_tokens and does
//     not report it separately).
type Usage struct {
	// Input is prompt tokens read neither from nor into a cache.
	Input int64 `json:"input"`
	// Output is generated tokens, reasoning included.
	Output int64 `json:"output"`
	// CachedInput is prompt tokens read from the provider's prompt cache.
	CachedInput int64 `json:"cached_input,omitempty"`
	// CacheWrite is prompt tokens written into the provider's prompt cache.
	CacheWrite int64 `json:"cache_write,omitempty"`
	// CacheWrite1h is the part of CacheWrite written into a 1-hour cache
	// (Anthropic: cache_creation.ephemeral_1h_input_tokens), which is
	// billed above a 5-minute write; it is already counted in CacheWrite.
	CacheWrite1h int64 `json:"cache_write_1h,omitempty"`
	// Reasoning is the part of Output spent on hidden reasoning; it is
	// already counted in Output and must not be priced twice.
	Reasoning int64 `json:"reasoning,omitempty"`
	// WebSearches and FileSearches count the calls of the provider's
	// built-in web search and file search tools, which it bills per call
	// on top of their tokens (OpenAI's Responses API output items
	// web_search_call and file_search_call; Anthropic's
	// usage.server_tool_use.web_search_requests).
	WebSearches  int64 `json:"web_searches,omitempty"`
	FileSearches int64 `json:"file_searches,omitempty"`
	// Tier is the processing tier the answer says served the call, as
	// stated ("" when it states none): OpenAI's service_tier ("default",
	// "flex", "priority", "fast"), which decides the price
	// (openai.PriorityTier).
	Tier string `json:"tier,omitempty"`
}

// Empty reports whether u counts nothing: no token and no tool call (the
// tier alone is not usage).
func (u Usage) Empty() bool {
	u.Tier = ""
	return u == Usage{}
}

// Prompt returns all prompt tokens: Input + CachedInput + CacheWrite.
func (u Usage) Prompt() int64 { return u.Input + u.CachedInput + u.CacheWrite }

// Total returns all tokens: Prompt() + Output.
func (u Usage) Total() int64 { return u.Prompt() + u.Output }

// Add returns the field-wise sum of u and v, with u's Tier, else v's.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Input:        u.Input + v.Input,
		Output:       u.Output + v.Output,
		CachedInput:  u.CachedInput + v.CachedInput,
		CacheWrite:   u.CacheWrite + v.CacheWrite,
		CacheWrite1h: u.CacheWrite1h + v.CacheWrite1h,
		Reasoning:    u.Reasoning + v.Reasoning,
		WebSearches:  u.WebSearches + v.WebSearches,
		FileSearches: u.FileSearches + v.FileSearches,
		Tier:         cmp.Or(u.Tier, v.Tier),
	}
}

// CharsPerToken is the divisor of the token estimate: about four characters
// of English text per token, the rule of thumb both OpenAI and Anthropic
// give in their tokenizer documentation. It is an estimate, not a count.
const CharsPerToken = 4

// EstimateTokens returns ceil(chars/CharsPerToken), and 0 for chars <= 0.
// It is an estimate for budget reservations and for cut streams, never a
// substitute for the usage a provider reports.
func EstimateTokens(chars int64) int64 {
	if chars <= 0 {
		return 0
	}
	return (chars + CharsPerToken - 1) / CharsPerToken
}

// Accumulator folds the events of one streamed response, in order, into
// what belay needs after the stream ends: the usage the provider reported
// (if it did), the output characters seen (to estimate the usage of a cut
// stream), and whether the stream reached its terminator.
//
// An Accumulator is not safe for concurrent use.
type Accumulator interface {
	// Add takes the data payload of one SSE event (without the "data: "
	// prefix). It returns an error only for a payload that is not valid
	// JSON; an error event is recorded, not returned.
	Add(data []byte) error
	// Usage returns the usage the stream reported and whether it reported
	// any.
	Usage() (Usage, bool)
	// OutputChars returns the characters of generated text, tool names and
	// tool arguments seen so far.
	OutputChars() int64
	// Complete reports whether the stream's terminator was seen
	// (OpenAI "[DONE]", Anthropic message_stop).
	Complete() bool
	// Estimate returns the reported usage when there is one; otherwise
	// Input = promptTokens and Output = EstimateTokens(OutputChars()).
	Estimate(promptTokens int64) Usage
}

// Token estimates for non-text prompt parts (images, audio, documents). A
// budget reservation must not price them at 0; these are upper bounds taken
// from the providers' documentation, not counts.
const (
	// OpenAIImageTokens is a high-detail image on OpenAI: 85 base tokens +
	// 170 per 512-px tile, at most 8 tiles once the image is scaled into
	// 2048×2048 and its short side to 768 px, so 85 + 170×8 = 1445
	// (platform.openai.com/docs/guides/images-vision, "Calculating costs").
	OpenAIImageTokens = 1445
	// OpenAILowDetailImageTokens is an image sent with detail "low": 85.
	OpenAILowDetailImageTokens = 85
	// AnthropicImageTokens is an image on Anthropic: tokens ≈ width ×
	// height / 750, and images are scaled to at most about 1.15
	// megapixels, so about 1600 tokens at most
	// (docs.claude.com/en/docs/build-with-claude/vision, "Evaluate image size").
	AnthropicImageTokens = 1600
	// DocumentPageTokens is one page of a PDF document: Anthropic counts
	// 1,500–3,000 tokens per page (text plus the page's image;
	// docs.claude.com/en/docs/build-with-claude/pdf-support); the top of
	// that range is used for both dialects.
	DocumentPageTokens = 3000
	// DocumentBytesPerPage is the file size counted as one page when the
	// page count is unknown: 50 kB.
	DocumentBytesPerPage = 50_000
	// AudioTokensPerSecond is OpenAI's audio input rate: one token per
	// 100 ms of audio.
	AudioTokensPerSecond = 10
	// AudioBytesPerSecond is the data rate used to turn an audio clip's
	// size into a duration: 32 kbit/s, a low speech bitrate, so the
	// duration (and the estimate) is long rather than short for WAV and
	// common MP3 rates.
	AudioBytesPerSecond = 4000
)

// base64Bytes returns the decoded size of n characters of base64.
func base64Bytes(n int64) int64 { return max(n, 0) * 3 / 4 }

// EstimateDocumentTokens estimates a document part (a PDF) from the length
// of its base64 data: DocumentPageTokens per DocumentBytesPerPage of file,
// at least one page. Data of unknown size (a file id, a URL) passes 0 and
// is counted as one page.
func EstimateDocumentTokens(base64Chars int64) int64 {
	pages := (base64Bytes(base64Chars) + DocumentBytesPerPage - 1) / DocumentBytesPerPage
	return max(pages, 1) * DocumentPageTokens
}

// EstimateAudioTokens estimates an audio part from the length of its base64
// data: AudioTokensPerSecond over a duration taken at AudioBytesPerSecond,
// at least one token.
func EstimateAudioTokens(base64Chars int64) int64 {
	return max(base64Bytes(base64Chars)*AudioTokensPerSecond/AudioBytesPerSecond, 1)
}
