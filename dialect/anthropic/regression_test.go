package anthropic_test

import (
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
)

// Finding 3: image and document blocks (also inside tool results) cost
// tokens; the reservation's prompt estimate counted them as 0.
func TestRegression_3_PromptEstimateCountsNonTextBlocks(t *testing.T) {
	base := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"abcd"}%s]}]}`
	estimate := func(extra string) int64 {
		t.Helper()
		r, err := anthropic.ParseRequest([]byte(strings.Replace(base, "%s", extra, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return anthropic.EstimatePromptTokens(r)
	}
	text := estimate("") // 1 token of text + 3 per message
	if text != 4 {
		t.Fatalf("text only = %d, want 4", text)
	}
	pdf := strings.Repeat("A", 140_000) // 105 000 bytes: 3 pages
	for _, tc := range []struct {
		name, block string
		want        int64
	}{
		{"image", `,{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}`, dialect.AnthropicImageTokens},
		{"image by url", `,{"type":"image","source":{"type":"url","url":"https://x/y.png"}}`, dialect.AnthropicImageTokens},
		{"pdf", `,{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}}`, 3 * dialect.DocumentPageTokens},
		{"text document", `,{"type":"document","source":{"type":"text","media_type":"text/plain","data":"12345678"}}`, 2},
		{"image in a tool result", `,{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"url","url":"u"}}]}`, dialect.AnthropicImageTokens},
	} {
		if got := estimate(tc.block) - text; got != tc.want {
			t.Errorf("%s: adds %d tokens, want %d", tc.name, got, tc.want)
		}
	}
}

// Finding 14: a fractional max_tokens "must be an integer"; a null body
// "must be a JSON object".
func TestRegression_14_RequestMessages(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens: must be an integer, not number 1.5"},
		{`null`, "body: must be a JSON object, not null"},
	} {
		_, err := anthropic.ParseRequest([]byte(tc.body))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}
