package run

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// A read-only tool's calls are not deduplicated: a status poll with the
// same arguments runs each time and sees fresh data (newcomer finding: the
// third poll got the first one's result replayed). Nothing is claimed or
// stored under its key; the call is still traced.
func TestReadOnlyToolRunsEveryCall(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Policy = Policy{ReadOnly: []string{"get_*"}, Irreversible: []string{"get_and_delete"}}
	})
	ctx := context.Background()
	r := f.start(t, Spec{})
	var polls atomic.Int32
	poll := func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"poll":` + string(rune('0'+polls.Add(1))) + `}`), nil
	}
	args := json.RawMessage(`{"job":"1"}`)
	for _, call := range []ToolCall{
		{Name: "get_job_status", CallID: "c1", Arguments: args}, // by the policy's pattern
		{Name: "get_job_status", CallID: "c2", Arguments: args},
		{Name: "job_status", CallID: "c3", Arguments: args, ReadOnly: true}, // by the call
		{Name: "job_status", CallID: "c4", Arguments: args, ReadOnly: true},
	} {
		want := polls.Load() + 1
		res, err := r.Tool(ctx, call, poll)
		if err != nil || string(res) != `{"poll":`+string(rune('0'+want))+`}` {
			t.Fatalf("%s %s: %s %v, want poll %d", call.Name, call.CallID, res, err, want)
		}
	}
	if c, err := f.st.Lookup(ctx, IdempotencyKey(r.ID(), "get_job_status", args), time.Now()); err == nil {
		t.Fatalf("a read-only call stored its key: %+v", c)
	}
	spans := f.sink.byKind(trace.KindTool)
	if len(spans) != 4 {
		t.Fatalf("%d tool spans, want 4", len(spans))
	}
	for _, sp := range spans {
		if sp.Attrs["belay.idempotency.state"] != "read_only" || sp.Attrs[trace.AttrToolOutcome] != trace.ToolExecuted {
			t.Fatalf("span attrs %v", sp.Attrs)
		}
	}

	// The same call not read-only replays its first result.
	var e effect
	call := ToolCall{Name: "job_status", Arguments: args}
	for range 2 {
		if res, err := r.Tool(ctx, call, e.fn(`"x"`, nil)); err != nil || string(res) != `"x"` {
			t.Fatalf("%s %v", res, err)
		}
	}
	if e.n.Load() != 1 {
		t.Fatalf("a tool not read-only ran %d times for one call repeated", e.n.Load())
	}

	// A name matching Irreversible too is not read-only: it waits for an
	// approval (none configured: denied) whatever the call says.
	_, err := r.Tool(ctx, ToolCall{Name: "get_and_delete", Arguments: args, ReadOnly: true}, e.fn(`1`, nil))
	wantReason(t, err, failure.ApprovalDenied, failure.Fatal)
	if e.n.Load() != 1 {
		t.Fatal("an irreversible tool ran without an approval")
	}
}

// A read-only tool's transient errors are retried (a read is safe to
// repeat), and its errors are returned, not stored: the next call runs.
func TestReadOnlyToolRetriesAndStoresNoError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.Rand = func() float64 { return 0.5 } })
		ctx := context.Background()
		r := f.start(t, Spec{})
		var n atomic.Int32
		flaky := func(context.Context) (json.RawMessage, error) {
			if n.Add(1) <= 2 {
				return nil, failure.New(failure.Overloaded, "busy")
			}
			return json.RawMessage(`"ok"`), nil
		}
		call := ToolCall{Name: "read", ReadOnly: true, Retry: &retry.Policy{MaxAttempts: 3, Base: time.Second}}
		if res, err := r.Tool(ctx, call, flaky); err != nil || string(res) != `"ok"` || n.Load() != 3 {
			t.Fatalf("%s %v after %d tries", res, err, n.Load())
		}
		var e effect
		call = ToolCall{Name: "read", ReadOnly: true, Arguments: json.RawMessage(`{"x":1}`)}
		_, err := r.Tool(ctx, call, e.fn("", errors.New("not found")))
		var te *ToolError
		if !errors.As(err, &te) || te.Replayed || te.Message != "not found" {
			t.Fatalf("error %v", err)
		}
		if res, err := r.Tool(ctx, call, e.fn(`"found"`, nil)); err != nil || string(res) != `"found"` || e.n.Load() != 2 {
			t.Fatalf("after an error: %s %v, ran %d", res, err, e.n.Load())
		}
		if r.Record().Status != store.RunRunning {
			t.Fatal("a tool error ended the run")
		}
	})
}
