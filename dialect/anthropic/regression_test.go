package anthropic_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/internal/fixture"
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
		{`null`, "request body must be a JSON object, not null"},
	} {
		_, err := anthropic.ParseRequest([]byte(tc.body))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

// Adversarial finding: 200 KB of text as plain content was estimated
// right, but as a document with a "content" source it counted one PDF
// page, and as a search_result block, or one inside a tool_result, about
// nothing, so concurrent calls overshot a run's cost limit. Every prompt
// part counts: text by its length wherever it is, base64 media by the
// media estimate, and what belay does not know by its JSON size.
func TestRegression_PromptEstimateCountsEveryBlock(t *testing.T) {
	text := strings.Repeat("lorem ipsum ", 200_000/12)
	q, _ := json.Marshal(text)
	quoted := string(q)
	estimate := func(members, content string) int64 {
		t.Helper()
		r, err := anthropic.ParseRequest([]byte(`{"model":"m","max_tokens":5,` + members + `"messages":[{"role":"user","content":` + content + `}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return anthropic.EstimatePromptTokens(r)
	}
	asText := estimate("", quoted)
	if asText < 45_000 {
		t.Fatalf("text as content: %d tokens, want about 50 000", asText)
	}
	searchResult := `{"type":"search_result","source":"https://example.com/a","title":"A","content":[{"type":"text","text":` + quoted + `}]}`
	contentDocument := `{"type":"document","source":{"type":"content","content":[{"type":"text","text":` + quoted + `}]}}`
	for _, tc := range []struct{ name, members, content string }{
		{"text block", "", `[{"type":"text","text":` + quoted + `}]`},
		{"system", `"system":` + quoted + `,`, `"hi"`},
		{"text document", "", `[{"type":"document","source":{"type":"text","media_type":"text/plain","data":` + quoted + `}}]`},
		{"content document", "", `[` + contentDocument + `]`},
		{"content document, string", "", `[{"type":"document","source":{"type":"content","content":` + quoted + `}}]`},
		{"document context", "", `[{"type":"document","source":{"type":"file","file_id":"f"},"context":` + quoted + `}]`},
		{"search_result", "", `[` + searchResult + `]`},
		{"search_result in a tool_result", "", `[{"type":"tool_result","tool_use_id":"t1","content":[` + searchResult + `]}]`},
		{"document in a tool_result", "", `[{"type":"tool_result","tool_use_id":"t1","content":[` + contentDocument + `]}]`},
		{"tool_result string", "", `[{"type":"tool_result","tool_use_id":"t1","content":` + quoted + `}]`},
		{"unknown block", "", `[{"type":"future_block","future_block":{"text":` + quoted + `}}]`},
		{"unknown block in a tool_result", "", `[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"future_block","data":` + quoted + `}]}]`},
		{"unknown member", `"future_context":` + quoted + `,`, `"hi"`},
	} {
		if got := estimate(tc.members, tc.content); got < asText*9/10 || got > asText*11/10 {
			t.Errorf("%s: estimate %d tokens, want within 10%% of the plain text's %d", tc.name, got, asText)
		}
	}

	// Base64 media keep the media estimate: counted as text, a PDF's
	// data would reserve about 40 times its cost.
	pdf := strings.Repeat("A", 140_000) // 105 000 bytes: 3 pages
	base := estimate("", `[{"type":"text","text":"abcd"}]`)
	for _, tc := range []struct {
		name, block string
		want        int64
	}{
		{"pdf", `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}}`, 3 * dialect.DocumentPageTokens},
		{"pdf in a tool_result", `{"type":"tool_result","tool_use_id":"t1","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf + `"}}]}`, 3 * dialect.DocumentPageTokens},
		{"image", `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pdf + `"}}`, dialect.AnthropicImageTokens},
		{"image in a content document", `{"type":"document","source":{"type":"content","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pdf + `"}}]}}`, dialect.AnthropicImageTokens},
	} {
		if got := estimate("", `[{"type":"text","text":"abcd"},`+tc.block+`]`) - base; got != tc.want {
			t.Errorf("%s: adds %d tokens, want %d", tc.name, got, tc.want)
		}
	}
}

