package gateway_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/gateway"
)

// The gateway keeps upstream connections alive between calls, and
// Stack.Close closes them: a stack that is thrown away (eval builds one
// per suite) does not hold its upstreams' sockets for the process's life.
func TestStackCloseClosesIdleUpstreamConnections(t *testing.T) {
	states := make(chan http.ConnState, 16)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew || s == http.StateClosed {
			states <- s
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 5}"), nil)
	for i := range 2 {
		if resp, body := g.do("POST", "/v1/chat/completions", chat); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if s := <-states; s != http.StateNew {
		t.Fatalf("first state %v; want new", s)
	}
	select {
	case s := <-states:
		t.Fatalf("after two calls the upstream saw %v; want one connection kept alive", s)
	default:
	}
	if err := g.stack.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-states:
		if s != http.StateClosed {
			t.Errorf("after Stack.Close the upstream saw %v; want its connection closed", s)
		}
	case <-time.After(10 * time.Second): // a failure guard, not a wait
		t.Error("the upstream's connection was still open 10s after Stack.Close")
	}
}

// belay_breaker_opens_total counts each time a deployment's breaker
// opens, which the state gauge misses when the open period falls between
// two scrapes.
func TestBreakerOpensAreCounted(t *testing.T) {
	bad := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"boom","type":"server_error"}}`)
	})
	good := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	})
	logged := lineSignal{match: "breaker open", lines: make(chan string, 4)}
	g := newGWOpts(t, `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
breaker: {consecutive_failures: 2, open_for: 1h}
models:
  - alias: m
    deployments:
      - {name: d1, provider: openai, model: gpt-4o-mini, base_url: `+bad.URL+`/v1, api_key: sk-1}
      - {name: d2, provider: openai, model: gpt-4o-mini, base_url: `+good.URL+`/v1, api_key: sk-2}
`, gateway.Options{Logger: slog.New(slog.NewTextHandler(logged, nil))})
	for i := range 4 {
		if resp, body := g.do("POST", "/v1/chat/completions", chat); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
	}
	_, metrics := g.do("GET", "/metrics", "")
	for _, want := range []string{`belay_breaker_opens_total{deployment="d1"} 1`, `belay_breaker_state{deployment="d1"} 2`,
		`belay_attempts_total{deployment="d1",reason="server_error"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(metrics, `belay_breaker_opens_total{deployment="d2"}`) {
		t.Error("d2's breaker counted as opened")
	}
	select { // logged by the call that opened it, before its answer
	case line := <-logged.lines:
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "deployment=d1 from=closed") {
			t.Errorf("breaker log line %q; want a WARN naming d1, from closed", line)
		}
	default:
		t.Error("the breaker's opening was not logged")
	}
}

// A stream whose upstream sends its body's end (the last chunk) after the
// terminator, in a packet of its own, leaves its connection open for the
// next call: the gateway reads the end before it lets the body go.
// Closing the body at [DONE] closed the connection, and the next call
// dialed a new one (5% of bench/gateway's sequential streams).
func TestStreamKeepsUpstreamConnectionWhenItsEndComesLate(t *testing.T) {
	release := make(chan struct{})
	up, news := countingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		<-release // the last chunk goes out when the handler returns
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 5}"), nil)
	gateway.SetFinishWait(g.stack, time.Minute) // the end comes when the test sends it: no race with the wait
	for i := range 3 {
		req, _ := http.NewRequest("POST", g.srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: status %d", i, resp.StatusCode)
		}
		// The client has the terminator before the upstream sends its end.
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && sc.Text() != "data: [DONE]" {
		}
		if sc.Text() != "data: [DONE]" {
			t.Fatalf("call %d: the stream ended without [DONE] (%v)", i, sc.Err())
		}
		release <- struct{}{}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatalf("call %d: reading the stream's end: %v", i, err)
		}
		resp.Body.Close()
	}
	if n := news.Load(); n != 1 {
		t.Errorf("three streams in a row opened %d upstream connections; want 1 kept alive", n)
	}
}

// countingUpstream starts an upstream serving h and counts the
// connections it accepts.
func countingUpstream(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var news atomic.Int64
	up := httptest.NewUnstartedServer(h)
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			news.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	return up, &news
}
