package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// effect is a tool function that counts its runs.
type effect struct{ n atomic.Int32 }

func (e *effect) fn(result string, err error) func(context.Context) (json.RawMessage, error) {
	return func(context.Context) (json.RawMessage, error) {
		e.n.Add(1)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(result), nil
	}
}

func TestIdempotencyKeyIsCanonical(t *testing.T) {
	a := IdempotencyKey("r", "refund", json.RawMessage(`{"b": 2, "a": {"y":1,"x":[1,2]}}`))
	b := IdempotencyKey("r", "refund", json.RawMessage(`{"a":{"x":[1,2],"y":1},"b":2}`))
	if a != b {
		t.Fatalf("keys differ for the same arguments: %s %s", a, b)
	}
	for _, other := range []string{
		IdempotencyKey("r2", "refund", json.RawMessage(`{"a":{"x":[1,2],"y":1},"b":2}`)),
		IdempotencyKey("r", "refund2", json.RawMessage(`{"a":{"x":[1,2],"y":1},"b":2}`)),
		IdempotencyKey("r", "refund", json.RawMessage(`{"a":{"x":[2,1],"y":1},"b":2}`)),
	} {
		if other == a {
			t.Fatal("different calls share a key")
		}
	}
}

func TestToolReplayRunsTheEffectOnce(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	var e effect
	call := ToolCall{Name: "send_invoice", CallID: "call_1", Arguments: json.RawMessage(`{"to":"a@b.c","n":1}`), IdempotencyKey: "invoice-42"}
	r1 := f.start(t, Spec{})
	res, err := r1.Tool(ctx, call, e.fn(`{"sent":true}`, nil))
	if err != nil || string(res) != `{"sent":true}` {
		t.Fatalf("first call %s %v", res, err)
	}
	// Same explicit key from another run: the stored result, no effect.
	r2 := f.start(t, Spec{})
	res, err = r2.Tool(ctx, call, e.fn(`{"sent":"again"}`, nil))
	if err != nil || string(res) != `{"sent":true}` || e.n.Load() != 1 {
		t.Fatalf("replay %s %v, effect ran %d times", res, err, e.n.Load())
	}
	// Derived keys: the same call in the same run replays; another run runs.
	derived := ToolCall{Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}
	_, _ = r1.Tool(ctx, derived, e.fn(`1`, nil))
	_, _ = r1.Tool(ctx, ToolCall{Name: "lookup", Arguments: json.RawMessage(`{ "q" : "x" }`)}, e.fn(`2`, nil))
	res, _ = r2.Tool(ctx, derived, e.fn(`3`, nil))
	if e.n.Load() != 3 || string(res) != "3" {
		t.Fatalf("derived keys: effect ran %d times, last %s", e.n.Load(), res)
	}
	if rec := r1.Record(); rec.ToolCalls != 3 {
		t.Fatalf("tool calls %d", rec.ToolCalls)
	}
	ts := f.sink.byKind(trace.KindTool)
	if len(ts) != 5 || ts[0].Name != "execute_tool send_invoice" || ts[0].Attrs[trace.AttrToolCallID] != "call_1" ||
		ts[0].Attrs[trace.AttrIdempotency] != "invoice-42" || ts[0].Attrs["belay.idempotency.state"] != "new" ||
		ts[1].Attrs["belay.idempotency.state"] != "completed" {
		t.Fatalf("tool spans %+v", ts)
	}
}

func TestToolErrorsAreStoredUnlessNoEffect(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{})
	var e effect
	call := ToolCall{Name: "charge", Arguments: json.RawMessage(`{"cents":100}`)}
	_, err := r.Tool(ctx, call, e.fn("", errors.New("card declined")))
	var te *ToolError
	if !errors.As(err, &te) || te.Replayed || te.Message != "card declined" {
		t.Fatalf("first error %v", err)
	}
	_, err = r.Tool(ctx, call, e.fn(`{}`, nil))
	if !errors.As(err, &te) || !te.Replayed || te.Message != "card declined" || e.n.Load() != 1 {
		t.Fatalf("replayed error %v, effect ran %d", err, e.n.Load())
	}
	// An error that declares no effect frees the key: the next call runs.
	call2 := ToolCall{Name: "charge", Arguments: json.RawMessage(`{"cents":200}`)}
	_, err = r.Tool(ctx, call2, e.fn("", fmt.Errorf("validation: %w", ErrNoEffect)))
	if !errors.Is(err, ErrNoEffect) {
		t.Fatalf("no-effect error %v", err)
	}
	res, err := r.Tool(ctx, call2, e.fn(`{"ok":1}`, nil))
	if err != nil || string(res) != `{"ok":1}` || e.n.Load() != 3 {
		t.Fatalf("after no-effect: %s %v, effect ran %d", res, err, e.n.Load())
	}
}

