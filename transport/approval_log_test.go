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
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/transport"
)

// waitLog is a slog handler that keeps the text of every record and
// sends each approval id logged on ids.
type waitLog struct {
	mu  *sync.Mutex
	b   *bytes.Buffer
	ids chan string
}

func (h waitLog) Enabled(context.Context, slog.Level) bool { return true }
func (h waitLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h waitLog) WithGroup(string) slog.Handler            { return h }
func (h waitLog) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	_ = slog.NewTextHandler(h.b, nil).Handle(ctx, r)
	h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "approval" {
			h.ids <- a.Value.String()
		}
		return true
	})
	return nil
}

func (h waitLog) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.String()
}

// waitingRefund opens a transport whose config holds refund* irreversible
// (the default limits: a 5-minute run deadline) and logs into a waitLog,
// starts a run, and calls its refund tool in the background: the approval
// id logged arrives on the log's ids, the call's error on done.
func waitingRefund(t *testing.T) (tr *transport.Transport, r *run.Run, log waitLog, done <-chan error) {
	t.Helper()
	cfg, err := config.Parse([]byte("store: memory://\ntools: {irreversible: [refund*]}\n"), "inline.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	log = waitLog{&sync.Mutex{}, &bytes.Buffer{}, make(chan string, 1)}
	ctx := context.Background()
	tr, err = transport.Open(ctx, cfg, transport.Options{Logger: slog.New(log)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close(ctx) })
	r, err = tr.StartRun(ctx, run.Spec{Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.Tool(ctx, run.ToolCall{Name: "refund", Arguments: json.RawMessage(`{"amount":5}`)},
			func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"ok"`), nil })
		errc <- err
	}()
	return tr, r, log, errc
}

// A tool call that waits in the approval queue says so in the log, with
// the approval's id, how to decide it, and the time left (newcomer
// finding: the agent only seemed to hang).
func TestApprovalWaitIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, r, log, done := waitingRefund(t)
		id := <-log.ids // the log line that announces the wait names the request
		if _, err := tr.Stack.Store.DecideApproval(context.Background(), id, store.ApprovalApproved, "tester", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		out := log.String()
		for _, want := range []string{"level=WARN", `msg="tool call waits for an approval"`, "approval=" + id, "run=" + r.ID(), "tool=refund",
			"POST /admin/approvals/" + id + "/approve|deny on the gateway, or Store.DecideApproval in this process (belay approvals cannot reach the in-memory store)",
			"expires_in=5m0s"} { // the run's deadline (the default 5 minutes) comes before the approval's 10
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
}

// The wait for an approval ends at the run's deadline when that comes
// before the approval's timeout, as the WARN line's expires_in says
// (adversarial review: it said 10m0s, the approval timeout, while the
// call gave up at the default run deadline of 5 minutes).
func TestApprovalWaitEndsAtTheRunsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		_, _, log, done := waitingRefund(t)
		<-log.ids
		err := <-done
		if waited := time.Since(start); waited != 5*time.Minute || !errors.Is(err, failure.DeadlineExceeded) {
			t.Errorf("waited %v, err %v; want 5m0s and deadline_exceeded", waited, err)
		}
		if out := log.String(); !strings.Contains(out, "expires_in=5m0s") {
			t.Errorf("the WARN line does not say the 5 minutes left:\n%s", out)
		}
	})
}
