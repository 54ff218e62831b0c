package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/belay-run/belay/failure"
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
	// someone), with the time the wait ends: Timeout from now, or the
	// end of Decide's context when that comes first (a run's deadline).
	// It must not block for long.
	Notify func(a store.Approval, until time.Time)
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
		until := time.Now().Add(timeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(until) {
			until = dl
		}
		q.Notify(a, until)
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
// of a JSON document, as encoding/json would decode it into a value of
// that shape; numbers are json.Number. An object member is found as
// encoding/json finds a struct field's, its name compared ignoring case;
// a path through an object holding two members that answer to its part
// ({"amount_usd":50,"AMOUNT_USD":5000}, or one name twice) is not found,
// since decoders disagree on which one counts: a map lookup reads 50, a
// tool decoding into a struct 5000 (an adversarial review approved a
// $5,000 refund under "up to $100" so). A document with more after its
// value is not found either.
func lookup(args json.RawMessage, p string) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	v, err := strictValue(d)
	if err != nil {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	if p != "" {
		for _, part := range strings.Split(p, ".") {
			switch cur := v.(type) {
			case []member:
				found := -1
				for i, m := range cur {
					if strings.EqualFold(m.name, part) {
						if found >= 0 {
							return nil, false // two members answer to it
						}
						found = i
					}
				}
				if found < 0 {
					return nil, false
				}
				v = cur[found].value
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
	}
	return plain(v)
}

// member is an object member as strictValue keeps it: in order, every
// one, duplicates included.
type member struct {
	name  string
	value any
}

// strictValue decodes the next JSON value of d: an object as []member,
// an array as []any, other values as d.Token gives them.
func strictValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		var ms []member
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := strictValue(d)
			if err != nil {
				return nil, err
			}
			ms = append(ms, member{k.(string), v})
		}
		if _, err := d.Token(); err != nil { // '}'
			return nil, err
		}
		return ms, nil
	case json.Delim('['):
		a := []any{}
		for d.More() {
			v, err := strictValue(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := d.Token(); err != nil { // ']'
			return nil, err
		}
		return a, nil
	}
	return t, nil
}

// plain turns a strictValue into what json.Unmarshal into an any gives
// (objects as map[string]any); false when an object in it has two
// members that answer to one name (see lookup).
func plain(v any) (any, bool) {
	switch x := v.(type) {
	case []member:
		m := make(map[string]any, len(x))
		for i, mb := range x {
			for _, other := range x[:i] {
				if strings.EqualFold(other.name, mb.name) {
					return nil, false
				}
			}
			pv, ok := plain(mb.value)
			if !ok {
				return nil, false
			}
			m[mb.name] = pv
		}
		return m, true
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			pv, ok := plain(e)
			if !ok {
				return nil, false
			}
			out[i] = pv
		}
		return out, true
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

// decideWithin asks ap to decide a, and returns when it does or when ctx
// ends (with ctx's error), whichever comes first: an Approver that ignores
// its context cannot hold the tool call past the run's deadline or a kill
// (adversarial review, session 26). Its decision, when it comes later, is
// not used (the request is expired by then).
func decideWithin(ctx context.Context, ap Approver, a store.Approval) (store.ApprovalState, string, error) {
	type decision struct {
		state store.ApprovalState
		by    string
		err   error
	}
	ch := make(chan decision, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- decision{err: fmt.Errorf("run: the approver panicked: %v", p)}
			}
		}()
		st, by, err := ap.Decide(ctx, a)
		ch <- decision{st, by, err}
	}()
	select {
	case d := <-ch:
		return d.state, d.by, d.err
	case <-ctx.Done():
		select {
		case d := <-ch: // it decided as the context ended: its decision counts
			return d.state, d.by, d.err
		default:
		}
		return "", "", context.Cause(ctx)
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
	var waitEnd error // the run's own end of the wait (its deadline)
	if r.m.cfg.Approver != nil {
		// The wait ends at the run's deadline too, which the approver
		// sees as its context's (QueueApprover tells Notify so).
		dctx := ctx
		if !r.deadline.IsZero() {
			var cancel context.CancelFunc
			dctx, cancel = context.WithDeadlineCause(ctx, r.deadline, r.deadlineFailure())
			defer cancel()
		}
		var err error
		state, by, err = decideWithin(dctx, r.m.cfg.Approver, a)
		note = ""
		if fe := failure.As(context.Cause(dctx)); err != nil && dctx.Err() != nil && fe != nil {
			waitEnd = fe
		}
		switch {
		case err != nil:
			state, by, note = store.ApprovalExpired, "belay", "approval wait ended: "+err.Error()
		case state != store.ApprovalApproved && state != store.ApprovalDenied && state != store.ApprovalExpired:
			// Not a decision: the tool does not run, and the request is
			// closed rather than left pending for a person to approve with
			// nothing waiting (an adversarial review).
			state, note = store.ApprovalExpired, fmt.Sprintf("the approver returned %q, not a decision", state)
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
	if waitEnd != nil && got.State != store.ApprovalApproved {
		return got, waitEnd
	}
	return got, nil
}
