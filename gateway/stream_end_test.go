package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/gateway"
)

// lockedLog collects log lines, safely for concurrent writers.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const usageChunkEvent = `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n\n"

const endStreamBody = `{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`

// openAIStreamHead writes a complete OpenAI stream up to and including [DONE], flushed.
func openAIStreamHead(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	io.WriteString(w, roleChunk+chunk("ok")+usageChunkEvent+"data: [DONE]\n\n")
	w.(http.Flusher).Flush()
}

// streamTo sends a stream call and reads it until [DONE]; it returns
// the response, the reader, and the time [DONE] was read.
func streamTo(t *testing.T, url, path, body, runID, terminator string) (*http.Response, *bufio.Reader, time.Time) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if runID != "" {
		req.Header.Set("X-Belay-Run-Id", runID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if strings.Contains(line, terminator) {
			return resp, br, time.Now()
		}
		if err != nil {
			t.Fatalf("the stream ended before %s: %v", terminator, err)
		}
	}
}

// heldOpenUpstream starts an upstream that answers a complete OpenAI
// stream and then holds its body open until the gateway cancels the
// request; canceled receives once per request so canceled.
func heldOpenUpstream(t *testing.T) (up *httptest.Server, canceled <-chan struct{}) {
	gone := make(chan struct{}, 4)
	up = upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		openAIStreamHead(w)
		<-r.Context().Done()
		gone <- struct{}{}
	})
	return up, gone
}

// awaitCanceled fails t unless canceled receives within a failure guard.
func awaitCanceled(t *testing.T, canceled <-chan struct{}) {
	t.Helper()
	select {
	case <-canceled:
	case <-time.After(10 * time.Second): // a failure guard
		t.Fatal("the upstream request was never canceled")
	}
}

// An upstream that holds its body open after [DONE]: the client's
// response ends about afterTerminatorWait later, with its cost trailer;
// the upstream request is canceled (no leak); nothing is logged as a
// failure, and the run has no error.
func TestFinishStreamUpstreamHoldsBodyOpenAfterDone(t *testing.T) {
	up, upGone := heldOpenUpstream(t)
	logs := &lockedLog{}
	g := newGWOpts(t, tokenLimitConfig(up.URL, "{max_turns: 5}"),
		gateway.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	resp, br, done := streamTo(t, g.srv.URL, "/v1/chat/completions", endStreamBody, "hold-1", "[DONE]")
	rest, err := io.ReadAll(br)
	el := time.Since(done)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the end: %v", err)
	}
	if strings.TrimSpace(string(rest)) != "" {
		t.Errorf("after [DONE] the client got %q", rest)
	}
	t.Logf("[DONE] to EOF: %v", el)
	if el > endGuard {
		t.Errorf("the client's response ended %v after [DONE]; want about 100ms", el)
	}
	if c := resp.Trailer.Get("X-Belay-Cost-Usd"); c == "" || c == "0" {
		t.Errorf("cost trailer %q", c)
	}
	awaitCanceled(t, upGone)
	r := g.run("hold-1")
	if r.Error != "" || r.OutputTokens != 1 || r.InputTokens != 3 {
		t.Errorf("run %+v; want no error, usage 3/1", r)
	}
	if l := logs.String(); strings.Contains(l, "failed") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
		t.Errorf("logs:\n%s", l)
	}
}

// An upstream that keeps sending (junk, more than 4 KiB, without end)
// after [DONE]: the client sees none of it and its response ends promptly.
func TestFinishStreamUpstreamFloodsAfterDone(t *testing.T) {
	upGone := make(chan struct{}, 4)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		openAIStreamHead(w)
		junk := chunk(strings.Repeat("LEAK", 200))
		for {
			if _, err := io.WriteString(w, junk); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			if r.Context().Err() != nil {
				break
			}
		}
		upGone <- struct{}{}
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 5}"), nil)
	resp, br, done := streamTo(t, g.srv.URL, "/v1/chat/completions", endStreamBody, "flood-1", "[DONE]")
	rest, err := io.ReadAll(br)
	el := time.Since(done)
	resp.Body.Close()
	if err != nil || strings.Contains(string(rest), "LEAK") || strings.TrimSpace(string(rest)) != "" {
		t.Errorf("after [DONE]: %q, %v", rest, err)
	}
	if el > endGuard {
		t.Errorf("response ended %v after [DONE]", el)
	}
	awaitCanceled(t, upGone)
	if r := g.run("flood-1"); r.Error != "" || r.OutputTokens != 1 {
		t.Errorf("run %+v", r)
	}
}

