package anthropic_test

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

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/failure"
)

func newClient(url string) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(url), option.WithAPIKey("k"), option.WithMaxRetries(0))
}

var params = sdk.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 10,
	Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))}}

func TestWriteErrorDecodesWithSDK(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Request-Id", "req_1")
		anthropic.WriteError(w, 529, "overloaded_error", "Overloaded")
	}))
	defer ts.Close()
	c := newClient(ts.URL)
	_, err := c.Messages.New(context.Background(), params)
	var e *sdk.Error
	if !errors.As(err, &e) || e.StatusCode != 529 || e.Type() != "overloaded_error" || e.Message != "Overloaded" || e.RequestID != "req_1" {
		t.Fatalf("%#v", err)
	}
	if e.RawJSON() != `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}` {
		t.Fatalf("raw %s", e.RawJSON())
	}
	if ct := e.Response.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content-type %q", ct)
	}
}

func TestErrorEventEndsSDKStream(t *testing.T) {
	want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	if got := string(anthropic.ErrorEvent("overloaded_error", "Overloaded")); got != want {
		t.Fatalf("%q", got)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.SetHeaders(w.Header())
		_ = sse.Write(w, "message_start", []byte(`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`))
		_, _ = w.Write(anthropic.ErrorEvent("overloaded_error", "Overloaded"))
	}))
	defer ts.Close()
	c := newClient(ts.URL)
	s := c.Messages.NewStreaming(context.Background(), params)
	n := 0
	for s.Next() {
		n++
	}
	var e *sdk.Error
	if n != 1 || !errors.As(s.Err(), &e) || e.Type() != "overloaded_error" {
		t.Fatalf("events %d, err %#v", n, s.Err())
	}
}

func TestErrorForAndWriteFailure(t *testing.T) {
	for r, want := range map[failure.Reason]anthropic.ErrorSpec{
		failure.RateLimited:     {429, "rate_limit_error"},
		failure.Overloaded:      {529, "overloaded_error"},
		failure.Authentication:  {401, "authentication_error"},
		failure.ModelNotFound:   {404, "not_found_error"},
		failure.InvalidRequest:  {400, "invalid_request_error"},
		failure.RequestTooLarge: {413, "request_too_large"},
		failure.BudgetExceeded:  {402, "billing_error"},
		failure.Killed:          {403, "permission_error"},
		failure.Reason("new"):   {500, "api_error"},
	} {
		if got := anthropic.ErrorFor(r); got != want {
			t.Errorf("ErrorFor(%s) = %+v, want %+v", r, got, want)
		}
	}
	rec := httptest.NewRecorder()
	anthropic.WriteFailure(rec, &failure.Error{Reason: failure.RateLimited, RetryAfter: 2100 * time.Millisecond, HasRetryAfter: true})
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "3" ||
		rec.Body.String() != `{"type":"error","error":{"type":"rate_limit_error","message":"rate_limited"}}` {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

func TestParseRequestValidation(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{`{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{`{"model":"m","max_tokens":5,"messages":[]}`, "messages"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"system","content":"b"}]}`, "messages.1.role"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user"}]}`, "messages.0.content"},
		{`{"model":"m","max_tokens":"5","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{`{"model":"m","max_tokens":5,"tools":[{"input_schema":{}}],"messages":[{"role":"user","content":"hi"}]}`, "tools.0.name"},
		{`nope`, "body"},
	} {
		_, err := anthropic.ParseRequest([]byte(tc.body))
		fe := dialect.AsFieldError(err)
		if fe == nil || fe.Field != tc.field || !errors.Is(err, failure.InvalidRequest) {
			t.Errorf("%s: err %v, want field %q", tc.body, err, tc.field)
		}
	}
}

func TestParseRequestFieldsAndEstimates(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":300,"stream":true,"metadata":{"user_id":"u"},
"system":[{"type":"text","text":"scenario: refund"}],
"tools":[{"name":"lookup","input_schema":{"type":"object"}}],
"messages":[{"role":"user","content":"abcd"},
{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"lookup","input":{"a":1}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"done"}]}]}]}`
	r, err := anthropic.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Raw) != body || !r.Stream || r.SystemText() != "scenario: refund" || r.Messages[0].Text() != "abcd" ||
		r.Messages[2].Blocks()[0].ResultText() != "done" {
		t.Fatalf("%+v", r)
	}
	if n, ok := anthropic.MaxOutputTokens(r); n != 300 || !ok {
		t.Fatal(n, ok)
	}
	// chars: system 16 + 4 + (2 + 6 + 7) + 4 + tool (6 + 17) = 62 → 16 tokens; + 3*3 messages.
	if got := anthropic.EstimatePromptTokens(r); got != 16+9 {
		t.Fatalf("estimate %d", got)
	}
}

func TestUsageMapping(t *testing.T) {
	var u anthropic.Usage
	_ = json.Unmarshal([]byte(`{"input_tokens":10,"output_tokens":40,"cache_read_input_tokens":60,"cache_creation_input_tokens":5}`), &u)
	if got := u.Dialect(); got != (dialect.Usage{Input: 10, CachedInput: 60, CacheWrite: 5, Output: 40}) {
		t.Fatalf("%+v", got)
	}
}

func TestAccumulatorOnWireCases(t *testing.T) {
	dir := os.Getenv("BELAY_WIRE_CASES")
	if dir == "" {
		dir = "../../../shared/cases/wire"
	}
	files, _ := filepath.Glob(filepath.Join(dir, "anthropic-stream-*.json"))
	if len(files) == 0 {
		t.Skip("no anthropic stream cases in " + dir)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		var c struct {
			Body   string `json:"body"`
			Expect struct {
				Kind         string `json:"kind"`
				InputTokens  *int64 `json:"input_tokens"`
				OutputTokens *int64 `json:"output_tokens"`
			} `json:"expect"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			var acc anthropic.Accumulator
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
			ok := c.Expect.Kind == "ok"
			if acc.Complete() != ok || (acc.Err() != nil) == ok || acc.OutputChars() == 0 {
				t.Fatalf("complete %v err %v chars %d", acc.Complete(), acc.Err(), acc.OutputChars())
			}
			u, _ := acc.Usage()
			if c.Expect.InputTokens != nil && (u.Input != *c.Expect.InputTokens || u.Output != *c.Expect.OutputTokens) {
				t.Fatalf("usage %+v", u)
			}
			if !ok {
				// The cut stream reported output_tokens 1 at message_start;
				// the estimate counts what was actually streamed ("Checking").
				if est := acc.Estimate(0); est.Output != 2 || est.Input != 95 {
					t.Fatalf("estimate %+v", est)
				}
			}
		})
	}
}
