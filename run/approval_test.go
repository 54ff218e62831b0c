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
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

func refundRules() RuleApprover {
	return RuleApprover{Rules: []Rule{
		{Tool: "issue_refund", If: []Predicate{ArgAtMost("amount", 100), ArgEquals("currency", "usd")}, Decision: store.ApprovalApproved},
		{Tool: "delete_*", Decision: store.ApprovalDenied},
	}}
}

func TestRuleApprover(t *testing.T) {
	ra := refundRules()
	cases := []struct {
		tool, args string
		want       store.ApprovalState
		by         string
	}{
		{"issue_refund", `{"amount": 40, "currency": "usd"}`, store.ApprovalApproved, "rule:0"},
		{"issue_refund", `{"amount": 100.0, "currency": "usd"}`, store.ApprovalApproved, "rule:0"},
		{"issue_refund", `{"amount": 500, "currency": "usd"}`, store.ApprovalDenied, "rule:default"},
		{"issue_refund", `{"amount": 5, "currency": "eur"}`, store.ApprovalDenied, "rule:default"},
		{"issue_refund", `{"amount": "5", "currency": "usd"}`, store.ApprovalDenied, "rule:default"},
		{"delete_user", `{}`, store.ApprovalDenied, "rule:1"},
		{"other", `not json`, store.ApprovalDenied, "rule:default"},
	}
	for _, c := range cases {
		st, by, err := ra.Decide(context.Background(), store.Approval{Tool: c.tool, Arguments: []byte(c.args)})
		if err != nil || st != c.want || by != c.by {
			t.Errorf("%s %s: %s by %s (%v); want %s by %s", c.tool, c.args, st, by, err, c.want, c.by)
		}
	}
	if v, ok := lookup(json.RawMessage(`{"o":{"items":[{"sku":"a"},{"sku":"b"}]}}`), "o.items.1.sku"); !ok || v != "b" {
		t.Errorf("lookup path: %v %v", v, ok)
	}
}

// A rule reads an argument as a tool decoding the arguments into a struct
// does (encoding/json: names compared ignoring case, the last of a
// duplicate kept), and matches nothing when two members answer to its
// name: a map lookup read 50 of {"amount":50,"AMOUNT":5000}, the tool
// 5000, and the refund ran under "up to $100" (adversarial review).
func TestRuleApproverReadsArgumentsAsTheToolDoes(t *testing.T) {
	ra := refundRules()
	cases := []struct {
		args string
		want store.ApprovalState
	}{
		{`{"amount": 50, "AMOUNT": 5000, "currency": "usd"}`, store.ApprovalDenied},
		{`{"AMOUNT": 5000, "amount": 50, "currency": "usd"}`, store.ApprovalDenied},
		{`{"amount": 50, "amount": 5000, "currency": "usd"}`, store.ApprovalDenied},
		{`{"amount": 50, "currency": "usd", "Currency": "eur"}`, store.ApprovalDenied},
		{`{"amount": 50, "currency": "usd"} {"amount": 5000}`, store.ApprovalDenied},
		{`{"amount\u0020": 50, "amount": 50, "currency": "usd"}`, store.ApprovalApproved}, // "amount " is another name
		{`{"Amount": 50, "currency": "usd"}`, store.ApprovalApproved},                     // the struct field takes it
		{`{"Amount": 500, "currency": "usd"}`, store.ApprovalDenied},
		{`{"amount": 50, "currency": "usd", "note": {"x": 1, "X": 2}}`, store.ApprovalApproved}, // not on a rule's path
	}
	for _, c := range cases {
		st, _, err := ra.Decide(context.Background(), store.Approval{Tool: "issue_refund", Arguments: []byte(c.args)})
		if err != nil || st != c.want {
			t.Errorf("%s: %s (%v); want %s", c.args, st, err, c.want)
		}
		var tool struct {
			Amount   float64 `json:"amount"`
			Currency string  `json:"currency"`
		}
		if st == store.ApprovalApproved && (json.Unmarshal([]byte(c.args), &tool) != nil || tool.Amount > 100 || tool.Currency != "usd") {
			t.Errorf("%s approved, and the tool decodes %+v", c.args, tool)
		}
	}
	// ArgEquals on an object: one with two members of one name is no match.
	eq := ArgEquals("o", map[string]any{"a": 2})
	if !eq(json.RawMessage(`{"o": {"a": 2}}`)) || eq(json.RawMessage(`{"o": {"a": 1, "a": 2}}`)) || eq(json.RawMessage(`{"o": {"a": 2, "A": 2}}`)) {
		t.Error("ArgEquals on an object with a repeated member matched")
	}
}

