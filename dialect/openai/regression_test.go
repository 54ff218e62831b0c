package openai_test

import (
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
)

// Finding 3: non-text parts (images, audio, files) cost tokens; the
// reservation's prompt estimate counted them as 0.
func TestRegression_3_PromptEstimateCountsNonTextParts(t *testing.T) {
	base := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"abcd"}%s]}]}`
	estimate := func(extra string) int64 {
		t.Helper()
		r, err := openai.ParseRequest([]byte(strings.Replace(base, "%s", extra, 1)))
		if err != nil {
			t.Fatal(err)
		}
		return openai.EstimatePromptTokens(r)
	}
	text := estimate("") // 1 token of text + 3 per message + 3 primer
	if text != 7 {
		t.Fatalf("text only = %d, want 7", text)
	}
	audio := strings.Repeat("A", 40_000) // 30 000 bytes: 7.5 s at 32 kbit/s → 75 tokens
	pdf := strings.Repeat("A", 200_000)  // 150 000 bytes: 3 pages
	for _, tc := range []struct {
		name, part string
		want       int64
	}{
		{"image high detail", `,{"type":"image_url","image_url":{"url":"https://x/y.png"}}`, dialect.OpenAIImageTokens},
		{"image low detail", `,{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}`, dialect.OpenAILowDetailImageTokens},
		{"audio", `,{"type":"input_audio","input_audio":{"data":"` + audio + `","format":"wav"}}`, 75},
		{"file inline", `,{"type":"file","file":{"file_data":"data:application/pdf;base64,` + pdf + `"}}`, 3 * dialect.DocumentPageTokens},
		{"file by id", `,{"type":"file","file":{"file_id":"file-1"}}`, dialect.DocumentPageTokens},
	} {
		if got := estimate(tc.part) - text; got != tc.want {
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
		{` [1] `, "body: must be a JSON object, not array"},
	} {
		_, err := openai.ParseRequest([]byte(tc.body))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}
