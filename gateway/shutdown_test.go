package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/memstore"
)

// Adversary finding (session 7): a stream still open when the shutdown's
// grace (timeouts.shutdown) ended was cut without an error event, never
// charged or recorded, and Serve returned "context deadline exceeded".
// Now the call is canceled: the client's stream ends with an error event,
// the run is charged for what was streamed and recorded, and Serve
// returns nil.
func TestShutdownEndsOpenStreamsCleanly(t *testing.T) {
	release := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, roleChunk+chunk("Hello"))
		w.(http.Flusher).Flush()
		select { // a long generation: it outlasts the grace
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	st := memstore.New()
	stack, addr, stop, served := serveWithGrace(t, up.URL, st)

	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("X-Belay-Run-Id", "shut-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	var got strings.Builder
	for !strings.Contains(got.String(), "Hello") { // output has started
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("before the shutdown: %v (read %q)", err, got.String())
		}
		got.WriteString(line)
	}
	stop() // SIGTERM
	for {
		line, err := rd.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			break
		}
	}
	if err := <-served; err != nil {
		t.Errorf("Serve returned %v, want nil", err)
	}
	out := got.String()
	if !strings.Contains(out, `"error":{`) || !strings.Contains(out, "shutting down") || strings.Contains(out, "[DONE]") {
		t.Errorf("the stream did not end with an error event naming the shutdown:\n%s", out)
	}
	// The event says what a non-streamed call's 503 says (an adversary
	// found a client-fault type for Anthropic, and the failure's own
	// "fatal: canceled:" prefix in the message).
	if want := `"message":"belay is shutting down: the call was canceled after timeouts.shutdown; retry","type":"shutting_down"`; !strings.Contains(out, want) || strings.Contains(out, "fatal:") {
		t.Errorf("the shutdown's error event:\n%s\nwant %s", out, want)
	}
	if err := stack.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetRun(context.Background(), "shut-1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Turns != 1 || rec.Cost <= 0 || rec.InputTokens <= 0 || rec.OutputTokens <= 0 {
		t.Errorf("run: %d turns, cost %s, tokens %d/%d; want the streamed call counted and charged",
			rec.Turns, rec.Cost.Decimal(), rec.InputTokens, rec.OutputTokens)
	}
}

// A non-streamed call still waiting for its upstream when the grace ends
// gets an error in its dialect naming the shutdown, not a cut connection.
func TestShutdownAnswersWaitingCall(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	_, addr, stop, served := serveWithGrace(t, up.URL, memstore.New())
	type result struct {
		status int
		header http.Header
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}()
	<-arrived // the call is in flight
	stop()
	r := <-done
	if err := <-served; err != nil {
		t.Errorf("Serve returned %v, want nil", err)
	}
	want := `{"error":{"message":"belay is shutting down: the call was canceled after timeouts.shutdown; retry","type":"shutting_down","param":null,"code":"shutting_down"}}`
	if r.err != nil || r.status != http.StatusServiceUnavailable || strings.TrimSpace(r.body) != want {
		t.Fatalf("status %d, body %s, error %v; want 503 %s", r.status, r.body, r.err, want)
	}
	// Labelled transient, as the answer asks for a retry (a review found
	// it without the failure headers).
	if k, rs := r.header.Get(failure.HeaderKind), r.header.Get(failure.HeaderReason); k != "transient" || rs != "server_error" {
		t.Errorf("failure headers %q/%q; want transient/server_error", k, rs)
	}
}

// serveWithGrace serves, on a loopback port, a gateway whose alias m is one
// deployment at upstream URL up, over st, with timeouts.shutdown of 50ms.
// It returns the stack, the address, the stop of the serving context (a
// SIGTERM) and Serve's result.
func serveWithGrace(t *testing.T, up string, st *memstore.Store) (*gateway.Stack, string, context.CancelFunc, <-chan error) {
	t.Helper()
	cfg, err := config.Parse([]byte(oneAlias("timeouts: {shutdown: 50ms}\n", openAIDep("d", "gpt-4o-mini", up))),
		"test.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	stack, err := gateway.Build(context.Background(), cfg, gateway.Options{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stack.Close(context.Background()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	served := make(chan error, 1)
	go func() { served <- stack.Server.Serve(ctx, ln) }()
	return stack, ln.Addr().String(), stop, served
}
