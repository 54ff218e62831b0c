package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/transport"
)

// The wait for an approval ends at the run's deadline when that comes
// before the approval's timeout, and the WARN line's expires_in says so
// (adversarial review: it said 10m0s, the approval timeout, while the
// call gave up at the default run deadline of 5 minutes).
func TestApprovalWaitEndsAtTheRunsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := config.Parse([]byte("store: memory://\ntools: {irreversible: [refund*]}\n"), "inline.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var logs bytes.Buffer
		ids := make(chan string, 1)
		ctx := context.Background()
		tr, err := transport.Open(ctx, cfg, transport.Options{Logger: slog.New(waitLog{&mu, &logs, ids})})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close(ctx)
		r, err := tr.StartRun(ctx, run.Spec{Agent: "a"})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := r.Tool(ctx, run.ToolCall{Name: "refund", Arguments: json.RawMessage(`{"amount":5}`)},
				func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"ok"`), nil })
			done <- err
		}()
		<-ids
		err = <-done
		waited := time.Since(start)
		mu.Lock()
		out := logs.String()
		mu.Unlock()
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "waits for an approval") {
				line = l
			}
		}
		if waited != 5*time.Minute || !errors.Is(err, failure.DeadlineExceeded) {
			t.Errorf("waited %v, err %v; want 5m0s and deadline_exceeded", waited, err)
		}
		if !strings.Contains(line, "expires_in="+waited.String()) {
			t.Errorf("the call waited %v (then: %v), but the WARN line says: %s", waited, err, line)
		}
	})
}
