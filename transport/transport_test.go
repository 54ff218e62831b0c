package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/transport"
)

// The official clients, with only their HTTP client replaced, run through
// the gateway's request path in-process: default base URLs, the built-in
// simulator as upstream, one run across calls.
func TestSDKsInProcess(t *testing.T) {
	ctx := context.Background()
	tr, err := transport.Open(ctx, nil, transport.Options{RunID: "lib-run"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	hc := &http.Client{Transport: tr}

	oc := openai.NewClient(ooption.WithHTTPClient(hc), ooption.WithAPIKey("unused"))
	var resp *http.Response
	res, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello belay")}}, ooption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Choices[0].Message.Content, "hello belay") || resp.Header.Get("X-Belay-Run-Id") != "lib-run" ||
		resp.Header.Get("X-Belay-Deployment") != "openai/gpt-4o-mini#0" {
		t.Errorf("content %q headers %v", res.Choices[0].Message.Content, resp.Header)
	}

	s := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please")}})
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil || !strings.Contains(acc.Choices[0].Message.Content, "stream please") {
		t.Fatalf("stream: %q %v", acc.Choices[0].Message.Content, err)
	}

	ac := anthropic.NewClient(aoption.WithHTTPClient(hc), aoption.WithAPIKey("unused"))
	as := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi claude"))}})
	var msg anthropic.Message
	for as.Next() {
		_ = msg.Accumulate(as.Current())
	}
	if err := as.Err(); err != nil || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("anthropic stream: %+v %v", msg, err)
	}

	// The Responses API, streamed, on the same path.
	rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("respond in process")}})
	var final responses.Response
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.completed" {
			final = ev.Response
		}
	}
	if err := rs.Err(); err != nil || !strings.Contains(final.OutputText(), "respond in process") || final.Usage.OutputTokens == 0 {
		t.Fatalf("responses stream: %q %+v %v", final.OutputText(), final.Usage, err)
	}

	// The last step settles after its stream's end reached the client;
	// the manager's Flush waits for it and for the record.
	if f, ok := any(tr.Stack.Runs).(interface{ Flush(context.Context) error }); !ok {
		t.Fatal("the stack's runs cannot be flushed")
	} else if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := tr.Stack.Store.GetRun(ctx, "lib-run")
	if err != nil || r.Turns != 4 {
		t.Errorf("run %+v %v", r, err)
	}

	// A limit refusal is a typed error, not retried by the client.
	_, err = oc.Chat.Completions.New(transport.WithRunID(ctx, "other-run"), openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}, ooption.WithHeader("X-Belay-Max-Cost-Usd", "0.000000000001"))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 402 {
		t.Fatalf("budget refusal: %v", err)
	}
	if _, err := tr.Stack.Store.GetRun(ctx, "other-run"); err != nil {
		t.Errorf("WithRunID run not created: %v", err)
	}
}

func TestNoHandler(t *testing.T) {
	c := &http.Client{Transport: transport.New(transport.Options{})}
	_, err := c.Get("http://x/")
	if !errors.Is(err, transport.ErrNoHandler) {
		t.Errorf("err = %v", err)
	}
}

