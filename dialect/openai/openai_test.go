package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/failure"
)

func TestWriteErrorDecodesWithSDK(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Should-Retry", "false")
		openai.WriteError(w, 404, "invalid_request_error", "model_not_found", "The model `x` does not exist.")
	}))
	defer ts.Close()
	c := sdk.NewClient(option.WithBaseURL(ts.URL), option.WithAPIKey("k"), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Model: "x", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hi")}})
	var e *sdk.Error
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Type != "invalid_request_error" || e.Code != "model_not_found" ||
		e.Message != "The model `x` does not exist." {
		t.Fatalf("%#v", err)
	}
	if ct := e.Response.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content-type %q", ct)
	}
	if e.RawJSON() != `{"message":"The model `+"`x`"+` does not exist.","type":"invalid_request_error","param":null,"code":"model_not_found"}` {
		t.Fatalf("raw %s", e.RawJSON())
	}
}

func TestErrorEventEndsSDKStream(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(w.Header())
		_ = sse.Write(w, "", []byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`))
		_, _ = w.Write(openai.ErrorEvent("server_error", "", "boom"))
	}))
	defer ts.Close()
	c := sdk.NewClient(option.WithBaseURL(ts.URL), option.WithAPIKey("k"), option.WithMaxRetries(0))
	s := c.Chat.Completions.NewStreaming(context.Background(), sdk.ChatCompletionNewParams{
		Model: "m", Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hi")}})
	n := 0
	for s.Next() {
		n++
	}
	if n != 1 || s.Err() == nil || !strings.Contains(s.Err().Error(), "boom") {
		t.Fatalf("chunks %d, err %v", n, s.Err())
	}
	if got := string(openai.ErrorEvent("server_error", "", "boom")); got != "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n" {
		t.Fatalf("%q", got)
	}
}

func TestErrorForAndWriteFailure(t *testing.T) {
	for r, want := range map[failure.Reason]openai.ErrorSpec{
		failure.RateLimited:     {429, "requests", "rate_limit_exceeded"},
		failure.Authentication:  {401, "invalid_request_error", "invalid_api_key"},
		failure.ModelNotFound:   {404, "invalid_request_error", "model_not_found"},
		failure.InvalidRequest:  {400, "invalid_request_error", ""},
		failure.RequestTooLarge: {413, "invalid_request_error", "request_too_large"},
		failure.BudgetExceeded:  {402, "budget_exceeded", "budget_exceeded"},
		failure.Killed:          {403, "run_stopped", "killed"},
		failure.Reason("new"):   {500, "server_error", ""},
	} {
		if got := openai.ErrorFor(r); got != want {
			t.Errorf("ErrorFor(%s) = %+v, want %+v", r, got, want)
		}
	}
	rec := httptest.NewRecorder()
	openai.WriteFailure(rec, &failure.Error{Reason: failure.RateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond, HasRetryAfter: true})
	if rec.Code != 429 || rec.Header().Get("Retry-After-Ms") != "1500" || rec.Header().Get("Retry-After") != "2" ||
		rec.Body.String() != `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}` {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

func TestParseRequestValidation(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{`{"model":"m"}`, "messages"},
		{`{"model":"m","messages":[]}`, "messages"},
		{`{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role"},
		{`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}`, "messages[1].role"},
		{`{"model":"m","messages":[{"role":"tool","content":"r"}]}`, "messages[0].tool_call_id"},
		{`{"model":7,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{`{"model":"m","messages":{"role":"user"}}`, "messages"},
		{`{"model":"m","stream":"yes","messages":[{"role":"user","content":"hi"}]}`, "stream"},
		{`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{`{"model":"m","n":0,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		{`{"model":"m","n":129,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		{`{"model":"m","n":1.5,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		{`{"model":"m","tools":[{"type":"function","function":{}}],"messages":[{"role":"user","content":"hi"}]}`, "tools[0].function.name"},
		{`{"model":"m",`, "body"},
	} {
		_, err := openai.ParseRequest([]byte(tc.body))
		fe := dialect.AsFieldError(err)
		if fe == nil || fe.Field != tc.field || !errors.Is(err, failure.InvalidRequest) {
			t.Errorf("%s: err %v, want field %q", tc.body, err, tc.field)
		}
	}
}

func TestParseRequestFieldsAndEstimates(t *testing.T) {
	body := `{"model":"gpt-4o","unknown":{"x":[1,2]},"stream":true,"stream_options":{"include_usage":true},"max_tokens":50,"max_completion_tokens":100,
"tool_choice":"auto","tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}],
"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image_url","image_url":{"url":"u"}}]},
{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`
	r, err := openai.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Raw) != body || !r.Stream || !r.IncludeUsage() || string(r.ToolChoice) != `"auto"` || r.Messages[1].Text() != "abcd" || r.Messages[2].Text() != "" {
		t.Fatalf("%+v", r)
	}
	if n, ok := openai.MaxOutputTokens(r); n != 100 || !ok {
		t.Fatalf("max %d %v", n, ok)
	}
	// chars: 9 + 4 + (6+2) + 2 + tool (6 + 17) + the unknown member's
	// {"x":[1,2]} 11 = 57 → 15 tokens; + 3*4 messages + 3 primer; + one
	// high-detail image.
	if got := openai.EstimatePromptTokens(r); got != 15+12+3+dialect.OpenAIImageTokens {
		t.Fatalf("estimate %d", got)
	}
}

func TestUsageMapping(t *testing.T) {
	var u openai.Usage
	_ = json.Unmarshal([]byte(`{"prompt_tokens":100,"completion_tokens":40,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":60},"completion_tokens_details":{"reasoning_tokens":25}}`), &u)
	if got := u.Dialect(); got != (dialect.Usage{Input: 40, CachedInput: 60, Output: 40, Reasoning: 25}) {
		t.Fatalf("%+v", got)
	}
	if back := openai.FromDialect(u.Dialect()); back.PromptTokens != 100 || back.TotalTokens != 140 || back.PromptTokensDetails.CachedTokens != 60 {
		t.Fatalf("%+v", back)
	}
}

type wireCase struct {
	ID      string `json:"id"`
	Dialect string `json:"dialect"`
	Stream  bool   `json:"stream"`
	Body    string `json:"body"`
	Expect  struct {
		Kind         string `json:"kind"`
		Reason       string `json:"reason"`
		InputTokens  *int64 `json:"input_tokens"`
		OutputTokens *int64 `json:"output_tokens"`
	} `json:"expect"`
}

func wireCases(t *testing.T, dialectName string) []wireCase {
	dir := os.Getenv("BELAY_WIRE_CASES")
	if dir == "" {
		dir = "../../../shared/cases/wire"
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []wireCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c wireCase
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Dialect == dialectName && c.Stream {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Skip("no wire cases found in " + dir)
	}
	return out
}

func TestAccumulatorOnWireCases(t *testing.T) {
	for _, c := range wireCases(t, "openai") {
		t.Run(c.ID, func(t *testing.T) {
			var acc openai.Accumulator
			r := sse.NewReader(strings.NewReader(c.Body))
			for {
				ev, err := r.Next()
				if err != nil {
					break
				}
				if err := acc.Add(ev.Data); err != nil {
					t.Fatal(err)
				}
			}
			// Only the stream that carries an error event has Err; only the
			// complete one saw [DONE].
			wantErr := c.Expect.Reason == "server_error"
			if acc.Complete() != (c.Expect.Kind == "ok") || (acc.Err() != nil) != wantErr {
				t.Fatalf("complete %v err %v for kind %s", acc.Complete(), acc.Err(), c.Expect.Kind)
			}
			if acc.OutputChars() == 0 {
				t.Fatal("no output characters counted")
			}
			u, has := acc.Usage()
			if c.Expect.InputTokens != nil && (!has || u.Input != *c.Expect.InputTokens || u.Output != *c.Expect.OutputTokens) {
				t.Fatalf("usage %+v %v", u, has)
			}
			if !has && acc.Estimate(77) != (dialect.Usage{Input: 77, Output: dialect.EstimateTokens(acc.OutputChars())}) {
				t.Fatalf("estimate %+v", acc.Estimate(77))
			}
		})
	}
}

func TestRewriteModelKeepsBody(t *testing.T) {
	in := `{"model": "alias-smart", "messages": [{"role":"user","content":"hi"}], "x_custom": {"deep": true}}`
	out, err := openai.RewriteModel([]byte(in), "gpt-4o-2024-08-06")
	if err != nil || string(out) != `{"model": "gpt-4o-2024-08-06", "messages": [{"role":"user","content":"hi"}], "x_custom": {"deep": true}}` {
		t.Fatalf("%s %v", out, err)
	}
}

// n is read and bounded (1 to 128, as OpenAI's API reference says);
// without it a request asks for one choice.
func TestChoices(t *testing.T) {
	for body, want := range map[string]int64{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:         1,
		`{"model":"m","n":3,"messages":[{"role":"user","content":"hi"}]}`:   3,
		`{"model":"m","n":128,"messages":[{"role":"user","content":"hi"}]}`: 128,
	} {
		r, err := openai.ParseRequest([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := r.Choices(); got != want {
			t.Errorf("%s: Choices() = %d, want %d", body, got, want)
		}
	}
}

// A tool's parameters count the same however the client formatted its
// JSON: whitespace outside strings is not counted, whitespace inside them
// is (newcomer finding: pretty-printed tools were estimated larger).
func TestEstimateIgnoresJSONFormatting(t *testing.T) {
	compact := `{"type":"object","properties":{"q":{"type":"string","description":"a  \"quoted\" word"}}}`
	pretty := "{\n  \"type\": \"object\",\n\t\"properties\": {\r\n    \"q\": { \"type\": \"string\", \"description\": \"a  \\\"quoted\\\" word\" }\n  }\n}"
	estimate := func(params string) int64 {
		t.Helper()
		r, err := openai.ParseRequest([]byte(`{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":` +
			params + `}}],"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return openai.EstimatePromptTokens(r)
	}
	// chars: "hi" 2 + "f" 1 + the compact schema's 89 = 92 → 23 tokens; + 3 + 3.
	if c, p := estimate(compact), estimate(pretty); c != 29 || p != c {
		t.Errorf("estimate compact %d, pretty %d; want 29 for both", c, p)
	}
}
