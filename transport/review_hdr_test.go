package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/transport"
)

func openWith(t *testing.T, a run.Approver) *transport.Transport {
	t.Helper()
	cfg, err := config.Parse([]byte("store: memory://\ntools: {irreversible: [refund*]}\n"), "inline.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.Open(context.Background(), cfg, transport.Options{Approver: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close(context.Background()) })
	return tr
}

func okFn(ran *int) func(context.Context) (json.RawMessage, error) {
	return func(context.Context) (json.RawMessage, error) { *ran++; return json.RawMessage(`"done"`), nil }
}

// An Approver that errors, returns an invalid state, or blocks until its
// context ends: the tool never runs; the call fails as ApprovalDenied
// (or with the run's stop).
func TestHdrApproverFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("error", func(t *testing.T) {
		tr := openWith(t, approverFunc(func(context.Context, store.Approval) (store.ApprovalState, string, error) {
			return "", "", errors.New("pager down")
		}))
		r, _ := tr.Stack.Runs.Start(ctx, run.Spec{Agent: "a"})
		ran := 0
		_, err := r.Tool(ctx, run.ToolCall{Name: "refund", Arguments: json.RawMessage(`{}`)}, okFn(&ran))
		if ran != 0 || !errors.Is(err, failure.ApprovalDenied) {
			t.Errorf("ran %d, err %v; want approval_denied", ran, err)
		}
	})
	t.Run("invalid state", func(t *testing.T) {
		tr := openWith(t, approverFunc(func(context.Context, store.Approval) (store.ApprovalState, string, error) {
			return store.ApprovalState("maybe"), "x", nil
		}))
		r, _ := tr.Stack.Runs.Start(ctx, run.Spec{Agent: "a"})
		ran := 0
		_, err := r.Tool(ctx, run.ToolCall{Name: "refund", Arguments: json.RawMessage(`{}`)}, okFn(&ran))
		aps, _ := tr.Stack.Store.ListApprovals(ctx, "")
		states := []string{}
		for _, a := range aps {
			states = append(states, string(a.State))
		}
		t.Logf("err %v; stored approvals %v", err, states)
		if ran != 0 || err == nil {
			t.Errorf("ran %d, err %v", ran, err)
		}
		if !errors.Is(err, failure.ApprovalDenied) {
			t.Errorf("invalid state: err %v is not approval_denied (a *failure.Error the agent can branch on)", err)
		}
		for _, s := range states {
			if s == string(store.ApprovalPending) {
				t.Errorf("the approval is left pending in the queue (states %v): a person may approve it later though nothing waits", states)
			}
		}
	})
	// waiting starts a refund whose approver waits for its context to end,
	// under ctx; it returns once the approver is waiting.
	waiting := func(t *testing.T, ctx context.Context) (tr *transport.Transport, r *run.Run, ran *int, done chan error) {
		started := make(chan struct{})
		tr = openWith(t, approverFunc(func(ctx context.Context, _ store.Approval) (store.ApprovalState, string, error) {
			close(started)
			<-ctx.Done()
			return "", "", context.Cause(ctx)
		}))
		r, _ = tr.Stack.Runs.Start(ctx, run.Spec{Agent: "a"})
		done, ran = make(chan error, 1), new(int)
		go func() {
			_, err := r.Tool(ctx, run.ToolCall{Name: "refund", Arguments: json.RawMessage(`{}`)}, okFn(ran))
			done <- err
		}()
		<-started
		return tr, r, ran, done
	}
	t.Run("blocks until ctx ends", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		_, _, ran, done := waiting(t, cctx)
		cancel()
		err := <-done
		if *ran != 0 || err == nil {
			t.Errorf("ran %d err %v", *ran, err)
		}
		t.Logf("canceled wait: %v", err)
	})
	t.Run("kill while waiting", func(t *testing.T) {
		tr, r, ran, done := waiting(t, ctx)
		if err := tr.Stack.Runs.Kill(ctx, store.KillRun, r.ID(), "stop"); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if *ran != 0 || !errors.Is(err, failure.Killed) {
			t.Errorf("ran %d err %v; want killed", *ran, err)
		}
	})
}