func TestToolKeyStates(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	f := newFixture(t, func(c *Config) { c.Now = clk.Now })
	ctx := context.Background()
	r := f.start(t, Spec{})
	var e effect
	// Another process holds "k1" with a live lease, and held "k2" but died.
	_, _ = f.st.Claim(ctx, "k1", "other", time.Hour, clk.Now())
	_, _ = f.st.Claim(ctx, "k2", "dead", time.Minute, clk.Now().Add(-time.Hour))

	_, err := r.Tool(ctx, ToolCall{Name: "t", IdempotencyKey: "k1"}, e.fn(`1`, nil))
	wantReason(t, err, failure.Unknown, failure.Transient)
	if !errors.Is(err, ErrInFlight) {
		t.Fatalf("in flight: %v", err)
	}
	_, err = r.Tool(ctx, ToolCall{Name: "t", IdempotencyKey: "k2"}, e.fn(`1`, nil))
	wantReason(t, err, failure.OutcomeUnknown, failure.Fatal)
	if e.n.Load() != 0 {
		t.Fatal("the effect ran for an unknown outcome")
	}
	if r.Record().Status != store.RunRunning {
		t.Fatal("outcome unknown stopped the run")
	}
	res, err := r.Tool(ctx, ToolCall{Name: "t", IdempotencyKey: "k2", SafeToRepeat: true}, e.fn(`"again"`, nil))
	if err != nil || string(res) != `"again"` || e.n.Load() != 1 {
		t.Fatalf("safe to repeat: %s %v", res, err)
	}
	c, _ := f.st.Claim(ctx, "k2", "x", time.Minute, clk.Now())
	if c.State != store.ClaimCompleted || c.Owner != "test-owner" {
		t.Fatalf("k2 after takeover %+v", c)
	}
}

func TestToolRetriesTransientErrorsOnlyWhenSafe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.Rand = func() float64 { return 0.5 } })
		ctx := context.Background()
		r := f.start(t, Spec{})
		pol := &retry.Policy{MaxAttempts: 3, Base: time.Second}
		flaky := func(n *atomic.Int32, failures int32) func(context.Context) (json.RawMessage, error) {
			return func(context.Context) (json.RawMessage, error) {
				if n.Add(1) <= failures {
					return nil, failure.New(failure.Overloaded, "busy")
				}
				return json.RawMessage(`"ok"`), nil
			}
		}
		var safe, unsafe atomic.Int32
		res, err := r.Tool(ctx, ToolCall{Name: "read", SafeToRepeat: true, Retry: pol}, flaky(&safe, 2))
		if err != nil || string(res) != `"ok"` || safe.Load() != 3 {
			t.Fatalf("safe tool: %s %v after %d tries", res, err, safe.Load())
		}
		_, err = r.Tool(ctx, ToolCall{Name: "write", Retry: pol}, flaky(&unsafe, 2))
		if !errors.Is(err, failure.Overloaded) || unsafe.Load() != 1 {
			t.Fatalf("unsafe tool: %v after %d tries", err, unsafe.Load())
		}
		// The spans show every try (session 2: the trace showed one clean
		// call where the tool had timed out and been repeated).
		spans := f.sink.byKind(trace.KindTool)
		if len(spans) != 2 {
			t.Fatalf("%d tool spans", len(spans))
		}
		read, write := spans[0].Attrs, spans[1].Attrs
		if read[AttrToolAttempts] != 3 || len(read[AttrToolRetriedErrors].([]string)) != 2 {
			t.Fatalf("safe tool span attrs %v", read)
		}
		if write[AttrToolAttempts] != 1 || write[AttrToolRetriedErrors] != nil {
			t.Fatalf("unsafe tool span attrs %v", write)
		}
	})
}

