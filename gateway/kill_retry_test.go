package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// A deployment killed while a call retries on it gets no more of the
// call's attempts: the kill flag is checked before each attempt, not only
// a deployment's first (an adversarial review: 3 of a call's 4 attempts
// went to the deployment after its kill had returned). With no other
// deployment the call is refused as killed.
func TestKillStopsRetriesOnTheDeployment(t *testing.T) {
	var calls atomic.Int32
	killed := make(chan struct{})
	first := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			close(first)
			<-killed // answered once the kill has returned
		}
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"boom","type":"server_error"}}`)
	})
	g := newGW(t, aliasRetrying(4, "admin_key: adm\n", openAIDep("d", "gpt-4o", up.URL)), nil)
	go func() {
		<-first
		defer close(killed)
		resp, b := g.do("POST", "/admin/kill", `{"target":"deployment","name":"d","reason":"runaway"}`, "Authorization", "Bearer adm")
		if resp.StatusCode != 200 {
			t.Errorf("kill: %d %s", resp.StatusCode, b)
		}
	}()
	resp, b := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "k1")
	if n := calls.Load(); n != 1 || resp.Header.Get("X-Belay-Attempts") != "1" {
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

// A provider model killed while its first deployment fails with a
// degraded failure (here 401: the router falls back at once): the kill
// passes over the fallback, and the call is answered as killed, naming
// its last failure, not with the first deployment's 401 (an adversarial
// review, from reading).
func TestKillStopsTheFallback(t *testing.T) {
	var calls atomic.Int32
	killed := make(chan struct{})
	first := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			close(first)
			<-killed
		}
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`)
	})
	g := newGW(t, aliasRetrying(4, "admin_key: adm\n", openAIDep("d", "gpt-4o", up.URL), openAIDep("e", "gpt-4o", up.URL)), nil)
	go func() {
		<-first
		defer close(killed)
		resp, b := g.do("POST", "/admin/kill", `{"target":"model","name":"gpt-4o","reason":"runaway"}`, "Authorization", "Bearer adm")
		if resp.StatusCode != 200 {
			t.Errorf("kill: %d %s", resp.StatusCode, b)
		}
	}()
	resp, b := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "k2")
	if n := calls.Load(); n != 1 {
		t.Errorf("%d upstream calls; want 1 (the fallback passed over)", n)
	}
	_, code, msg := decodeError(t, b)
	if resp.StatusCode != http.StatusForbidden || code != "killed" || !strings.Contains(msg, "model gpt-4o: runaway") ||
		!strings.Contains(msg, "the last failed with authentication") {
		t.Errorf("status %d: %s; want 403 killed naming the flag and the last failure", resp.StatusCode, b)
	}
}
