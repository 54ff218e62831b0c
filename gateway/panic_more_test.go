package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/gateway"
)

// streamThenPanic serves a complete OpenAI stream (output, finish,
// [DONE]); the body's next Read (the gateway reading the body's end after
// the terminator) panics.
type streamThenPanic struct{}

func (streamThenPanic) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{"Content-Type": {"text/event-stream"}}
	body := &panickingBody{chunks: []string{
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}` + "\n\n",
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
		"data: [DONE]\n\n",
	}}
	return &http.Response{StatusCode: 200, Header: h, Body: body, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// A panic after a stream's terminator was relayed (reading the body's
// end) writes nothing after the whole answer, and the call, whose client
// has its whole answer, succeeds (a review found an error event after
// [DONE], and the run failed).
func TestPanicAfterTheTerminatorKeepsTheAnswer(t *testing.T) {
	g := newGWOpts(t, oneAlias("", openAIDep("d", "gpt-4o-mini", "http://127.0.0.1:1")), gateway.Options{Upstream: streamThenPanic{}})
	resp, body := g.do("POST", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "[DONE]") {
		t.Fatalf("status %d: %q; want the whole stream", resp.StatusCode, body)
	}
	_, after, _ := strings.Cut(body, "data: [DONE]")
	if strings.TrimSpace(after) != "" {
		t.Errorf("bytes written after the stream's terminator: %q", after)
	}
	if err := g.stack.Flush(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if rec := g.run(resp.Header.Get("X-Belay-Run-Id")); rec.Status != "succeeded" {
		t.Errorf("run status %q error %q; the client got a complete answer", rec.Status, rec.Error)
	}
}

// probePanics fails the first request with a 500 (opening the breaker),
// panics on the second (the half-open probe), and answers the rest.
type probePanics struct {
	n   atomic.Int32
	url string
}

func (u *probePanics) RoundTrip(r *http.Request) (*http.Response, error) {
	switch u.n.Add(1) {
	case 1:
		r.Body.Close()
		return &http.Response{StatusCode: 500, Header: http.Header{"Content-Type": {"application/json"}},
			Body: http.NoBody, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
	case 2:
		panic("upstream transport bug")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A panic in a half-open breaker's probe frees its probe slot: the next
// call probes again, and the deployment serves (a review found the
// ticket never reported, and the breaker refusing every later call, for
// good, while its answer promised a retry in 1 s).
func TestPanicInAProbeFreesTheBreaker(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, okCompletion, 10, 5) })
	y := strings.Replace(aliasRetrying(1, "", openAIDep("d", "gpt-4o-mini", up.URL)),
		"breaker: {consecutive_failures: 1000}", "breaker: {consecutive_failures: 1, open_for: 1ns}", 1)
	g := newGWOpts(t, y, gateway.Options{Upstream: &probePanics{}})
	if resp, body := g.do("POST", "/v1/chat/completions", chat); resp.StatusCode/100 != 5 {
		t.Fatalf("call 1 (upstream 500): %d %s", resp.StatusCode, body)
	}
	if resp, body := g.do("POST", "/v1/chat/completions", chat); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("call 2 (the probe panics): %d %s; want 500", resp.StatusCode, body)
	}
	for i := 3; i <= 5; i++ {
		resp, body := g.do("POST", "/v1/chat/completions", chat)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("call %d: status %d: %s; want the healthy upstream to serve it", i, resp.StatusCode, firstN(body, 200))
		}
	}
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// bodyPanics answers 200 and panics partway through the non-streamed body.
type bodyPanics struct{}

func (bodyPanics) RoundTrip(r *http.Request) (*http.Response, error) {
	r.Body.Close()
	if tr := httptrace.ContextClientTrace(r.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{}) // sent, as a real transport reports it
	}
	body := &panickingBody{chunks: []string{`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hel`}}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: body, Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// A non-streamed 2xx body cut by a panic is charged as any cut 2xx body,
// its prompt and output limit: the provider generated it whole (a review
// found it charged its prompt only).
func TestPanicInAnAnswersBodyChargesItAsCut(t *testing.T) {
	g := newGWOpts(t, oneAlias("", openAIDep("d", "gpt-4o-mini", "http://127.0.0.1:1")), gateway.Options{Upstream: bodyPanics{}})
	resp, _ := g.do("POST", "/v1/chat/completions", chat)
	if err := g.stack.Flush(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	rec := g.run(resp.Header.Get("X-Belay-Run-Id"))
	if rec.OutputTokens != 1000 || rec.InputTokens == 0 {
		t.Errorf("status %d; run charged %d+%d tokens, cost %s; want the prompt and the output limit (1000), as chargeCut charges a cut 2xx body",
			resp.StatusCode, rec.InputTokens, rec.OutputTokens, rec.Cost)
	}
}
