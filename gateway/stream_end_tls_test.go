package gateway_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/gateway"
)

// Over https (net/http's Transport, HTTP/1.1 and HTTP/2), a stream whose
// upstream end comes late keeps its connection, and one whose upstream
// holds its body open ends the client's response promptly.
func TestFinishOverNetHTTPTransport(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "h1", true: "h2"}[h2], func(t *testing.T) {
			var news atomic.Int64
			release := make(chan struct{})
			var n atomic.Int64
			upGone := make(chan struct{}, 1)
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				openAIStreamHead(w)
				if n.Add(1) <= 2 {
					<-release
					return
				}
				<-r.Context().Done()
				upGone <- struct{}{}
			}))
			up.EnableHTTP2 = h2
			up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					news.Add(1)
				}
			}
			up.StartTLS()
			t.Cleanup(up.Close)
			tr := up.Client().Transport.(*http.Transport).Clone()
			g := newGWOpts(t, tokenLimitConfig(up.URL, "{max_turns: 50}"), gateway.Options{Upstream: tr})
			gateway.SetFinishWait(g.stack, time.Minute) // the end comes when the test sends it: no race with the wait
			for range 2 {
				resp, br, _ := streamTo(t, g.srv.URL, "/v1/chat/completions", endStreamBody, "", "[DONE]")
				release <- struct{}{}
				io.Copy(io.Discard, br)
				resp.Body.Close()
			}
			if v := news.Load(); v != 1 {
				t.Errorf("%d upstream connections for two streams; want 1", v)
			}
			gateway.SetFinishWait(g.stack, gateway.AfterTerminatorWait)
			resp, br, done := streamTo(t, g.srv.URL, "/v1/chat/completions", endStreamBody, "", "[DONE]")
			rest, _ := io.ReadAll(br)
			el := time.Since(done)
			resp.Body.Close()
			if el > endGuard || strings.TrimSpace(string(rest)) != "" {
				t.Errorf("held body: end after %v, rest %q", el, rest)
			}
			awaitCanceled(t, upGone)
		})
	}
}
