package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The bench re-executes itself for its helper processes, so that the
// upstream, the bare proxy and belay each run in a process of their own and
// the load generator measures them all from outside:
//
//	-role upstream                 the zero-latency OpenAI-compatible upstream
//	-role proxy -target URL        a bare httputil.ReverseProxy in front of URL
//	-role relay -target URL        a minimal parsing relay in front of URL (diagnostic)
//
// Each prints "LISTEN host:port" on stdout once it accepts connections.

// permanentMarker in a request's text makes the upstream answer 400
// context_length_exceeded, the OpenAI wire form of a permanent failure.
const permanentMarker = "BENCH-PERMANENT-400"

// Fixed answers of the upstream: a small body with usage, as a real
// provider sends it.
const (
	answerText   = "Hello from the bench upstream."
	answerJSON   = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the bench upstream.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`
	chunkPrefix  = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini",`
	permanentErr = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
)

// streamEvents are the upstream's stream, one event per write and flush:
// a role chunk, two content chunks, the finish chunk, then (when asked)
// the usage chunk and the terminator.
var streamEvents = []string{
	chunkPrefix + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	chunkPrefix + `"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	chunkPrefix + `"choices":[{"index":0,"delta":{"content":" from the bench upstream."},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	chunkPrefix + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n",
}

const (
	usageEvent = chunkPrefix + `"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}` + "\n\n"
	doneEvent  = "data: [DONE]\n\n"
)

// upstreamStats counts what the upstream answered; GET /stats returns it.
type upstreamStats struct {
	Requests  atomic.Int64 `json:"-"`
	Permanent atomic.Int64 `json:"-"`
}

func (s *upstreamStats) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"requests":%d,"permanent":%d}`, s.Requests.Load(), s.Permanent.Load()), nil
}

// upstreamHandler is a zero-latency OpenAI-compatible upstream: POST
// /v1/chat/completions answers at once, streaming or not; GET /stats
// returns the counters.
func upstreamHandler(st *upstreamStats) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		st.Requests.Add(1)
		if bytes.Contains(body, []byte(permanentMarker)) {
			st.Permanent.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, permanentErr)
			return
		}
		var req struct {
			Stream        bool `json:"stream"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(answerJSON)))
			_, _ = io.WriteString(w, answerJSON)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		fl, _ := w.(http.Flusher)
		send := func(ev string) {
			_, _ = io.WriteString(w, ev)
			if fl != nil {
				fl.Flush()
			}
		}
		for _, ev := range streamEvents {
			send(ev)
		}
		if req.StreamOptions.IncludeUsage {
			send(usageEvent)
		}
		send(doneEvent)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		b, _ := st.MarshalJSON()
		_, _ = w.Write(b)
	})
	return mux
}

// bareProxy is the baseline: httputil.ReverseProxy with a transport tuned
// only for keep-alive to one host, nothing else.
func bareProxy(target *url.URL) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
		},
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        512,
			MaxIdleConnsPerHost: 512,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// parsingRelay is a diagnostic floor (-relay): the least a gateway that
// routes on the request's model must do. It reads the whole body, decodes
// its model and stream fields with encoding/json, sends the body to target
// with a keep-alive client, and relays the answer: a non-streamed one read
// whole and written with its Content-Length, a streamed one flushed after
// each read. No limits, records, retries or classification.
func parsingRelay(target *url.URL) http.Handler {
	client := &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target.String()+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		if !req.Stream {
			answer, err := io.ReadAll(resp.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(answer)
			return
		}
		w.WriteHeader(resp.StatusCode)
		fl, _ := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				if fl != nil {
					fl.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	})
}

// runRole serves one helper role until the process is killed.
func runRole(role, target string) error {
	var h http.Handler
	switch role {
	case "upstream":
		h = upstreamHandler(&upstreamStats{})
	case "proxy":
		u, err := url.Parse(target)
		if err != nil || u.Host == "" {
			return fmt.Errorf("proxy: -target %q is not a URL", target)
		}
		h = bareProxy(u)
	case "relay":
		u, err := url.Parse(target)
		if err != nil || u.Host == "" {
			return fmt.Errorf("relay: -target %q is not a URL", target)
		}
		h = parsingRelay(u)
	default:
		return fmt.Errorf("unknown -role %q; want upstream, proxy or relay", role)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	return srv.Serve(ln)
}

// child is a helper process started by the bench.
type child struct {
	name string
	cmd  *exec.Cmd
	addr string // host:port it listens on
}

// startChild starts cmd and, when wantListen is set, waits (up to wait) for
// its "LISTEN host:port" line. The child is killed if the bench dies
// (Pdeathsig).
func startChild(ctx context.Context, name string, cmd *exec.Cmd, logPath string, wantListen bool, wait time.Duration) (*child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	var out io.ReadCloser
	if wantListen {
		if out, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
	} else {
		cmd.Stdout = logf
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd}
	if !wantListen {
		return c, nil
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
				addrc <- a
				break
			}
		}
		_, _ = io.Copy(logf, out)
	}()
	select {
	case c.addr = <-addrc:
		return c, nil
	case <-time.After(wait):
	case <-ctx.Done():
	}
	c.stop()
	return nil, fmt.Errorf("%s did not start listening within %v (log: %s)", name, wait, logPath)
}

// stop kills the child's process group and waits for it.
func (c *child) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHTTP polls url until it answers 200 or wait passes.
func waitHTTP(ctx context.Context, url string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("not ready")
			}
			return fmt.Errorf("%s: %w after %v", url, err, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
