package run

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// An irreversible tool call waits in the approval queue; meanwhile the
// operator disables the tool (belay kill tool wire_money), and then
// someone approves the pending request. The tool must not run: nothing of
// it had started, and the wait for a person is the moment a kill is meant
// for (adversarial review: Run.Tool looked at the kill flags only before
// the wait, and the effect ran while the tool was disabled).
func TestToolDisabledWhileWaitingForApprovalDoesNotRun(t *testing.T) {
	synctest.Test(t, toolDisabledWhileWaitingForApproval)
}

func toolDisabledWhileWaitingForApproval(t *testing.T) {
	f := newFixture(t, nil)
	// The approver is the store's queue, as belay serve's.
	f.m.cfg.Approver = QueueApprover{Approvals: f.st, Poll: 5 * time.Millisecond, Timeout: 10 * time.Second}
	f.m.cfg.Policy = Policy{Irreversible: []string{"wire_money"}}
	ctx := context.Background()
	r := f.start(t, Spec{ID: "r1", Limits: store.Limits{Deadline: time.Hour}})
	var ran atomic.Bool
	done := make(chan error, 1)
	go func() {
		_, err := r.Tool(ctx, ToolCall{Name: "wire_money", Arguments: json.RawMessage(`{"amount_usd":5000}`)},
			func(context.Context) (json.RawMessage, error) {
				ran.Store(true)
				return json.RawMessage(`{"ok":true}`), nil
			})
		done <- err
	}()
	var pending store.Approval
	for deadline := time.Now().Add(5 * time.Second); ; {
		as, err := f.st.ListApprovals(ctx, store.ApprovalPending)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == 1 {
			pending = as[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no pending approval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.m.Kill(ctx, store.KillTool, "wire_money", "runaway transfers"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.DecideApproval(ctx, pending.ID, store.ApprovalApproved, "alice", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if ran.Load() {
		t.Fatalf("wire_money ran although it was disabled by the kill switch before its approval came (err %v)", err)
	}
	fe := wantReason(t, err, failure.ToolDisabled, failure.Fatal)
	if !strings.Contains(fe.Message, "tool wire_money is disabled by the kill switch") {
		t.Errorf("message %q", fe.Message)
	}
	spans := f.sink.byKind(trace.KindTool)
	if len(spans) != 1 || spans[0].Attrs[trace.AttrToolOutcome] != trace.ToolDisabled {
		t.Errorf("tool spans %+v, want one with outcome disabled", spans)
	}
}
