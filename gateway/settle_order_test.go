package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

func tokenLimitConfig(up string, limits string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 3, base: 1ms, cap: 2ms, max_retry_after: 30s}
breaker: {consecutive_failures: 1000}
limits: %s
models:
  - alias: m
    deployments:
      - %s
`, limits, openAIDep("d", "gpt-4o-mini", up))
}

// A client that sends its next call in the same run right after its
// answer is admitted against the step's actual usage, as when the gateway
// settled before answering: the answer now goes first and the settle runs
// after the handler returned, but the run's next admission waits for a
// step that is settling (run.Run.Admit). Half the follow-ups come on the
// same keep-alive connection, half on a new one (the first call asked for
// Connection: close). Each call reserves ~410 tokens of the 700-token
// limit and uses 15: two sequential calls fit.
func TestFollowUpRightAfterAnswerSeesSettledTokens(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 50, deadline: 1m, max_cost_usd: 5, max_tokens: 700}"), nil)
	body := `{"model":"m","max_tokens":400,"messages":[{"role":"user","content":"hello"}]}`
	refused := 0
	const n = 300
	for i := range n {
		id := fmt.Sprintf("follow-%d", i)
		conn := "keep-alive"
		if i%2 == 1 {
			conn = "close"
		}
		resp, b := g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", id, "Connection", conn)
		if resp.StatusCode != 200 {
			t.Fatalf("first call: %d %s", resp.StatusCode, b)
		}
		resp, b = g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", id)
		if resp.StatusCode != 200 {
			refused++
			if refused == 1 {
				t.Logf("run %s second call: %d %s", id, resp.StatusCode, b)
			}
		}
	}
	if refused > 0 {
		t.Errorf("%d of %d follow-up calls sent right after the first call's answer were refused; want 0", refused, n)
	}
}

// A client that stops reading a large non-streamed answer (a peer that
// vanished without a RST, or a slow reader) keeps the gateway's handler
// blocked in Write: such an answer is settled before it is written (a
// regression: written first, the call stayed unsettled, with no cost in
// the run, while the client stalled). Real time: the stall is a socket's.
func TestStalledClientLeavesTheCallSettled(t *testing.T) {
	big := strings.Repeat("x", 24<<20) // past loopback socket buffers
	served := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini",
"choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],
"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, big)
		close(served)
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 50, deadline: 1m, max_cost_usd: 5}"), nil)

	conn, err := net.Dial("tcp", strings.TrimPrefix(g.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"m","max_tokens":400,"messages":[{"role":"user","content":"hello"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Belay-Run-Id: stall-1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	<-served // the gateway has the answer; the client never reads it

	ctx := context.Background()
	r, err := g.stack.Runs.Get(ctx, "stall-1")
	if err != nil {
		t.Fatal(err)
	}
	// Flush returns at once before the call is quoted, and once it has
	// settled; it blocks while a quoted call waits to settle. Count the
	// 100 ms slices it blocks (20 in a row: the call is stuck).
	settled, blocked := false, 0
	deadline := time.Now().Add(20 * time.Second)
	for !settled && blocked < 20 && time.Now().Before(deadline) {
		fctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		ferr := r.Flush(fctx)
		cancel()
		switch {
		case ferr != nil:
			blocked++
		case r.Record().Cost > 0:
			settled = true
		default:
			blocked = 0
			runtime.Gosched()
		}
	}
	rec := r.Record()
	if !settled {
		t.Errorf("the call stays unsettled while its client does not read (Run.Flush blocked %d x 100 ms): "+
			"run cost %s, input tokens %d; want it settled (charged and recorded) regardless of the client", blocked, rec.Cost, rec.InputTokens)
	}
}

// x-belay-cost-usd equals what the run record charges, whichever of the
// answer and the settle goes first.
func TestCostHeaderMatchesRecord(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(r.URL.Path, "/bad/"):
			w.WriteHeader(500)
			fmt.Fprint(w, `{"error":{"message":"x","type":"server_error"}}`)
		case strings.Contains(string(b), "client-error"):
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":{"message":"bad","type":"invalid_request_error"}}`)
		case strings.Contains(string(b), "no-usage"):
			fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}]}`)
		case strings.Contains(string(b), "huge-usage"):
			fmt.Fprintf(w, okCompletion, 10, 50000)
		default:
			fmt.Fprintf(w, okCompletion, 10, 5)
		}
	})
	y := fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 2, base: 1ms, cap: 2ms, max_retry_after: 30s}
breaker: {consecutive_failures: 1000}
limits: {max_turns: 50, deadline: 1m}
models:
  - alias: m
    deployments:
      - %s
  - alias: unpriced
    deployments:
      - %s
  - alias: fb
    deployments:
      - {name: bad, provider: openai, model: gpt-4o-mini, base_url: %q, api_key: k}
      - %s
`, openAIDep("d", "gpt-4o-mini", up.URL), openAIDep("u", "my-own-model", up.URL), up.URL+"/bad/v1", openAIDep("big", "gpt-4o", up.URL))
	g := newGW(t, y, nil)
	for i, c := range []struct{ model, content string }{
		{"m", "hi"}, {"unpriced", "hi"}, {"fb", "hi"}, {"m", "no-usage"}, {"m", "client-error"}, {"m", "huge-usage"}, {"unpriced", "client-error"},
	} {
		for _, named := range []bool{false, true} {
			body := fmt.Sprintf(`{"model":%q,"max_tokens":100,"messages":[{"role":"user","content":%q}]}`, c.model, c.content)
			var hdr []string
			if named {
				hdr = []string{"X-Belay-Run-Id", fmt.Sprint("cost-", i)}
			}
			resp, _ := g.do("POST", "/v1/chat/completions", body, hdr...)
			id := resp.Header.Get("X-Belay-Run-Id")
			rec := g.run(id)
			t.Logf("%s/%s named=%v: %d header %s record %s %s", c.model, c.content, named, resp.StatusCode, resp.Header.Get("X-Belay-Cost-Usd"), rec.Cost.Decimal(), rec.Status)
			if h := resp.Header.Get("X-Belay-Cost-Usd"); h != rec.Cost.Decimal() {
				t.Errorf("%s/%s named=%v: status %d, header %s, record %s", c.model, c.content, named, resp.StatusCode, h, rec.Cost.Decimal())
			}
		}
	}
}
