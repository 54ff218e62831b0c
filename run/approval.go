package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/belay-run/belay/store"
)

// Approver decides whether an irreversible tool call may run. The run layer
// stores the request (store.Approval, pending, with the exact arguments)
// before calling Decide and records the decision after it; Decide returns
// approved, denied or expired and who decided. An error (ctx canceled, for
// example) leaves the call denied. Implementations must be safe for
// concurrent use.
type Approver interface {
	Decide(ctx context.Context, a store.Approval) (state store.ApprovalState, by string, err error)
}

// Defaults of QueueApprover.
const (
	DefaultApprovalTimeout = 10 * time.Minute
	DefaultApprovalPoll    = time.Second
)

// QueueApprover waits for a person: the request is in the store's approval
// queue (belay approvals, the admin API) and Decide polls it until someone
// decides it or Timeout passes, which expires the request (expired is
// denied). Safe for concurrent use.
type QueueApprover struct {
	// Approvals is the queue, normally the Manager's store. Required.
	Approvals store.Approvals
	// Timeout is how long a request waits; default 10 minutes.
	Timeout time.Duration
	// Poll is the interval between reads of the request; default 1s.
	Poll time.Duration
	// Notify, when set, is called once per request before waiting (to page
	// someone); it must not block for long.
	Notify func(store.Approval)
}

// Decide polls a.ID until it is decided, Timeout passes (expired, by
// "belay:timeout") or ctx ends (an error).
func (q QueueApprover) Decide(ctx context.Context, a store.Approval) (store.ApprovalState, string, error) {
	timeout, poll := q.Timeout, q.Poll
	if timeout <= 0 {
		timeout = DefaultApprovalTimeout
	}
	if poll <= 0 {
		poll = DefaultApprovalPoll
	}
	if q.Notify != nil {
		q.Notify(a)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		cur, err := q.Approvals.GetApproval(ctx, a.ID)
		if err == nil && cur.State != store.ApprovalPending {
			return cur.State, cur.DecidedBy, nil
		}
		select {
		case <-ctx.Done():
			return "", "", context.Cause(ctx)
		case <-deadline.C:
			return store.ApprovalExpired, "belay:timeout", nil
		case <-tick.C:
		}
	}
}

// Predicate tests a tool call's arguments (a JSON object).
type Predicate func(args json.RawMessage) bool

// Rule decides the calls of the tools matching Tool (a path.Match glob)
// whose arguments satisfy every predicate of If.
type Rule struct {
	Tool     string
	If       []Predicate
	Decision store.ApprovalState // approved or denied
}

// RuleApprover decides by rules, at once: the first rule that matches
// gives the decision, by "rule:<index>"; no match is denied, by
// "rule:default". For tests, evaluations and standing policies such as
// "refunds up to $100 are approved". Safe for concurrent use.
type RuleApprover struct {
	Rules []Rule
}

// Decide applies the rules to a.
func (ra RuleApprover) Decide(_ context.Context, a store.Approval) (store.ApprovalState, string, error) {
	for i, r := range ra.Rules {
		if ok, _ := path.Match(r.Tool, a.Tool); !ok {
			continue
		}
		all := true
		for _, p := range r.If {
			if !p(a.Arguments) {
				all = false
				break
			}
		}
		if all {
			return r.Decision, "rule:" + strconv.Itoa(i), nil
		}
	}
	return store.ApprovalDenied, "rule:default", nil
}

// lookup returns the value at a dot-separated path ("order.items.0.sku")
// of a JSON document; numbers are json.Number.
func lookup(args json.RawMessage, p string) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil, false
	}
	if p == "" {
		return v, true
	}
	for _, part := range strings.Split(p, ".") {
		switch cur := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = cur[part]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(cur) {
				return nil, false
			}
			v = cur[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// ArgEquals holds when the value at path equals want, compared by their
// JSON encodings: strings, booleans and null compare as expected; numbers
// must be written alike (100 does not equal 100.0; use ArgAtMost for
// amounts).
func ArgEquals(path string, want any) Predicate {
	wb, err := json.Marshal(want)
	return func(args json.RawMessage) bool {
		v, ok := lookup(args, path)
		if !ok || err != nil {
			return false
		}
		gb, err := json.Marshal(v)
		return err == nil && bytes.Equal(gb, wb)
	}
}

// ArgAtMost holds when the value at path is a number no greater than max.
func ArgAtMost(path string, max float64) Predicate {
	return func(args json.RawMessage) bool {
		v, ok := lookup(args, path)
		if !ok {
			return false
		}
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f <= max
	}
}

// approve stores the request, asks the approver and records its decision;
// it returns the stored approval (the stored decision wins a race with a
// person deciding at the same time).
func (r *Run) approve(ctx context.Context, call ToolCall) (store.Approval, error) {
	a := store.Approval{ID: newApprovalID(), RunID: r.id, Tenant: r.tenant, Tool: call.Name,
		Arguments: bytes.Clone(call.Arguments), State: store.ApprovalPending, Requested: r.m.now()}
	if err := r.m.st.CreateApproval(ctx, a); err != nil {
		return a, fmt.Errorf("run: store approval request: %w", err)
	}
	state, by, note := store.ApprovalDenied, "belay:policy", "no approver configured"
	if r.m.cfg.Approver != nil {
		var err error
		state, by, err = r.m.cfg.Approver.Decide(ctx, a)
		note = ""
		if err != nil {
			state, by, note = store.ApprovalExpired, "belay", "approval wait ended: "+err.Error()
		}
	}
	if state == store.ApprovalExpired && note == "" {
		note = "timed out"
	}
	wctx := context.WithoutCancel(ctx)
	got, err := r.m.st.DecideApproval(wctx, a.ID, state, by, note, r.m.now())
	if err != nil {
		// Decided already (by a person, racing the approver): read it.
		if cur, gerr := r.m.st.GetApproval(wctx, a.ID); gerr == nil && cur.State != store.ApprovalPending {
			got, err = cur, nil
		}
	}
	if err != nil {
		return a, fmt.Errorf("run: record approval decision: %w", err)
	}
	r.event("approval", map[string]any{"id": got.ID, "tool": got.Tool, "state": string(got.State), "by": got.DecidedBy})
	return got, nil
}