// A schema as output_format (structured outputs) counts as one in tools.
func TestRegression_PromptEstimateCountsOutputFormat(t *testing.T) {
	schema := fixture.BigSchema(147_000)
	estimate := func(members string) int64 {
		t.Helper()
		r, err := anthropic.ParseRequest([]byte(`{"model":"m","max_tokens":5,` + members + `"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return anthropic.EstimatePromptTokens(r)
	}
	asTool := estimate(`"tools":[{"name":"record","input_schema":` + schema + `}],`)
	if asTool < 30_000 {
		t.Fatalf("schema as a tool: %d tokens, want about 36 000", asTool)
	}
	if got := estimate(`"output_format":{"type":"json_schema","schema":` + schema + `},`); got < asTool*9/10 || got > asTool*11/10 {
		t.Errorf("output_format: estimate %d tokens, want within 10%% of the tool's %d", got, asTool)
	}
}

// Sampling settings, limits and metadata are not prompt: an ordinary
// request's estimate is what it was before every part counted.
func TestPromptEstimateOfOrdinaryRequests(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
	}{
		{smallRequest, 77},
		{`{"model":"m","max_tokens":5,"temperature":1,"top_p":0.9,"top_k":5,"stop_sequences":["x"],"metadata":{"user_id":"u"},"service_tier":"auto","tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":2000},"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":"hi"}]}`, 5},
		{`{"model":"m","max_tokens":5,"system":"Line one.\nLine \"two\" \u00e9\u4e2d\ud83d\ude00 done","messages":[{"role":"user","content":"x"}]}`, 12},
	} {
		r, err := anthropic.ParseRequest([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := anthropic.EstimatePromptTokens(r); got != tc.want {
			t.Errorf("%.60s...: estimate %d, want %d", tc.body, got, tc.want)
		}
	}
}

// Adversary of session 8: a wrong-typed content, block, system or option
// was forwarded to the provider. Each is refused with the field named as
// Anthropic names it.
func TestWrongTypesRefused(t *testing.T) {
	msg := func(content string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":` + content + `}]}`
	}
	for _, tc := range []struct{ body, want string }{
		{msg(`123`), "messages.0.content: must be a string or an array of content parts, not number"},
		{msg(`[{"type":"text","text":"a"},{"type":"text","text":false}]`), "messages.0.content.1.text: must be a string, not bool"},
		{msg(`[{"text":"hi"}]`), "messages.0.content.0.type: is required"},
		{`{"model":"m","max_tokens":5,"system":7,"messages":[{"role":"user","content":"hi"}]}`, "system: must be a string or an array of content parts, not number"},
		{`{"model":"m","max_tokens":5,"system":[{"type":"text","text":[]}],"messages":[{"role":"user","content":"hi"}]}`, "system.0.text: must be a string, not array"},
		{`{"model":"m","max_tokens":5,"temperature":"hot","messages":[{"role":"user","content":"hi"}]}`, "temperature: must be a number, not string"},
		{`{"model":"m","max_tokens":5,"top_k":"3","messages":[{"role":"user","content":"hi"}]}`, "top_k: must be an integer, not string"},
		{`{"model":"m","max_tokens":5,"stop_sequences":"x","messages":[{"role":"user","content":"hi"}]}`, "stop_sequences: must be an array, not string"},
	} {
		_, err := anthropic.ParseRequest([]byte(tc.body))
		if fe := dialect.AsFieldError(err); fe == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
	for _, body := range []string{
		msg(`[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]`),
		msg(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"ok"}]}]`),
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],"temperature":1,"top_k":3,"stop_sequences":["x"],"messages":[{"role":"user","content":"hi"}]}`,
	} {
		if _, err := anthropic.ParseRequest([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}
