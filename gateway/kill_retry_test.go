package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// killOnFirst is an upstream that holds its first request until a kill
// flag has been set through the gateway's admin API (kill), then answers
// every request with status and body.
type killOnFirst struct {
	calls         atomic.Int32
	first, killed chan struct{}
}

func newKillOnFirst(t *testing.T, status int, body string) (*killOnFirst, string) {
	k := &killOnFirst{first: make(chan struct{}), killed: make(chan struct{})}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if k.calls.Add(1) == 1 {
			close(k.first)
			<-k.killed // answered once the kill has returned
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	})
	return k, up.URL
}

// kill sets the flag flag (an /admin/kill body) on g once the first
// request is upstream, and lets that request be answered.
func (k *killOnFirst) kill(t *testing.T, g *gw, flag string) {
	go func() {
		<-k.first
		defer close(k.killed)
		resp, b := g.do("POST", "/admin/kill", flag, "Authorization", "Bearer adm")
		if resp.StatusCode != 200 {
			t.Errorf("kill: %d %s", resp.StatusCode, b)
		}
	}()
}

// A deployment killed while a call retries on it gets no more of the
// call's attempts: the kill flag is checked before each attempt, not only
// a deployment's first (an adversarial review: 3 of a call's 4 attempts
// went to the deployment after its kill had returned). With no other
// deployment the call is refused as killed.
func TestKillStopsRetriesOnTheDeployment(t *testing.T) {
	k, url := newKillOnFirst(t, http.StatusInternalServerError, `{"error":{"message":"boom","type":"server_error"}}`)
	g := newGW(t, aliasRetrying(4, "admin_key: adm\n", openAIDep("d", "gpt-4o", url)), nil)
	k.kill(t, g, `{"target":"deployment","name":"d","reason":"runaway"}`)
	resp, b := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "k1")
	if n := k.calls.Load(); n != 1 || resp.Header.Get("X-Belay-Attempts") != "1" {
		t.Errorf("%d upstream calls, attempts %q; want 1 (none after the kill)", n, resp.Header.Get("X-Belay-Attempts"))
	}
	_, code, msg := decodeError(t, b)
	if resp.StatusCode != http.StatusForbidden || code != "killed" || !strings.Contains(msg, "deployment d: runaway") ||
		!strings.Contains(msg, "attempts made: 1") || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("status %d: %s; want 403 killed naming the flag and the attempt made", resp.StatusCode, b)
	}
	if rec := g.run("k1"); rec.Status == "stopped" {
		t.Errorf("run %+v; a deployment's kill refuses the call, it does not stop the run", rec)
	}
}

// A model killed, by its provider name or by the alias the client named,
// while the call's first deployment fails with a degraded failure (here
// 401: the router falls back at once): the kill passes over the fallback,
// and the call is answered as killed, naming its last failure, not with
// the first deployment's 401 (an adversarial review, from reading).
func TestKillStopsTheFallback(t *testing.T) {
	for _, name := range []string{"gpt-4o", "m"} {
		t.Run(name, func(t *testing.T) {
			k, url := newKillOnFirst(t, http.StatusUnauthorized, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`)
			g := newGW(t, aliasRetrying(4, "admin_key: adm\n", openAIDep("d", "gpt-4o", url), openAIDep("e", "gpt-4o", url)), nil)
			k.kill(t, g, `{"target":"model","name":"`+name+`","reason":"runaway"}`)
			resp, b := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "k2")
			if n := k.calls.Load(); n != 1 {
				t.Errorf("%d upstream calls; want 1 (the fallback passed over)", n)
			}
			_, code, msg := decodeError(t, b)
			if resp.StatusCode != http.StatusForbidden || code != "killed" || !strings.Contains(msg, "model "+name+": runaway") ||
				!strings.Contains(msg, "the last failed with authentication") {
				t.Errorf("status %d: %s; want 403 killed naming the flag and the last failure", resp.StatusCode, b)
			}
			if rec := g.run("k2"); rec.Status == "stopped" {
				t.Errorf("run %+v; a model's kill refuses the call, it does not stop the run", rec)
			}
			// The model's next call is refused before it counts in the run.
			resp, b = g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "k2")
			if _, code, _ := decodeError(t, b); resp.StatusCode != http.StatusForbidden || code != "killed" || k.calls.Load() != 1 {
				t.Errorf("next call: status %d: %s; want 403 killed, nothing sent", resp.StatusCode, b)
			}
		})
	}
}