func TestApprovalGate(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Approver = refundRules()
		c.Policy = Policy{Irreversible: []string{"issue_refund", "delete_*"}}
	})
	ctx := context.Background()
	r := f.start(t, Spec{Tenant: "acme"})
	var e effect
	args := json.RawMessage(`{"amount": 40, "currency": "usd", "order": "o-1"}`)
	res, err := r.Tool(ctx, ToolCall{Name: "issue_refund", Arguments: args}, e.fn(`{"refunded":40}`, nil))
	if err != nil || string(res) != `{"refunded":40}` {
		t.Fatalf("approved refund: %s %v", res, err)
	}
	_, err = r.Tool(ctx, ToolCall{Name: "issue_refund", Arguments: json.RawMessage(`{"amount": 900, "currency": "usd"}`)}, e.fn(`1`, nil))
	wantReason(t, err, failure.ApprovalDenied, failure.Fatal)
	if e.n.Load() != 1 {
		t.Fatalf("effect ran %d times", e.n.Load())
	}
	// Not irreversible: no approval asked.
	if _, err := r.Tool(ctx, ToolCall{Name: "lookup_order"}, e.fn(`1`, nil)); err != nil {
		t.Fatal(err)
	}
	all, _ := f.st.ListApprovals(ctx, "")
	if len(all) != 2 || string(all[0].Arguments) != string(args) || all[0].State != store.ApprovalApproved ||
		all[0].DecidedBy != "rule:0" || all[0].RunID != r.ID() || all[0].Tenant != "acme" ||
		all[1].State != store.ApprovalDenied || all[1].Decided.IsZero() {
		t.Fatalf("stored approvals %+v", all)
	}
	ts := f.sink.byKind(trace.KindTool)
	if ts[0].Attrs[trace.AttrApproval] != all[0].ID || ts[0].Attrs["belay.approval.state"] != "approved" ||
		ts[1].Attrs[trace.AttrFailureReason] != "approval_denied" {
		t.Fatalf("tool spans %+v", ts)
	}
	_ = r.Finish(ctx, store.RunSucceeded, nil)
	rs := f.sink.byKind(trace.KindRun)
	var evs []string
	for _, e := range rs[0].Events {
		evs = append(evs, e.Name+":"+e.Attrs["state"].(string))
	}
	if len(evs) != 2 || evs[0] != "approval:approved" || evs[1] != "approval:denied" {
		t.Fatalf("run events %v", evs)
	}
}

func TestNoApproverDenies(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policy = Policy{Irreversible: []string{"send_email"}} })
	ctx := context.Background()
	r := f.start(t, Spec{})
	var e effect
	_, err := r.Tool(ctx, ToolCall{Name: "send_email", Arguments: json.RawMessage(`{"to":"x"}`)}, e.fn(`1`, nil))
	wantReason(t, err, failure.ApprovalDenied, failure.Fatal)
	all, _ := f.st.ListApprovals(ctx, store.ApprovalDenied)
	if e.n.Load() != 0 || len(all) != 1 || all[0].DecidedBy != "belay:policy" {
		t.Fatalf("effect %d, approvals %+v", e.n.Load(), all)
	}
}

