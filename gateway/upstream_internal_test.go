package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/belay-run/belay/internal/h1"
)

// splitUpstream sends a plain-http request that no proxy takes through
// internal/h1, and a proxied one (or https) through net/http's Transport,
// which speaks to the proxy.
func TestSplitUpstreamRoutes(t *testing.T) {
	direct := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "direct "+r.Proto)
	}))
	t.Cleanup(direct.Close)
	var proxied []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied = append(proxied, r.Method+" "+r.RequestURI) // absolute form: a proxy request
		io.WriteString(w, "via proxy")
	}))
	t.Cleanup(proxy.Close)
	proxyURL, _ := url.Parse(proxy.URL)
	proxyFor := func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "upstream.test" { // a host the environment's proxy takes
			return proxyURL, nil
		}
		return nil, nil
	}
	var stdDials []string
	dial := (&net.Dialer{}).DialContext
	s := &splitUpstream{
		plain: h1.New(h1.Options{}),
		std: &http.Transport{Proxy: proxyFor, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			stdDials = append(stdDials, addr)
			return dial(ctx, network, addr)
		}},
		proxy: proxyFor,
	}
	get := func(u string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
		resp, err := s.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get(direct.URL + "/v1/chat/completions"); got != "direct HTTP/1.1" || len(stdDials) != 0 {
		t.Errorf("plain http, no proxy: %q with net/http dials %v; want it answered through h1 (no net/http dial)", got, stdDials)
	}
	if got := get("http://upstream.test/v1/chat/completions"); got != "via proxy" || len(stdDials) != 1 || stdDials[0] != proxyURL.Host ||
		len(proxied) != 1 || proxied[0] != "POST http://upstream.test/v1/chat/completions" {
		t.Errorf("proxied: %q, net/http dials %v, proxy saw %v; want net/http through the proxy", got, stdDials, proxied)
	}
	// https never goes to h1 (it would refuse it with h1.ErrScheme).
	req, _ := http.NewRequest(http.MethodPost, "https://127.0.0.1:1/v1/chat/completions", strings.NewReader("{}"))
	if _, err := s.RoundTrip(req); err == nil || errors.Is(err, h1.ErrScheme) {
		t.Errorf("https: %v; want net/http's dial error, not h1's", err)
	}
}
