package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/gateway"
)

// panickingUpstream panics on the requests whose number (from 1) is in
// panicOn, and carries the others with http.DefaultTransport.
type panickingUpstream struct {
	n       atomic.Int32
	panicOn map[int32]bool
}

func (u *panickingUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if u.panicOn[u.n.Add(1)] {
		panic("upstream transport bug")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A panic on the request path (here in an Options.Upstream) fails the
// call with 500 in the client's dialect, is logged with its stack, and
// settles the call's turn: its run does not stay live waiting for a
// settle, holding its reservation (net/http dropped the connection, and
// the run was left live).
func TestPanicFailsTheCallAndSettlesItsTurn(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/messages") {
			io.WriteString(w, regress7Message)
			return
		}
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	var logs bytes.Buffer
	g := newGWOpts(t, oneAlias("", openAIDep("d", "gpt-4o-mini", up.URL), claudeDep(up.URL)), gateway.Options{
		Upstream: &panickingUpstream{panicOn: map[int32]bool{1: true, 2: true}},
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
	})

	resp, body := g.do("POST", "/v1/chat/completions", chat)
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("X-Should-Retry") != "false" ||
		!strings.Contains(body, `"type":"server_error"`) || !strings.Contains(body, "internal error") {
		t.Fatalf("status %d, x-should-retry %q: %s; want 500 server_error", resp.StatusCode, resp.Header.Get("X-Should-Retry"), body)
	}
	id := resp.Header.Get("X-Belay-Run-Id")
	if err := g.stack.Flush(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if n := g.stack.Runs.Live(); n != 0 {
		t.Errorf("%d runs live after the panicked call; want its one-call run ended", n)
	}
	if rec := g.run(id); rec.Status == "" || rec.Status == "running" || rec.Error == "" {
		t.Errorf("run %+v; want it ended with the call's failure", rec)
	}
	if !strings.Contains(logs.String(), "panic serving a model call") || !strings.Contains(logs.String(), "upstream transport bug") ||
		!strings.Contains(logs.String(), "panic_test.go") {
		t.Errorf("log lacks the panic and its stack:\n%s", logs.String())
	}

	// Anthropic's dialect, in a run the client names: the run's next call
	// is served.
	anthropicChat := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	resp, body = g.do("POST", "/v1/messages", anthropicChat, "X-Belay-Run-Id", "r")
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(body, `"type":"api_error"`) {
		t.Fatalf("anthropic: status %d: %s; want 500 api_error", resp.StatusCode, body)
	}
	resp, body = g.do("POST", "/v1/messages", anthropicChat, "X-Belay-Run-Id", "r")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the run's next call: status %d: %s", resp.StatusCode, body)
	}
	if rec := g.run("r"); rec.Turns != 2 {
		t.Errorf("run r %+v; want 2 turns (the panicked call's and the next)", rec)
	}
}

// panickingBody yields its chunks, then panics.
type panickingBody struct{ chunks []string }

func (b *panickingBody) Read(p []byte) (int, error) {
	if len(b.chunks) == 0 {
		panic("upstream body bug")
	}
	n := copy(p, b.chunks[0])
	b.chunks = b.chunks[1:]
	return n, nil
}

func (b *panickingBody) Close() error { return nil }

type streamPanics struct{}

func (streamPanics) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{"Content-Type": {"text/event-stream"}}
	body := &panickingBody{chunks: []string{
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n",
	}}
	return &http.Response{StatusCode: 200, Header: h, Body: body, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// A panic while a stream relays ends the client's stream with an error
// event (not a dropped connection or a clean end) and settles the turn.
func TestPanicMidStreamEndsItWithAnErrorEvent(t *testing.T) {
	g := newGWOpts(t, oneAlias("", openAIDep("d", "gpt-4o-mini", "http://127.0.0.1:1")), gateway.Options{Upstream: streamPanics{}})
	resp, body := g.do("POST", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"content":"Hel"`) {
		t.Fatalf("status %d: %s; want the stream's first output", resp.StatusCode, body)
	}
	if !strings.Contains(body, `"error"`) || !strings.Contains(body, "internal error") || strings.Contains(body, "[DONE]") {
		t.Errorf("stream %q; want it ended by an error event, without [DONE]", body)
	}
	if r := resp.Trailer.Get(failure.HeaderReason); r == "" {
		t.Errorf("trailers %v; want the failure's reason", resp.Trailer)
	}
	if err := g.stack.Flush(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if n := g.stack.Runs.Live(); n != 0 {
		t.Errorf("%d runs live; want the stream's run ended", n)
	}
	if rec := g.run(resp.Header.Get("X-Belay-Run-Id")); rec.Status != "failed" || rec.Cost <= 0 {
		t.Errorf("run %+v; want it failed and charged its prompt and output (estimated)", rec)
	}
}
