package openai

import (
	"strings"
	"testing"
)

// A server that sends reasoning as an object (Envoy AI Gateway relays
// Bedrock's so, {"reasoning_content":{"text":"..."}},
// envoyproxy/ai-gateway#1222) does not fail the chunk's decoding: its
// content, tool calls, finish reason and usage are all read (they were
// dropped while Delta's reasoning members were *string).
func TestAdv22r_NonStringReasoningDoesNotDropTheChunk(t *testing.T) {
	var a Accumulator
	content := strings.Repeat("a", 4000)
	chunk := `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + content +
		`","reasoning_content":{"text":"hmm"}},"finish_reason":"stop"}]}`
	_ = a.Add([]byte(chunk))
	if got := a.OutputChars(); got < int64(len(content)) {
		t.Errorf("a chunk with 4,000 characters of content and an object reasoning_content: %d output characters counted; want at least 4,000", got)
	}
	if !a.Finished() {
		t.Errorf("the chunk's finish_reason was dropped")
	}
	_ = a.Add([]byte(`{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"reasoning":{"text":""}}}],` +
		`"usage":{"prompt_tokens":10,"completion_tokens":2000,"total_tokens":2010}}`))
	if u, ok := a.Usage(); !ok || u.Output != 2000 {
		t.Errorf("a usage chunk whose delta has an object reasoning: Usage() = %+v, %v; want the reported 2,000 output tokens", u, ok)
	}
}

// The same reasoning under both names (servers in the reasoning_content
// → reasoning rename window send both, byte-identical) is counted once.
func TestAdv22r_ReasoningUnderBothNamesCountedOnce(t *testing.T) {
	var a Accumulator
	r := strings.Repeat("r", 1000)
	_ = a.Add([]byte(`{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"` + r + `","reasoning":"` + r + `"}}]}`))
	if got := a.OutputChars(); got != 1000 {
		t.Errorf("1,000 characters of reasoning sent under both names counted as %d; want 1,000", got)
	}
}
