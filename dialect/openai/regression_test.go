package openai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/fixture"
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
		{`null`, "request body must be a JSON object, not null"},
		{` [1] `, "request body must be a JSON object, not array"},
	} {
		_, err := openai.ParseRequest([]byte(tc.body))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

// Adversarial finding: a 147 KB JSON schema sent as tools was estimated
// right, but sent as the legacy functions, as response_format's
// json_schema or as prediction content it counted about one token, so 20
// concurrent calls all fitted a $0.01 run limit and spent $0.11. Every
// prompt part counts: what belay does not know counts by its JSON size.
func TestRegression_PromptEstimateCountsEveryPromptPart(t *testing.T) {
	schema := fixture.BigSchema(147_000)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(schema), "", "  "); err != nil {
		t.Fatal(err)
	}
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	text := strings.Repeat("lorem ipsum ", 200_000/12)
	estimate := func(members, content string) int64 {
		t.Helper()
		r, err := openai.ParseRequest([]byte(`{"model":"m",` + members + `"messages":[{"role":"user","content":` + content + `}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return openai.EstimatePromptTokens(r)
	}
	asTools := estimate(`"tools":[{"type":"function","function":{"name":"record","parameters":`+schema+`}}],`, `"hi"`)
	asText := estimate("", quoted(text))
	if asTools < 30_000 || asText < 45_000 {
		t.Fatalf("baselines: schema as tools %d, text as content %d tokens; want about 36 000 and 50 000", asTools, asText)
	}
	for _, tc := range []struct {
		name, members, content string
		want                   int64
	}{
		{"functions", `"functions":[{"name":"record","parameters":` + schema + `}],`, `"hi"`, asTools},
		{"response_format", `"response_format":{"type":"json_schema","json_schema":{"name":"record","strict":true,"schema":` + schema + `}},`, `"hi"`, asTools},
		{"response_format pretty-printed", `"response_format":{"type":"json_schema","json_schema":{"name":"record","strict":true,"schema":` + pretty.String() + `}},`, `"hi"`, asTools},
		{"prediction string", `"prediction":{"type":"content","content":` + quoted(schema) + `},`, `"hi"`, asTools},
		{"prediction parts", `"prediction":{"type":"content","content":[{"type":"text","text":` + quoted(schema) + `}]},`, `"hi"`, asTools},
		{"unknown member", `"future_schema":` + schema + `,`, `"hi"`, asTools},
		{"custom tool", `"tools":[{"type":"custom","custom":{"name":"record","format":{"type":"grammar","grammar":{"syntax":"lark","definition":` + quoted(text) + `}}}}],`, `"hi"`, asText},
		{"unknown content part", "", `[{"type":"future_text","future_text":{"text":` + quoted(text) + `}}]`, asText},
		{"text part", "", `[{"type":"text","text":` + quoted(text) + `}]`, asText},
		{"refusal part", "", `[{"type":"refusal","refusal":` + quoted(text) + `}]`, asText},
	} {
		got := estimate(tc.members, tc.content)
		if got < tc.want*9/10 || got > tc.want*11/10 {
			t.Errorf("%s: estimate %d tokens, want within 10%% of %d", tc.name, got, tc.want)
		}
	}
}

// The same finding in a conversation's history: a legacy function_call of
// an assistant message counts as a tool call does, and a message member
// belay does not know counts by its JSON size.
func TestRegression_PromptEstimateCountsEveryMessagePart(t *testing.T) {
	args, _ := json.Marshal(fixture.BigSchema(100_000))
	estimate := func(assistant string) int64 {
		t.Helper()
		r, err := openai.ParseRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"},` + assistant + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		return openai.EstimatePromptTokens(r)
	}
	toolCall := estimate(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"record","arguments":` + string(args) + `}}]}`)
	for _, tc := range []struct{ name, assistant string }{
		{"function_call", `{"role":"assistant","content":null,"function_call":{"name":"record","arguments":` + string(args) + `}}`},
		{"unknown member", `{"role":"assistant","content":null,"future_call":` + fixture.BigSchema(100_000) + `}`},
	} {
		if got := estimate(tc.assistant); got < toolCall*9/10 || got > toolCall*11/10 {
			t.Errorf("%s: estimate %d tokens, want within 10%% of the tool call's %d", tc.name, got, toolCall)
		}
	}
}

// Sampling settings, limits and stream options are not prompt: an
// ordinary request's estimate is what it was before every part counted.
func TestPromptEstimateOfOrdinaryRequests(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
	}{
		{smallRequest, 83},
		{`{"model":"m","temperature":1,"top_p":0.9,"n":2,"seed":7,"stop":["\n\n"],"presence_penalty":0.1,"frequency_penalty":0.1,"logit_bias":{"50256":-100},"logprobs":true,"top_logprobs":2,"user":"u","store":false,"metadata":{"k":"v"},"service_tier":"auto","reasoning_effort":"low","modalities":["text"],"max_completion_tokens":9,"parallel_tool_calls":true,"tool_choice":"auto","messages":[{"role":"developer","content":"be good"},{"role":"user","content":"hi"}]}`, 12},
		{`{"model":"m","messages":[{"role":"system","content":"Line one.\nLine \"two\" \u00e9\u4e2d\ud83d\ude00 done"},{"role":"user","content":"x","name":"bob"}]}`, 19},
	} {
		r, err := openai.ParseRequest([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := openai.EstimatePromptTokens(r); got != tc.want {
			t.Errorf("%.60s...: estimate %d, want %d", tc.body, got, tc.want)
		}
	}
}

// Adversary of session 8: a wrong-typed content, part or option was
// forwarded to the provider. Each is refused with the field named.
func TestWrongTypesRefused(t *testing.T) {
	msg := func(content string) string {
		return `{"model":"m","messages":[{"role":"user","content":` + content + `}]}`
	}
	for _, tc := range []struct{ body, want string }{
		{msg(`123`), "messages[0].content: must be a string or an array of content parts, not number"},
		{msg(`{"text":"hi"}`), "messages[0].content: must be a string or an array of content parts, not object"},
		{msg(`null`), "messages[0].content: must be a string or an array of content parts, not null"},
		{msg(`[{"type":"text","text":"a"},{"type":"text","text":5}]`), "messages[0].content[1].text: must be a string, not number"},
		{msg(`[{"type":"text"}]`), "messages[0].content[0].text: is required for a text part"},
		{msg(`["hi"]`), "messages[0].content[0]: must be an object, not string"},
		{msg(`[{"text":"hi"}]`), "messages[0].content[0].type: is required"},
		{msg(`[{"type":1}]`), "messages[0].content[0].type: must be a string, not number"},
		{`{"model":"m","temperature":"hot","messages":[{"role":"user","content":"hi"}]}`, "temperature: must be a number, not string"},
		{`{"model":"m","seed":1.5,"messages":[{"role":"user","content":"hi"}]}`, "seed: must be an integer, not number 1.5"},
		{`{"model":"m","parallel_tool_calls":"yes","messages":[{"role":"user","content":"hi"}]}`, "parallel_tool_calls: must be a boolean, not string"},
		{`{"model":"m","stop":5,"messages":[{"role":"user","content":"hi"}]}`, "stop: must be a string or an array of strings"},
		{`{"model":"m","stop":["a",1],"messages":[{"role":"user","content":"hi"}]}`, "stop: must be a string or an array of strings"},
	} {
		_, err := openai.ParseRequest([]byte(tc.body))
		if err == nil || err.Error() != tc.want || !errors.Is(err, failure.InvalidRequest) {
			t.Errorf("%s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
	// What the API accepts still parses: null content of an assistant
	// message with tool calls, parts of other types unchecked, stop as a
	// string, an array or null.
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
		msg(`[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]`),
		msg(`[]`),
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"function","name":"f","content":null}]}`,
		`{"model":"m","stop":"x","temperature":0.2,"seed":7,"user":"u","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stop":["x","y"],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stop":null,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		if _, err := openai.ParseRequest([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}