func TestQueueApprover(t *testing.T) {
	setup := func(t *testing.T) (*fixture, *Run) {
		f := newFixture(t, func(c *Config) {
			c.Policy = Policy{Irreversible: []string{"wire_money"}}
			c.Approver = QueueApprover{Approvals: c.Store, Timeout: 10 * time.Minute, Poll: time.Second}
		})
		return f, f.start(t, Spec{})
	}
	call := ToolCall{Name: "wire_money", Arguments: json.RawMessage(`{"usd":5000}`)}

	t.Run("approved", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f, r := setup(t)
			var e effect
			go func() {
				time.Sleep(150*time.Second + 500*time.Millisecond)
				p, _ := f.st.ListApprovals(context.Background(), store.ApprovalPending)
				_, _ = f.st.DecideApproval(context.Background(), p[0].ID, store.ApprovalApproved, "alice", "ok", time.Now())
			}()
			start := time.Now()
			res, err := r.Tool(context.Background(), call, e.fn(`"sent"`, nil))
			// The decision lands at 2m30.5s and is read at the next 1s poll.
			if err != nil || string(res) != `"sent"` || time.Since(start) != 151*time.Second {
				t.Fatalf("%s %v after %v", res, err, time.Since(start))
			}
			a, _ := f.st.ListApprovals(context.Background(), "")
			if a[0].DecidedBy != "alice" || a[0].State != store.ApprovalApproved {
				t.Fatalf("%+v", a)
			}
		})
	})
	// The error of a denied call carries who denied it (when recorded)
	// and the note they gave (newcomer finding: the note was dropped).
	for _, c := range []struct{ name, by, note, want string }{
		{"denied", "bob", "order already refunded by phone", ` denied by bob: "order already refunded by phone"`},
		{"denied without a name", "", "duplicate", ` denied: "duplicate"`},
		{"denied without a note", "bob", "", ` denied by bob`},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, r := setup(t)
				var e effect
				go func() {
					time.Sleep(time.Minute)
					p, _ := f.st.ListApprovals(context.Background(), store.ApprovalPending)
					_, _ = f.st.DecideApproval(context.Background(), p[0].ID, store.ApprovalDenied, c.by, c.note, time.Now())
				}()
				_, err := r.Tool(context.Background(), call, e.fn(`"sent"`, nil))
				fe := wantReason(t, err, failure.ApprovalDenied, failure.Fatal)
				a, _ := f.st.ListApprovals(context.Background(), "")
				if want := "tool wire_money: approval " + a[0].ID + c.want; e.n.Load() != 0 || fe.Message != want {
					t.Fatalf("effect ran %d, message %q, want %q", e.n.Load(), fe.Message, want)
				}
			})
		})
	}
	t.Run("timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f, r := setup(t)
			var e effect
			start := time.Now()
			_, err := r.Tool(context.Background(), call, e.fn(`"sent"`, nil))
			wantReason(t, err, failure.ApprovalDenied, failure.Fatal)
			if waited := time.Since(start); waited != 10*time.Minute {
				t.Fatalf("waited %v, want the 10m timeout", waited)
			}
			a, _ := f.st.ListApprovals(context.Background(), "")
			if len(a) != 1 || a[0].State != store.ApprovalExpired || a[0].DecidedBy != "belay:timeout" || e.n.Load() != 0 {
				t.Fatalf("%+v; effect %d", a, e.n.Load())
			}
		})
	})
}

// Newcomer of session 9: an irreversible call repeated with the same
// arguments in a run put a second approval to a human, although it would
// only replay the stored result. A completed key replays without asking;
// a failed-and-stored one likewise.
func TestReplayNeedsNoApproval(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Approver = refundRules()
		c.Policy = Policy{Irreversible: []string{"issue_refund"}}
	})
	ctx := context.Background()
	r := f.start(t, Spec{Tenant: "acme"})
	var e effect
	args := json.RawMessage(`{"amount": 40, "currency": "usd", "order": "o-1"}`)
	for i := range 2 {
		res, err := r.Tool(ctx, ToolCall{Name: "issue_refund", Arguments: args}, e.fn(`{"refunded":40}`, nil))
		if err != nil || string(res) != `{"refunded":40}` {
			t.Fatalf("call %d: %s %v", i, res, err)
		}
	}
	if e.n.Load() != 1 {
		t.Errorf("effect ran %d times, want once", e.n.Load())
	}
	if all, _ := f.st.ListApprovals(ctx, ""); len(all) != 1 {
		t.Errorf("%d approvals asked, want 1: %+v", len(all), all)
	}
	ts := f.sink.byKind(trace.KindTool)
	if len(ts) != 2 || ts[1].Attrs[trace.AttrToolOutcome] != trace.ToolReplayed || ts[1].Attrs[trace.AttrApproval] != nil {
		t.Fatalf("tool spans %+v; want the second replayed with no approval", ts)
	}
	// Arguments that differ are another call: asked again.
	other := json.RawMessage(`{"amount": 41, "currency": "usd", "order": "o-1"}`)
	if _, err := r.Tool(ctx, ToolCall{Name: "issue_refund", Arguments: other}, e.fn(`{"refunded":41}`, nil)); err != nil {
		t.Fatal(err)
	}
	if all, _ := f.st.ListApprovals(ctx, ""); len(all) != 2 || e.n.Load() != 2 {
		t.Errorf("%d approvals, %d effects after a new call; want 2 and 2", len(all), e.n.Load())
	}
}

// deafApprover ignores its context and never decides.
type deafApprover struct{ never chan struct{} }

func (d deafApprover) Decide(context.Context, store.Approval) (store.ApprovalState, string, error) {
	<-d.never
	return store.ApprovalApproved, "late", nil
}

