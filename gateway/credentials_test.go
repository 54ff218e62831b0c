package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/gateway"
)

// An upstream that rejects a deployment's API key (401, 403) is logged at
// error level as rejected credentials, naming the deployment and the
// status, and never as a degradation (newcomer finding: "degraded:
// authentication"), whether a fallback then serves the call or not.
func TestRejectedCredentialsLoggedAsError(t *testing.T) {
	reject := func(status int, typ, code, msg string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"code":%q}}`, msg, typ, code)
		}
	}
	ok := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	}
	bad401 := reject(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-1***")
	bad403 := reject(403, "permission_error", "", "Your API key does not have permission to use the specified resource.")
	cases := []struct {
		name       string
		h1, h2     http.HandlerFunc
		wantStatus int
		wantLines  []string
	}{
		{"fallback serves", bad401, ok, 200, []string{
			`level=ERROR msg="upstream rejected the credentials of deployment d1 (HTTP 401): check its api_key" run=`,
		}},
		{"both rejected", bad403, bad401, 401, []string{
			`level=ERROR msg="upstream denied deployment d1 permission (HTTP 403): check its api_key and what its account may use (see provider_message)" run=`,
			`level=ERROR msg="upstream rejected the credentials of deployment d2 (HTTP 401): check its api_key" run=`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logged bytes.Buffer
			var mu sync.Mutex
			g := newGWOpts(t, twoDeploymentYAML(oneAttempt, upstream(t, c.h1).URL, upstream(t, c.h2).URL),
				gateway.Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
			resp, body := g.do("POST", "/v1/chat/completions", chat)
			if resp.StatusCode != c.wantStatus {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, body, c.wantStatus)
			}
			g.stack.Close(t.Context())
			mu.Lock()
			log := logged.String()
			mu.Unlock()
			for _, want := range c.wantLines {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %s:\n%s", want, log)
				}
			}
			if n := strings.Count(log, "level=ERROR"); n != len(c.wantLines) {
				t.Errorf("%d error lines, want %d:\n%s", n, len(c.wantLines), log)
			}
			if strings.Contains(log, "degraded") || strings.Contains(log, "model call failed") {
				t.Errorf("log calls the rejection a degradation or repeats it:\n%s", log)
			}
		})
	}
}

// A self-hosted deployment (vLLM, Ollama) may have no api_key: its calls
// carry no credential, neither a key of belay's nor the client's key to
// belay.
func TestDeploymentWithoutAPIKey(t *testing.T) {
	var auth atomic.Value
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		auth.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("X-Api-Key"))
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, oneAlias("tenants: [{name: t, key: sk-client}]\npricing: {llama: {input: 0, output: 0}}\n", fmt.Sprintf("{name: local, provider: openai, model: llama, base_url: %q}", up.URL+"/v1")), nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat, "Authorization", "Bearer sk-client")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := auth.Load(); got != "|" {
		t.Errorf("upstream saw credentials %q; want none", got)
	}
}
