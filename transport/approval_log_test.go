package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/config"
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

// A tool call that waits in the approval queue says so in the log, with
// the approval's id and how to decide it (newcomer finding: the agent only
// seemed to hang).
func TestApprovalWaitIsLogged(t *testing.T) {
	synctest.Test(t, approvalWaitIsLogged)
}

func approvalWaitIsLogged(t *testing.T) {
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
	done := make(chan error, 1)
	go func() {
		_, err := r.Tool(ctx, run.ToolCall{Name: "refund", Arguments: json.RawMessage(`{"amount":5}`)},
			func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"ok"`), nil })
		done <- err
	}()
	id := <-ids // the log line that announces the wait names the request
	if _, err := tr.Stack.Store.DecideApproval(ctx, id, store.ApprovalApproved, "tester", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	for _, want := range []string{"level=WARN", `msg="tool call waits for an approval"`, "approval=" + id, "run=" + r.ID(), "tool=refund",
		"belay approvals approve|deny " + id,
		"expires_in=5m0s"} { // the run's deadline (the default 5 minutes) comes before the approval's 10
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