// More events after [DONE], then the body's end: not relayed; the
// connection is kept (the rest is under 4 KiB).
func TestFinishStreamEventsAfterDoneAreNotRelayed(t *testing.T) {
	up, news := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		openAIStreamHead(w)
		io.WriteString(w, chunk("LEAK")+"data: [DONE]\n\n")
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 5}"), nil)
	gateway.SetFinishWait(g.stack, time.Minute) // the end comes when the test sends it: no race with the wait
	for i := range 3 {
		_, b := g.do("POST", "/v1/chat/completions", endStreamBody)
		if strings.Contains(b, "LEAK") || strings.Count(b, "[DONE]") != 1 {
			t.Fatalf("call %d: body %q", i, b)
		}
	}
	if n := news.Load(); n != 1 {
		t.Errorf("%d upstream connections; want 1", n)
	}
}

const anthropicStreamEvents = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func anthropicOnlyConfig(up string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 3, base: 1ms, cap: 2ms, max_retry_after: 30s}
breaker: {consecutive_failures: 1000}
limits: {max_turns: 50}
models:
  - alias: m
    deployments:
      - {name: a, provider: anthropic, model: claude-sonnet-5-5, base_url: %s, api_key: k}
`, up)
}

// Anthropic: the end after message_stop comes late; the connection is
// kept, and a body held open ends the client's response promptly.
func TestFinishAnthropicStreamEndAfterMessageStop(t *testing.T) {
	release := make(chan struct{})
	upGone := make(chan struct{}, 4)
	var n atomic.Int64
	up, news := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, anthropicStreamEvents)
		w.(http.Flusher).Flush()
		if n.Add(1) <= 2 {
			<-release
			return
		}
		<-r.Context().Done() // held open
		upGone <- struct{}{}
	})
	g := newGW(t, anthropicOnlyConfig(up.URL), nil)
	gateway.SetFinishWait(g.stack, time.Minute) // the end comes when the test sends it: no race with the wait
	body := `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for i := range 2 {
		resp, br, _ := streamTo(t, g.srv.URL, "/v1/messages", body, fmt.Sprintf("an-%d", i), `"message_stop"`)
		release <- struct{}{}
		if _, err := io.Copy(io.Discard, br); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if c := resp.Trailer.Get("X-Belay-Cost-Usd"); c == "" {
			t.Errorf("call %d: no cost trailer", i)
		}
	}
	if v := news.Load(); v != 1 {
		t.Errorf("two anthropic streams opened %d upstream connections; want 1", v)
	}
	gateway.SetFinishWait(g.stack, gateway.AfterTerminatorWait)
	resp, br, done := streamTo(t, g.srv.URL, "/v1/messages", body, "an-held", `"message_stop"`)
	io.Copy(io.Discard, br)
	el := time.Since(done)
	resp.Body.Close()
	if el > endGuard {
		t.Errorf("held body: response ended %v after message_stop", el)
	}
	awaitCanceled(t, upGone)
	if r := g.run("an-held"); r.Error != "" || r.OutputTokens != 2 || r.InputTokens != 3 {
		t.Errorf("run %+v", r)
	}
}

// A client that closes its connection right after [DONE], while the
// gateway reads the upstream's end: the call succeeded; it is charged
// its reported usage, and not logged as failed.
func TestFinishClientLeavesDuringFinishBody(t *testing.T) {
	up, upGone := heldOpenUpstream(t)
	logs := &lockedLog{}
	g := newGWOpts(t, tokenLimitConfig(up.URL, "{max_turns: 5}"),
		gateway.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	u, _ := url.Parse(g.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nX-Belay-Run-Id: leave-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		u.Host, len(endStreamBody), endStreamBody)
	br := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // guard
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "[DONE]") {
			break
		}
	}
	conn.Close()
	awaitCanceled(t, upGone)
	g.srv.Close() // waits for the gateway's handler (its settle)
	r := g.run("leave-1")
	if r.Error != "" || r.OutputTokens != 1 || r.InputTokens != 3 {
		t.Errorf("run %+v; want no error, usage 3/1", r)
	}
	if l := logs.String(); strings.Contains(l, "failed") {
		t.Errorf("logs:\n%s", l)
	}
}

// Shutdown while the gateway reads an upstream's end: the call finishes
// promptly, and the stack closes.
func TestFinishShutdownDuringFinishBody(t *testing.T) {
	up, _ := heldOpenUpstream(t)
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 5}"), nil)
	resp, br, _ := streamTo(t, g.srv.URL, "/v1/chat/completions", endStreamBody, "", "[DONE]")
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closed <- g.stack.Close(ctx)
	}()
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Errorf("reading the end: %v", err)
	}
	resp.Body.Close()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stack.Close did not return")
	}
	if c := resp.Trailer.Get("X-Belay-Cost-Usd"); c == "" {
		t.Errorf("no cost trailer")
	}
}

// endGuard bounds how long a response may take to end after its
// terminator in these tests: a failure guard, far above the 100 ms the
// gateway waits, that an unbounded wait (a held-open upstream body) would
// cross.
const endGuard = 10 * time.Second
