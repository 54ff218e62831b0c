package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// An upstream that answers a request without "stream": true with an event
// stream fails the attempt as a server error naming what happened (not a
// stream cut before its terminator), and the chain falls back.
func TestEventStreamNotAskedFor(t *testing.T) {
	sse := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\ndata: [DONE]\n\n")
	})
	ok := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, oneAlias("", openAIDep("sse", "gpt-4o-mini", sse.URL), openAIDep("ok", "gpt-4o-mini", ok.URL)), nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat)
	if resp.StatusCode != 200 || resp.Header.Get("X-Belay-Deployment") != "ok" || resp.Header.Get("X-Belay-Attempts") != "2" { // no retry on the same deployment
		t.Fatalf("status %d deployment %q attempts %q: %s", resp.StatusCode, resp.Header.Get("X-Belay-Deployment"), resp.Header.Get("X-Belay-Attempts"), body)
	}

	alone := newGW(t, oneAlias("", openAIDep("sse", "gpt-4o-mini", sse.URL)), nil)
	resp, body = alone.do("POST", "/v1/chat/completions", chat)
	typ, _, msg := decodeError(t, body)
	if resp.StatusCode/100 != 5 || typ != "server_error" || !strings.Contains(msg, "asked for no stream with an event stream") || strings.Contains(msg, "terminator") {
		t.Fatalf("status %d type %q message %q", resp.StatusCode, typ, msg)
	}
}
