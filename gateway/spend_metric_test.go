package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// spendLine is one belay_spend_usd_total sample of /metrics.
var spendLine = regexp.MustCompile(`(?m)^belay_spend_usd_total\{tenant="([^"]*)"\} (\S+)$`)

// spendOf returns belay_spend_usd_total by tenant from a /metrics text.
func spendOf(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range spendLine.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("bad value %q", m[2])
		}
		out[m[1]] = v
	}
	return out
}

// belay_spend_usd_total under concurrent calls of two tenants and
// concurrent scrapes (run with -race): the final value is the exact sum,
// and the exposition has its HELP and TYPE counter lines.
func TestSpendMetricConcurrent(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 100, 50) // gpt-4o: $0.00075
	})
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
tenants: [{name: acme, key: vk-a}, {name: "b.ob:x", key: vk-b}]
models:
  - alias: m
    deployments:
      - `+openAIDep("d", "gpt-4o", up.URL)+`
`, nil)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "vk-a"
			if i%2 == 1 {
				key = "vk-b"
			}
			if resp, b := g.do("POST", "/v1/chat/completions", chat, "Authorization", "Bearer "+key); resp.StatusCode != 200 {
				t.Errorf("status %d: %s", resp.StatusCode, b)
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.do("GET", "/metrics", "")
		}()
	}
	wg.Wait()
	_, text := g.do("GET", "/metrics", "")
	i := strings.Index(text, "# HELP belay_spend_usd_total")
	if i < 0 {
		t.Fatalf("no HELP line")
	}
	t.Logf("%s", text[i:i+strings.Index(text[i:], "\n# HELP belay_")])
	if !strings.Contains(text, "# TYPE belay_spend_usd_total counter") {
		t.Errorf("no TYPE counter line")
	}
	s := spendOf(t, text)
	if s["acme"] != 0.015 || s["b.ob:x"] != 0.015 {
		t.Errorf("spend acme %v, b.ob:x %v; want 0.015 each", s["acme"], s["b.ob:x"])
	}
}

// A cost that saturates budget.USD (an upstream that reports an absurd
// usage), added again, saturates the counter: it never goes down (an
// adversarial review saw an int64 sum wrap to -2e-12).
func TestSpendMetricNeverGoesDown(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 100, int64(1e18)) // gpt-4o: $10/M · 1e18 saturates
	})
	g := newGW(t, `
listen: 127.0.0.1:0
store: memory://
limits: {}
models:
  - alias: m
    deployments:
      - `+openAIDep("d", "gpt-4o", up.URL)+`
`, nil)
	var last float64
	for n := range 3 {
		resp, b := g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hello"}]}`)
		_, text := g.do("GET", "/metrics", "")
		v := spendOf(t, text)["default"]
		t.Logf("call %d: status %d, X-Belay-Cost-Usd %s; belay_spend_usd_total %v", n+1, resp.StatusCode, resp.Header.Get("X-Belay-Cost-Usd"), v)
		if resp.StatusCode != 200 {
			t.Logf("body %.200s", b)
		}
		if v < last || v < 0 {
			t.Errorf("call %d: belay_spend_usd_total %v after %v: a counter went down", n+1, v, last)
		}
		last = v
	}
}
