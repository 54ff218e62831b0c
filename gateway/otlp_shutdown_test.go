package gateway_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/memstore"
)

// syncBuffer is a log destination safe for the recorder's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An OTLP collector that cannot be reached loses the exported copy of the
// spans, not the gateway's shutdown: Close returns nil (belay serve exits
// 0), the log says the export is incomplete, and the store holds the run's
// spans (newcomer finding: belay serve exited 1 after serving well).
func TestOTLPUnreachableIsAWarningAtShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	cfg := config.Default()
	cfg.OTLP.Endpoint = dead
	var logs syncBuffer
	store := memstore.New()
	ctx := context.Background()
	st, err := gateway.Build(ctx, cfg, gateway.Options{Store: store, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(st.Server.Handler())
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"ping"}]}`))
	req.Header.Set("X-Belay-Run-Id", "otlp-run")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := st.Close(ctx); err != nil {
		t.Errorf("Close with an unreachable collector: %v; want nil", err)
	}
	if !strings.Contains(logs.String(), "otlp export incomplete at shutdown") {
		t.Errorf("log has no warning about the lost export:\n%s", logs.String())
	}
	spans, err := store.RunSpans(ctx, "otlp-run")
	if err != nil || len(spans) == 0 {
		t.Errorf("stored spans of otlp-run: %d, %v; want the run's spans", len(spans), err)
	}
}