// An approver that ignores its context cannot hold a tool call past the
// run's deadline: the call fails deadline_exceeded then, and its effect
// does not run (adversarial review, session 26: Tool stayed blocked).
func TestDeafApproverCannotHoldTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deaf := deafApprover{never: make(chan struct{})}
		defer close(deaf.never)
		f := newFixture(t, func(c *Config) {
			c.Approver = deaf
			c.Policy = Policy{Irreversible: []string{"wire_money"}}
		})
		ctx := context.Background()
		r := f.start(t, Spec{ID: "deaf", Limits: store.Limits{Deadline: time.Second}})
		start := time.Now()
		ran := false
		errc := make(chan error, 1)
		go func() {
			_, err := r.Tool(ctx, ToolCall{Name: "wire_money", Arguments: json.RawMessage(`{"usd":5}`)},
				func(context.Context) (json.RawMessage, error) { ran = true; return nil, nil })
			errc <- err
		}()
		var err error
		select {
		case err = <-errc:
		case <-time.After(time.Minute):
			t.Fatal("Tool still blocked a minute after the run's deadline")
		}
		if !errors.Is(err, failure.DeadlineExceeded) || ran {
			t.Errorf("Tool: %v (ran %v); want deadline_exceeded, the effect not run", err, ran)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("Tool returned after %v; want 1s, the run's deadline", d)
		}
	})
}

// countingApprover approves, counting the requests it was asked.
type countingApprover struct{ n *atomic.Int32 }

func (c countingApprover) Decide(context.Context, store.Approval) (store.ApprovalState, string, error) {
	c.n.Add(1)
	return store.ApprovalApproved, "counter", nil
}

// A call whose key is in flight in another process (the effect running
// there) is answered in flight at once: no person is asked to approve an
// effect that is already running (adversarial review, session 26).
func TestNoApprovalForACallInFlightElsewhere(t *testing.T) {
	var asked atomic.Int32
	f := newFixture(t, func(c *Config) {
		c.Approver = countingApprover{&asked}
		c.Policy = Policy{Irreversible: []string{"wire_money"}}
	})
	ctx := context.Background()
	m2, err := NewManager(Config{Store: f.st, Pricing: testPricing(t), Sink: f.sink, Owner: "second",
		Approver: countingApprover{&asked}, Policy: Policy{Irreversible: []string{"wire_money"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	r1 := f.start(t, Spec{ID: "wire"})
	r2, err := m2.Get(ctx, "wire")
	if err != nil {
		t.Fatal(err)
	}
	call := ToolCall{Name: "wire_money", Arguments: json.RawMessage(`{"usd":5}`)}
	running, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := r1.Tool(ctx, call, func(context.Context) (json.RawMessage, error) {
			close(running)
			<-release
			return json.RawMessage(`"sent"`), nil
		})
		done <- err
	}()
	<-running
	_, err = r2.Tool(ctx, call, func(context.Context) (json.RawMessage, error) {
		t.Error("the effect ran twice")
		return nil, nil
	})
	if !errors.Is(err, ErrInFlight) {
		t.Errorf("the second process's call: %v; want ErrInFlight", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the approver was asked %d times; want once", n)
	}
}

// A call marked Irreversible waits for its approval though no policy
// names its tool (newcomer finding, session 26: with no config naming it,
// a refund ran at once).
func TestIrreversibleCallNeedsApproval(t *testing.T) {
	var asked atomic.Int32
	f := newFixture(t, func(c *Config) { c.Approver = denyAll{&asked} })
	ctx := context.Background()
	r := f.start(t, Spec{ID: "marked"})
	ran := false
	_, err := r.Tool(ctx, ToolCall{Name: "issue_refund", Irreversible: true, Arguments: json.RawMessage(`{"usd":5}`)},
		func(context.Context) (json.RawMessage, error) { ran = true; return nil, nil })
	if !errors.Is(err, failure.ApprovalDenied) || ran || asked.Load() != 1 {
		t.Errorf("Irreversible call: %v, ran %v, asked %d; want approval_denied, not run, asked once", err, ran, asked.Load())
	}
	if _, err := r.Tool(ctx, ToolCall{Name: "issue_refund", Arguments: json.RawMessage(`{"usd":6}`)},
		func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"ok"`), nil }); err != nil || asked.Load() != 1 {
		t.Errorf("unmarked call: %v, asked %d; want it run without asking", err, asked.Load())
	}
}

// denyAll denies, counting the requests.
type denyAll struct{ n *atomic.Int32 }

func (d denyAll) Decide(context.Context, store.Approval) (store.ApprovalState, string, error) {
	d.n.Add(1)
	return store.ApprovalDenied, "policy", nil
}
