package gateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
