package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/sim"
)

// fakeUpstream is an OpenAI-dialect upstream whose n-th request (1-based)
// is served by serve(n, w, r).
type fakeUpstream struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func newFake(t *testing.T, serve func(n int64, w http.ResponseWriter, r *http.Request)) *fakeUpstream {
	f := &fakeUpstream{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(f.calls.Add(1), w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func chunk(content string) string {
	return fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", content)
}

const roleChunk = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
const stopChunk = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"

func sseHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
}

func fakeAlias(f *fakeUpstream) string {
	return fmt.Sprintf("  - alias: fake\n    deployments:\n      - {name: fake, provider: openai, model: gpt-4o-mini, base_url: %s/v1, api_key: k}\n", f.srv.URL)
}

func streamText(t *testing.T, c *openai.Client, model string, opts ...ooption.RequestOption) (string, *http.Response, error) {
	t.Helper()
	var resp *http.Response
	s := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: model, Messages: userMsg("hi")},
		append(opts, ooption.WithResponseInto(&resp))...)
	var b strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String(), resp, s.Err()
}

// An error event before any output is retried invisibly.
func TestStreamEarlyErrorIsRetried(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		io.WriteString(w, roleChunk)
		if n == 1 {
			io.WriteString(w, `data: {"error":{"message":"boom","type":"server_error","code":null}}`+"\n\n")
			return
		}
		io.WriteString(w, chunk("Hello")+chunk(" world")+stopChunk+"data: [DONE]\n\n")
	})
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	text, resp, err := streamText(t, h.openai(), "fake")
	if err != nil || text != "Hello world" {
		t.Fatalf("text %q err %v", text, err)
	}
	if resp.Header.Get("X-Belay-Attempts") != "2" || f.calls.Load() != 2 {
		t.Errorf("attempts header %q, upstream calls %d", resp.Header.Get("X-Belay-Attempts"), f.calls.Load())
	}
}

// A stream cut after output ends the client's stream with an error event,
// never a clean end; the partial stream is charged from an estimate.
func TestStreamCutAfterOutputIsAnError(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		io.WriteString(w, roleChunk+chunk("partial answer"))
	})
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	text, resp, err := streamText(t, h.openai(), "fake")
	if err == nil || text != "partial answer" {
		t.Fatalf("text %q err %v; want the partial text and an error", text, err)
	}
	if !strings.Contains(err.Error(), "stream") {
		t.Errorf("error %v does not name the stream", err)
	}
	if f.calls.Load() != 1 {
		t.Errorf("upstream calls %d: a failure after output must not be retried", f.calls.Load())
	}
	h.quiesce()
	r := h.record(resp.Header.Get("X-Belay-Run-Id"))
	if r.OutputTokens != 4 || r.Turns != 1 { // ceil(14 chars / 4)
		t.Errorf("run = %+v", r)
	}
}

// A mid-stream error event from the provider reaches the Anthropic SDK as
// a stream error.
func TestAnthropicMidStreamError(t *testing.T) {
	p := sim.Profile{Name: "mid", Faults: []sim.Weighted{{Fault: sim.StreamError, P: 1}}}
	h := newHarness(t, harnessOpts{profiles: map[string]sim.Profile{"an-1": p, "an-2": p}})
	s := h.anthropic().Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 100, Messages: anthropicMsg("hello there")})
	var msg anthropic.Message
	for s.Next() {
		_ = msg.Accumulate(s.Current())
	}
	if s.Err() == nil {
		t.Fatalf("stream ended cleanly; want an error (message %+v)", msg)
	}
	if n := h.upstreamCalls("an-1") + h.upstreamCalls("an-2"); n != 1 {
		t.Errorf("upstream calls = %d, want 1", n)
	}
}

// A client that disconnects mid-stream cancels the upstream call and is
// charged for what was produced.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	canceled := make(chan struct{})
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		io.WriteString(w, roleChunk+chunk("some output here"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(canceled)
	})
	h := newHarness(t, harnessOpts{extra: fakeAlias(f)})
	req, _ := http.NewRequest("POST", h.gw.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"fake","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("X-Belay-Run-Id", "disc-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "some output") {
			break
		}
	}
	resp.Body.Close()
	select {
	case <-canceled:
	case <-time.After(10 * time.Second): // a guard, not a wait: the cancel is immediate
		t.Fatal("upstream request was not canceled")
	}
	h.quiesce()
	r := h.record("disc-1")
	if r.OutputTokens != 4 || r.Cost <= 0 {
		t.Errorf("run = %+v; want the partial output charged", r)
	}
}

// A client that sends its headers slowly is cut by ReadHeaderTimeout.
func TestSlowHeadersAreCut(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "timeouts: {header_read: 100ms}\n"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.stack.Server.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // guard
	b, _ := io.ReadAll(conn)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("connection held %v", el)
	}
	if len(b) > 0 && !strings.Contains(string(b), "408") {
		t.Errorf("got %q", b)
	}
}

// No first token within timeouts.first_token: the attempt times out and
// is retried before anything reached the client.
func TestFirstTokenTimeoutIsRetried(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		io.WriteString(w, roleChunk)
		w.(http.Flusher).Flush()
		if n == 1 {
			<-r.Context().Done()
			return
		}
		io.WriteString(w, chunk("late but fine")+stopChunk+"data: [DONE]\n\n")
	})
	h := newHarness(t, harnessOpts{extra: fakeAlias(f) + "timeouts: {first_token: 100ms}\n"})
	text, resp, err := streamText(t, h.openai(), "fake")
	if err != nil || text != "late but fine" || resp.Header.Get("X-Belay-Attempts") != "2" {
		t.Fatalf("text %q err %v attempts %q", text, err, resp.Header.Get("X-Belay-Attempts"))
	}
	h.quiesce()
	body := scrape(t, h, "/metrics")
	if !strings.Contains(body, `belay_attempts_total{deployment="fake",reason="timeout"} 1`) ||
		!strings.Contains(body, `belay_time_to_first_token_seconds_count{dialect="openai"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(body, "fake")+grepLines(body, "first_token"))
	}
}

// A client that reads a stream to its end gets the cost as a trailer.
func TestStreamCostTrailer(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	req, _ := http.NewRequest("POST", h.gw.URL+"/v1/messages",
		strings.NewReader(`{"model":"claude-sonnet-5-5","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(b)), `"type":"message_stop"}`) {
		t.Fatalf("body %s err %v", b, err)
	}
	if c := resp.Trailer.Get("X-Belay-Cost-Usd"); c == "" || c == "0.00" {
		t.Errorf("cost trailer %q", c)
	}
}