// A transport Open builds logs nothing unless given a logger: the
// library's user owns stderr (newcomer finding: Close wrote "gateway
// stopped" at INFO through slog.Default()). Given one, it logs there.
func TestOpenLogsOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	var deflt lockedBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&deflt, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	call := func(o transport.Options) {
		t.Helper()
		tr, err := transport.Open(ctx, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", "http://x/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("call: %d, want 200", resp.StatusCode)
		}
		if err := tr.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	call(transport.Options{})
	if got := deflt.String(); got != "" {
		t.Errorf("without a Logger, the default logger got:\n%s", got)
	}
	var mine lockedBuffer
	call(transport.Options{Logger: slog.New(slog.NewTextHandler(&mine, nil))})
	if got := mine.String(); !strings.Contains(got, `level=INFO msg="gateway stopped" runs_ended=0`) {
		t.Errorf("the given logger lacks the line of Close:\n%s", got)
	}
	if got := deflt.String(); got != "" {
		t.Errorf("with a Logger, the default logger got:\n%s", got)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A refusal through either SDK names belay's failure in its response's
// headers: failure.FromResponse turns the SDK's error into a
// *failure.Error that errors.Is matches (a newcomer using the library
// found no way but the message text, an Anthropic refusal having no code).
func TestSDKErrorsCarryTheFailure(t *testing.T) {
	ctx := context.Background()
	tr, err := transport.Open(ctx, nil, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	hc := &http.Client{Transport: tr}
	turns := ooption.WithHeader("X-Belay-Max-Turns", "1")

	oc := openai.NewClient(ooption.WithHTTPClient(hc), ooption.WithAPIKey("unused"), ooption.WithMaxRetries(0))
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
	octx := transport.WithRunID(ctx, "two-turns-openai")
	if _, err := oc.Chat.Completions.New(octx, chat, turns); err != nil {
		t.Fatal(err)
	}
	_, err = oc.Chat.Completions.New(octx, chat, turns)
	var oe *openai.Error
	if !errors.As(err, &oe) {
		t.Fatalf("openai: %v", err)
	}
	if fe := failure.FromResponse(oe.Response); fe == nil || !errors.Is(fe, failure.MaxTurnsExceeded) || !errors.Is(fe, failure.Fatal) || fe.Status != oe.StatusCode {
		t.Errorf("openai: %d: FromResponse = %v; want fatal max_turns_exceeded", oe.StatusCode, fe)
	}

	ac := anthropic.NewClient(aoption.WithHTTPClient(hc), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	msg := anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}}
	actx := transport.WithRunID(ctx, "two-turns-anthropic")
	if _, err := ac.Messages.New(actx, msg, aoption.WithHeader("X-Belay-Max-Turns", "1")); err != nil {
		t.Fatal(err)
	}
	_, err = ac.Messages.New(actx, msg, aoption.WithHeader("X-Belay-Max-Turns", "1"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		t.Fatalf("anthropic: %v", err)
	}
	if fe := failure.FromResponse(ae.Response); fe == nil || !errors.Is(fe, failure.MaxTurnsExceeded) {
		t.Errorf("anthropic: %d: FromResponse = %v; want fatal max_turns_exceeded", ae.StatusCode, fe)
	}

	// A budget refusal, and a success, which names no failure.
	var resp *http.Response
	_, err = oc.Chat.Completions.New(ctx, chat, ooption.WithHeader("X-Belay-Max-Cost-Usd", "0.000000000001"))
	if !errors.As(err, &oe) {
		t.Fatalf("budget: %v", err)
	}
	if fe := failure.FromResponse(oe.Response); fe == nil || !errors.Is(fe, failure.BudgetExceeded) {
		t.Errorf("budget: FromResponse = %v", fe)
	}
	if _, err := oc.Chat.Completions.New(ctx, chat, ooption.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if fe := failure.FromResponse(resp); fe != nil {
		t.Errorf("a success: FromResponse = %v, want nil", fe)
	}
}

// Options.Approver decides the approvals of the stack Open builds: with an
// in-memory store, a Go agent approves in process instead of polling the
// store's queue.
func TestOpenApprover(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.Parse([]byte("store: memory://\ntools: {irreversible: [issue_refund]}\n"), "inline.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	approve := approverFunc(func(_ context.Context, a store.Approval) (store.ApprovalState, string, error) {
		asked = append(asked, a.Tool)
		return store.ApprovalApproved, "test", nil
	})
	tr, err := transport.Open(ctx, cfg, transport.Options{Approver: approve})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	r, err := tr.Stack.Runs.Start(ctx, run.Spec{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	out, err := r.Tool(ctx, run.ToolCall{Name: "issue_refund", Arguments: json.RawMessage(`{"order":"A-1"}`)},
		func(context.Context) (json.RawMessage, error) { ran++; return json.RawMessage(`"done"`), nil })
	if err != nil || string(out) != `"done"` || ran != 1 || len(asked) != 1 || asked[0] != "issue_refund" {
		t.Errorf("tool: %s %v, ran %d, asked %v; want it approved in process and run once", out, err, ran, asked)
	}
}

type approverFunc func(context.Context, store.Approval) (store.ApprovalState, string, error)

func (f approverFunc) Decide(ctx context.Context, a store.Approval) (store.ApprovalState, string, error) {
	return f(ctx, a)
}
