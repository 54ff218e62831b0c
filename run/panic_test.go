package run

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// mustPanic runs fn and returns what it panicked with (nil: it did not).
func mustPanic(fn func()) (p any) {
	defer func() { p = recover() }()
	fn()
	return nil
}

// A step whose function panics is failed, its money released, and the
// panic goes on to the caller: it neither holds the run's money nor keeps
// the run from ending (adversarial review: the reservation was renewed on
// and the run's next call refused budget_exceeded).
func TestCallPanicReleasesTheStep(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{ID: "p", Limits: store.Limits{MaxCost: cents(1)}})
	p := mustPanic(func() {
		_ = r.Call(ctx, modelStep(budget.Micros(7500)), func(context.Context) (budget.Usage, error) { panic("boom") })
	})
	if p != "boom" {
		t.Fatalf("Call's panic: %v, want boom passed on", p)
	}
	if bal := f.balance(t, budget.RunScope("p")); bal.Reserved != 0 || bal.Settled != 0 {
		t.Errorf("run scope after the panic: %+v; want nothing held", bal)
	}
	if err := r.Call(ctx, modelStep(budget.Micros(7500)), func(context.Context) (budget.Usage, error) { return usage(1, 1), nil }); err != nil {
		t.Errorf("the next call: %v", err)
	}
	if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}
}

// A tool whose function panics closes its step and records its span
// before the panic goes on.
func TestToolPanicClosesTheStep(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{ID: "tp"})
	p := mustPanic(func() {
		_, _ = r.Tool(ctx, ToolCall{Name: "lookup", Arguments: json.RawMessage(`{}`)},
			func(context.Context) (json.RawMessage, error) { panic("tool boom") })
	})
	if p != "tool boom" {
		t.Fatalf("Tool's panic: %v, want tool boom passed on", p)
	}
	r.mu.Lock()
	open := len(r.open)
	r.mu.Unlock()
	if open != 0 {
		t.Errorf("%d steps open after the panic; want 0", open)
	}
	if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, s := range f.sink.byKind(trace.KindTool) {
		if s.Name == "execute_tool lookup" {
			found = true
			if s.Status != trace.StatusError {
				t.Errorf("the tool's span: status %q; want error", s.Status)
			}
		}
	}
	if !found {
		t.Error("no span for the tool call that panicked")
	}
}
