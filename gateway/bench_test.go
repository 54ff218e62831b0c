package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
)

// benchAnswer is a zero-latency upstream's answer: a small OpenAI chat
// completion with usage.
const benchAnswer = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the bench upstream.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`

const benchRequest = `{"model":"bench","messages":[{"role":"user","content":"Say hello."}]}`

// BenchmarkChatCompletion measures one sequential non-streaming request
// through a bare httputil.ReverseProxy (the baseline of the gateway's
// overhead goal) and through belay's gateway on SQLite and in memory, all
// against the same zero-latency upstream on loopback. Compare ns/op of the
// sub-benchmarks of one run; bench/gateway measures the goals themselves.
func BenchmarkChatCompletion(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchAnswer)
	}))
	b.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)

	run := func(b *testing.B, h http.Handler, path string, parallel bool) {
		srv := httptest.NewServer(h)
		b.Cleanup(srv.Close)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		do := func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader([]byte(benchRequest)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-bench")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d: %s", resp.StatusCode, body)
			}
		}
		do()
		cpu0 := processCPU(b)
		b.ResetTimer()
		defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
		if parallel {
			b.SetParallelism(16) // 32 clients on 2 cores: saturation
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					do()
				}
			})
			return
		}
		for b.Loop() {
			do()
		}
	}
	for _, parallel := range []bool{false, true} {
		mode := "seq"
		if parallel {
			mode = "par"
		}
		b.Run("direct/"+mode, func(b *testing.B) {
			run(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, benchAnswer)
			}), "/v1/chat/completions", parallel)
		})
		b.Run("proxy/"+mode, func(b *testing.B) {
			p := httputil.NewSingleHostReverseProxy(target)
			p.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
			run(b, p, "/v1/chat/completions", parallel)
		})
		for _, storeKind := range []string{"memory", "sqlite"} {
			b.Run("belay-"+storeKind+"/"+mode, func(b *testing.B) {
				storeURL := "memory://"
				if storeKind == "sqlite" {
					storeURL = "sqlite://" + filepath.Join(b.TempDir(), "belay.db")
				}
				y := fmt.Sprintf(`
store: %s
models:
  - alias: bench
    deployments:
      - {name: bench-1, provider: openai, model: gpt-4o-mini, base_url: %s/v1, api_key: sk-up}
`, storeURL, up.URL)
				cfg, err := config.Parse([]byte(y), "bench.yaml", func(string) (string, bool) { return "", false })
				if err != nil {
					b.Fatal(err)
				}
				st, err := gateway.Build(context.Background(), cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { st.Close(context.Background()) })
				run(b, st.Server.Handler(), "/v1/chat/completions", parallel)
			})
		}
	}
}

// processCPU returns the CPU time (user and system) this process has used:
// per request, the work of client, gateway and upstream together, which
// varies less between runs on a shared machine than the wall time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
