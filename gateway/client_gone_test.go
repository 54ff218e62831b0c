package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/memstore"
)

// lineSignal is a log writer that sends each line containing match on
// lines.
type lineSignal struct {
	match string
	lines chan string
}

// await returns the next matching line; it fails the test when none comes
// within 10s (a failure guard) after what when says.
func (l lineSignal) await(t *testing.T, when string) string {
	t.Helper()
	select {
	case line := <-l.lines:
		return line
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q line 10s %s", l.match, when)
		return ""
	}
}

func (l lineSignal) Write(p []byte) (int, error) {
	if s := string(p); strings.Contains(s, l.match) {
		l.lines <- s
	}
	return len(p), nil
}

// A client that goes away in the middle of a stream is logged as the
// client's doing, not as a failure of the upstream deployment (newcomer
// finding: "canceled from long: upstream deployment long: connection
// closed while the request was sent", the failed write being to the
// client's own connection).
func TestClientGoneMidStreamIsNotBlamedOnTheUpstream(t *testing.T) {
	up := upstream(t, endlessStream(""))
	logged := lineSignal{match: "model call failed", lines: make(chan string, 4)}
	g := newGWOpts(t, tokenLimitConfig(up.URL, "{max_turns: 5}"), gateway.Options{Logger: slog.New(slog.NewTextHandler(logged, nil))})
	u, _ := url.Parse(g.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"hello"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.Host, len(body), body)
	readUntilOutput(t, conn) // the answer has started: a content delta arrived
	conn.Close()
	line := logged.await(t, "after the client went away")
	if !strings.Contains(line, "the client closed its connection before the answer ended") || strings.Contains(line, "upstream deployment") {
		t.Errorf("log line %q; want it to say the client closed its connection, not blame the upstream", line)
	}
}

// Adversary of session 9: a client that stops reading a stream (without
// closing its connection) held the call, its upstream connection and its
// record open until it closed, a kill or a shutdown notwithstanding, and
// the call was not charged meanwhile. After timeouts.client_write without
// accepting a write it is cut off: the call ends as a client that went
// away, charged for what was produced.
func TestStalledStreamClientIsCutOff(t *testing.T) {
	up := upstream(t, endlessStream(strings.Repeat("x", 4000)))
	logged := lineSignal{match: "model call failed", lines: make(chan string, 4)}
	g := newGWOpts(t, `
listen: 127.0.0.1:0
store: memory://
timeouts: {client_write: 200ms}
breaker: {consecutive_failures: 1000}
limits: {max_turns: 5}
models:
  - alias: m
    deployments:
      - `+openAIDep("d", "gpt-4o-mini", up.URL)+`
`, gateway.Options{Logger: slog.New(slog.NewTextHandler(logged, nil))})
	u, _ := url.Parse(g.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"m","stream":true,"max_tokens":100000,"messages":[{"role":"user","content":"hello"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nX-Belay-Run-Id: stall-1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.Host, len(body), body)
	readUntilOutput(t, conn) // the answer has started; from here the client reads no more
	line := logged.await(t, "after the client stopped reading (client_write 200ms)")
	if !strings.Contains(line, "run=stall-1") || strings.Contains(line, "upstream deployment") {
		t.Errorf("log line %q; want the stalled call's end, not blamed on the upstream", line)
	}
	if rec := g.run("stall-1"); rec.OutputTokens == 0 || rec.Cost <= 0 {
		t.Errorf("run record %+v; want the output produced charged", rec)
	}
}

// deadlineRecorder is an httptest.ResponseRecorder that records the write
// deadlines set through http.ResponseController.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// A stream's writes go out under a write deadline of timeouts.client_write
// (default 60s), and the handler clears it before it returns: the server
// sets none of its own, so it would carry over to the connection's next
// request. A small non-streamed answer sets none.
func TestStreamWriteDeadlineSetAndCleared(t *testing.T) {
	stack, err := gateway.Build(t.Context(), config.Default(), gateway.Options{Store: memstore.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stack.Close(context.Background()) })
	for _, tc := range []struct {
		stream bool
		set    bool
	}{{true, true}, {false, false}} {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
		body := fmt.Sprintf(`{"model":"gpt-4o-mini","stream":%v,"messages":[{"role":"user","content":"hello"}]}`, tc.stream)
		start := time.Now()
		stack.Server.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != 200 {
			t.Fatalf("stream %v: %d %s", tc.stream, rec.Code, rec.Body)
		}
		n := len(rec.deadlines)
		switch {
		case !tc.set && n != 0:
			t.Errorf("stream %v: deadlines %v, want none", tc.stream, rec.deadlines)
		case tc.set && (n < 2 || rec.deadlines[0].Sub(start) < config.DefaultClientWrite || !rec.deadlines[n-1].IsZero()):
			t.Errorf("stream %v: deadlines %v; want one client_write (%v) ahead, then cleared", tc.stream, rec.deadlines, config.DefaultClientWrite)
		}
	}
}

// endlessStream is an upstream handler that streams OpenAI chunks, each
// with the content "word<i> " and pad, until its client goes away.
func endlessStream(pad string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; r.Context().Err() == nil; i++ {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d %s\"}}]}\n\n", i, pad)
			w.(http.Flusher).Flush()
		}
	}
}

// readUntilOutput reads the stream on conn until a content delta of
// endlessStream arrived.
func readUntilOutput(t *testing.T, conn net.Conn) {
	t.Helper()
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if strings.Contains(line, "word") {
			return
		}
	}
}
