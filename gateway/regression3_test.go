package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/store"
)

// Newcomer finding (session 2): a streaming upstream that sent its 200
// headers and then hung was reported "permanent: unknown (HTTP 200)", with
// "no response headers within timeouts.first_byte", and neither retried
// nor sent to the fallback. It is a transient timeout: the same call must
// succeed on the second deployment.
func TestRegression_StreamHangAfterHeadersIsTimeout(t *testing.T) {
	var hung atomic.Int64
	hang := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hung.Add(1)
		w.Header().Set("Content-Type", "application/json") // as a plain 200 would start
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // headers, then nothing
	})
	ok := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		} {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	g := newGW(t, oneAlias("timeouts: {first_byte: 50ms, first_token: 50ms, idle: 5s}\n",
		openAIDep("hang", "gpt-4o-mini", hang.URL), openAIDep("ok", "gpt-4o-mini", ok.URL)), nil)
	resp, body := g.do("POST", "/v1/chat/completions",
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") || resp.Header.Get("X-Belay-Deployment") != "ok" {
		t.Fatalf("status %d deployment %q body %s", resp.StatusCode, resp.Header.Get("X-Belay-Deployment"), body)
	}
	if hung.Load() == 0 {
		t.Fatal("the hanging deployment was never tried")
	}
	_, metrics := g.do("GET", "/metrics", "")
	if !strings.Contains(metrics, `reason="timeout"`) {
		t.Fatalf("no attempt counted as a timeout in /metrics")
	}
}

// Newcomer finding (session 2): after the gateway stopped, the runs it had
// named itself stayed "running" in the store for ever. At shutdown they
// end by their last call's outcome; a run the client named is left running
// (another replica may serve it).
func TestRegression_ShutdownEndsGatewayNamedRuns(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", up.URL)), nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	named := resp.Header.Get("X-Belay-Run-Id")
	if resp, body = g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "client-run"); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if err := g.stack.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if rec, err := g.store.GetRun(ctx, named); err != nil || rec.Status != store.RunSucceeded || rec.Turns != 1 {
		t.Fatalf("gateway-named run after shutdown: %+v, %v; want succeeded with 1 turn", rec, err)
	}
	if rec, err := g.store.GetRun(ctx, "client-run"); err != nil || rec.Status != store.RunRunning {
		t.Fatalf("client-named run after shutdown: %+v, %v; want running", rec, err)
	}
}