func TestDisabledToolFailsFast(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{})
	if err := f.m.Kill(ctx, store.KillTool, "delete_user", "incident 7"); err != nil {
		t.Fatal(err)
	}
	var e effect
	_, err := r.Tool(ctx, ToolCall{Name: "delete_user", Arguments: json.RawMessage(`{}`)}, e.fn(`1`, nil))
	fe := wantReason(t, err, failure.ToolDisabled, failure.Fatal)
	if fe.Message != "tool delete_user is disabled by the kill switch: incident 7" || e.n.Load() != 0 {
		t.Fatalf("%v; effect ran %d", fe, e.n.Load())
	}
	// Only the call is refused: the run and other tools go on.
	if _, err := r.Tool(ctx, ToolCall{Name: "lookup"}, e.fn(`1`, nil)); err != nil || r.Record().Status != store.RunRunning {
		t.Fatalf("other tool: %v, run %s", err, r.Record().Status)
	}
	_ = f.m.Unkill(ctx, store.KillTool, "delete_user")
	if _, err := r.Tool(ctx, ToolCall{Name: "delete_user"}, e.fn(`1`, nil)); err != nil {
		t.Fatalf("after unkill: %v", err)
	}
}

// A number's key is its value's: 40, 40.0, 4e1 and 40.00 are one call, so
// a model that writes the amount again differently does not refund twice
// (adversarial review: each spelling had a key of its own). Different
// values never share a key, however close.
func TestIdempotencyKeyOfNumbersIsTheirValue(t *testing.T) {
	key := func(args string) string { return IdempotencyKey("r1", "issue_refund", json.RawMessage(args)) }
	same := [][]string{
		{`{"amount":40}`, `{"amount":40.0}`, `{"amount":4e1}`, `{"amount":40.00}`, `{"amount":4.0E+1}`, `{"amount":400e-1}`},
		{`{"amount":0}`, `{"amount":-0}`, `{"amount":0.000}`, `{"amount":0e10}`},
		{`{"amount":0.25}`, `{"amount":25e-2}`, `{"amount":0.250}`},
		{`{"amount":-1.5}`, `{"amount":-15e-1}`},
		{`{"id":1e100}`, `{"id":10e99}`},
	}
	for _, group := range same {
		for _, a := range group[1:] {
			if key(a) != key(group[0]) {
				t.Errorf("%s and %s have different keys", group[0], a)
			}
		}
	}
	differ := [][2]string{
		{`{"id":12345678901234567891}`, `{"id":12345678901234567892}`}, // one float64
		{`{"amount":40}`, `{"amount":40.000000000000001}`},
		{`{"amount":40}`, `{"amount":-40}`},
		{`{"amount":40}`, `{"amount":"40"}`},
		{`{"amount":1e100}`, `{"amount":1e101}`},
	}
	for _, d := range differ {
		if key(d[0]) == key(d[1]) {
			t.Errorf("%s and %s share a key", d[0], d[1])
		}
	}
}

