package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/gateway"
)

// lineSignal is a log writer that sends each line containing match on
// lines.
type lineSignal struct {
	match string
	lines chan string
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
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; r.Context().Err() == nil; i++ {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
	})
	logged := lineSignal{match: "model call failed", lines: make(chan string, 4)}
	g := newGWOpts(t, tokenLimitConfig(up.URL, "{max_turns: 5}"), gateway.Options{Logger: slog.New(slog.NewTextHandler(logged, nil))})
	u, _ := url.Parse(g.srv.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"hello"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", u.Host, len(body), body)
	br := bufio.NewReader(conn)
	for { // the answer has started: a content delta arrived
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if strings.Contains(line, "word") {
			break
		}
	}
	conn.Close()
	select {
	case line := <-logged.lines:
		if !strings.Contains(line, "the client closed its connection before the answer ended") || strings.Contains(line, "upstream deployment") {
			t.Errorf("log line %q; want it to say the client closed its connection, not blame the upstream", line)
		}
	case <-time.After(10 * time.Second): // a failure guard
		t.Fatal("no \"model call failed\" line 10s after the client went away")
	}
}