// Several irreversible calls at once: Decide is called concurrently (the
// approver sees all of them before deciding any) and each runs once.
func TestHdrApproverConcurrent(t *testing.T) {
	const n = 6
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	tr := openWith(t, approverFunc(func(ctx context.Context, a store.Approval) (store.ApprovalState, string, error) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
		return store.ApprovalApproved, "t", nil
	}))
	ctx := context.Background()
	r, _ := tr.Stack.Runs.Start(ctx, run.Spec{Agent: "a"})
	var mu sync.Mutex
	ran := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			args := json.RawMessage(fmt.Sprintf(`{"order":"A-%d"}`, i))
			_, err := r.Tool(ctx, run.ToolCall{Name: "refund", Arguments: args}, func(context.Context) (json.RawMessage, error) {
				mu.Lock()
				ran[string(args)]++
				mu.Unlock()
				return json.RawMessage(`"ok"`), nil
			})
			errs <- err
		})
	}
	for range n {
		<-arrived
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if len(ran) != n {
		t.Errorf("ran %v", ran)
	}
	for k, v := range ran {
		if v != 1 {
			t.Errorf("%s ran %d times", k, v)
		}
	}
}

// errors.Is(err, run.ErrEnded) on each way a run ends, and the text.
func TestHdrErrEnded(t *testing.T) {
	ctx := context.Background()
	tr := openWith(t, nil)
	m := tr.Stack.Runs
	tool := func(r *run.Run) error {
		_, err := r.Tool(ctx, run.ToolCall{Name: "lookup", Arguments: json.RawMessage(`{}`)},
			func(context.Context) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
		return err
	}
	// Finish.
	r, _ := m.Start(ctx, run.Spec{Agent: "a"})
	if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	err := tool(r)
	if !errors.Is(err, run.ErrEnded) || !errors.Is(err, failure.RunEnded) {
		t.Errorf("after Finish: %v; want ErrEnded and run_ended", err)
	}
	if want := "fatal: run_ended: run " + r.ID() + " has ended (succeeded)"; err == nil || err.Error() != want {
		t.Errorf("text %q; want %q", err, want)
	}
	// Manager.End.
	r2, _ := m.Start(ctx, run.Spec{Agent: "a"})
	if _, err := m.End(ctx, r2.ID(), run.DefaultTenant, store.RunFailed, "x"); err != nil {
		t.Fatal(err)
	}
	if err := tool(r2); !errors.Is(err, run.ErrEnded) {
		t.Errorf("after Manager.End: %v", err)
	}
	// Finish while a step is in flight.
	r3, _ := m.Start(ctx, run.Spec{Agent: "a"})
	in := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := r3.Tool(ctx, run.ToolCall{Name: "slow", Arguments: json.RawMessage(`{}`)}, func(c context.Context) (json.RawMessage, error) {
			close(in)
			<-c.Done()
			return nil, context.Cause(c)
		})
		done <- err
	}()
	<-in
	_ = r3.Finish(ctx, store.RunSucceeded, nil)
	if err := <-done; !errors.Is(err, run.ErrEnded) {
		t.Logf("in flight, Finish: %v (not ErrEnded: the tool's own error is stored)", err)
	}
	// Kill and limits: the run has ended (stopped); the refusal names the stop.
	r4, _ := m.Start(ctx, run.Spec{Agent: "a"})
	_ = m.Kill(ctx, store.KillRun, r4.ID(), "x")
	err = tool(r4)
	t.Logf("after a kill: %v; ErrEnded %v", err, errors.Is(err, run.ErrEnded))
	r5, _ := m.Start(ctx, run.Spec{Agent: "a", Limits: store.Limits{MaxTurns: 1}})
	if a, err := r5.Admit(ctx, run.Step{Kind: run.KindModel}); err == nil {
		a.Settle(ctx, budget.Usage{}, run.Outcome{})
	}
	_, err = r5.Admit(ctx, run.Step{Kind: run.KindModel})
	t.Logf("turns used: %v; ErrEnded %v", err, errors.Is(err, run.ErrEnded))
	err = tool(r5)
	t.Logf("tool after turns used: %v; ErrEnded %v", err, errors.Is(err, run.ErrEnded))

	// Through the SDK: a call of a finished run is 409 run_ended with the headers.
	r6, _ := m.Start(ctx, run.Spec{Agent: "a"})
	_ = r6.Finish(ctx, store.RunSucceeded, nil)
	oc := openai.NewClient(ooption.WithHTTPClient(&http.Client{Transport: tr}), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	_, err = oc.Chat.Completions.New(transport.WithRunID(ctx, r6.ID()), openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var oe *openai.Error
	if !errors.As(err, &oe) {
		t.Fatalf("%v", err)
	}
	if fe := failure.FromResponse(oe.Response); fe == nil || !errors.Is(fe, failure.RunEnded) || fe.Status != 409 {
		t.Errorf("SDK: %v, FromResponse %v", err, fe)
	}
	if !strings.Contains(oe.Message, "has ended") {
		t.Errorf("SDK message: %q", oe.Message)
	}
}
