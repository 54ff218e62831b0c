package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A provider's redirect is an answer to classify, not one to follow: the
// attempts go straight to the transport (no http.Client), so the upstream
// request, with the deployment's key in it, never goes where a 307
// points. The redirect is an unknown failure (permanent: not retried, no
// fallback) whose message names its Location.
func TestUpstreamRedirectIsNotFollowed(t *testing.T) {
	var elsewhere, d2 atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	}))
	t.Cleanup(other.Close)
	gw, _ := twoDeployments(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}, func(w http.ResponseWriter, r *http.Request) {
		d2.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	}, oneAttempt)
	resp, err := http.Post(gw.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if elsewhere.Load() != 0 {
		t.Errorf("the redirect was followed: its target got %d requests", elsewhere.Load())
	}
	want := "redirect (307) to " + other.URL + "/v1/chat/completions, not followed; check the deployment's base_url"
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), want) || d2.Load() != 0 {
		t.Errorf("status %d, body %s, d2 called %d times; want 500 naming %q, no fallback", resp.StatusCode, b, d2.Load(), want)
	}
}