// An explicit key deduplicates across the runs of one tenant, never across
// tenants: a run of tenant B naming the key A's refund completed under
// runs its own effect, and does not get A's result (adversarial review).
// The tool sees the key as given.
func TestExplicitKeyIsEachTenants(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	var e effect
	var seen []string
	fn := func(out string) func(context.Context) (json.RawMessage, error) {
		run := e.fn(out, nil)
		return func(ctx context.Context) (json.RawMessage, error) {
			seen = append(seen, IdempotencyKeyFrom(ctx))
			return run(ctx)
		}
	}
	call := ToolCall{Name: "issue_refund", Arguments: json.RawMessage(`{"order":"A-1"}`), IdempotencyKey: "refund-A-1"}
	a1 := f.start(t, Spec{Tenant: "acme"})
	if res, err := a1.Tool(ctx, call, fn(`{"refund":"re_acme"}`)); err != nil || string(res) != `{"refund":"re_acme"}` {
		t.Fatalf("acme: %s %v", res, err)
	}
	b1 := f.start(t, Spec{Tenant: "bob"})
	if res, err := b1.Tool(ctx, call, fn(`{"refund":"re_bob"}`)); err != nil || string(res) != `{"refund":"re_bob"}` {
		t.Fatalf("bob on acme's key: %s %v; want bob's own effect", res, err)
	}
	a2 := f.start(t, Spec{Tenant: "acme"})
	if res, err := a2.Tool(ctx, call, fn(`{"refund":"again"}`)); err != nil || string(res) != `{"refund":"re_acme"}` {
		t.Fatalf("acme's second run: %s %v; want the stored result", res, err)
	}
	if n := e.n.Load(); n != 2 || len(seen) != 2 || seen[0] != "refund-A-1" || seen[1] != "refund-A-1" {
		t.Fatalf("effect ran %d times, with keys %q; want 2, each refund-A-1", n, seen)
	}
	for _, k := range []string{"~4~acmerefund-A-1", "~3~bobrefund-A-1"} {
		if c, err := f.st.Lookup(ctx, k, time.Now()); err != nil || c.State != store.ClaimCompleted {
			t.Errorf("stored key %s: %+v %v", k, c, err)
		}
	}
}

// Arguments a tool decoding into a struct reads as one call share a key
// (member names compared ignoring case, the last of a name kept, as
// encoding/json keeps it); a document with more after it is not the
// document before it (adversarial review: `{"ORDER_ID":…}` had a key of its
// own, and `{…}]` shared the valid call's).
func TestIdempotencyKeyReadsArgumentsAsAStructDoes(t *testing.T) {
	key := func(args string) string { return IdempotencyKey("r1", "issue_refund", json.RawMessage(args)) }
	base := `{"order_id":"A-1002","amount_usd":50}`
	for _, same := range []string{
		`{"ORDER_ID":"A-1002","amount_usd":50}`,
		`{"order_id":"X","Order_Id":"A-1002","amount_usd":50}`,
		`{"amount_usd":50.0,"order_id":"A-1002"}`,
		`{"order_\u0069d":"A-1002","amount_usd":50}`,
		"{ \"order_id\" : \"A-1002\" ,\n \"amount_usd\" : 5e1 }",
	} {
		if key(same) != key(base) {
			t.Errorf("%s: a key of its own; a struct-decoding tool reads it as %s", same, base)
		}
	}
	for _, other := range []string{
		base + `]`,
		base + `}`,
		base + ` {"x":1}`,
		`{"order_id":"a-1002","amount_usd":50}`, // values keep their case
		`{"order_id":"A-1002","amount_usd":50,"note":"again"}`,
	} {
		if key(other) == key(base) {
			t.Errorf("%s shares the key of %s", other, base)
		}
	}
	// The Kelvin sign folds with k, as encoding/json matches it.
	if key(`{"\u212aey":1}`) != key(`{"key":1}`) {
		t.Error("K (U+212A) and k have different keys")
	}
}

// No tenant's explicit key is stored where another's is: neither the
// default tenant's key written as another's stored form, nor a tenant
// whose name holds "~" (adversarial review).
func TestStoredKeysOfTenantsNeverMeet(t *testing.T) {
	type tk struct{ tenant, key string }
	cases := []tk{
		{"acme", "invoice-42"}, {DefaultTenant, "acme~invoice-42"}, {DefaultTenant, "~4~acmeinvoice-42"},
		{"acme~x", "y"}, {"acme", "x~y"}, {DefaultTenant, "invoice-42"}, {"a", "1~b"}, {"a~1", "b"},
		{DefaultTenant, "~"}, {DefaultTenant, "~~"}, {"~", ""}, {"", "~"},
	}
	seen := map[string]tk{}
	for _, c := range cases {
		k := storedKey(c.tenant, c.key)
		if prev, ok := seen[k]; ok {
			t.Errorf("%+v and %+v are both stored as %q", prev, c, k)
		}
		seen[k] = c
	}
	if storedKey(DefaultTenant, "invoice-42") != "invoice-42" {
		t.Error("the default tenant's key is not stored as given")
	}
}
