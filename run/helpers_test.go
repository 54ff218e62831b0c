package run

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// testPricing prices model "m" of provider "test" at $0.01 per input token
// and $0.02 per output token, so costs are easy to read.
func testPricing(t *testing.T) *budget.Pricing {
	t.Helper()
	p, err := budget.NewPricing(budget.PricingOptions{
		NoBuiltin: true,
		Overrides: map[string]budget.Price{"test/m": {Input: budget.Dollars(10_000), Output: budget.Dollars(20_000)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func cents(n int64) budget.USD { return budget.Micros(n * 10_000) }

type recSink struct {
	mu    sync.Mutex
	spans []trace.Span
}

func (s *recSink) Record(sp trace.Span) {
	s.mu.Lock()
	s.spans = append(s.spans, sp)
	s.mu.Unlock()
}

// byKind returns the latest version of each span of kind k, in first-seen
// order.
func (s *recSink) byKind(k trace.SpanKind) []trace.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := map[string]int{}
	var out []trace.Span
	for _, sp := range s.spans {
		if sp.Kind != k {
			continue
		}
		if i, ok := idx[sp.SpanID]; ok {
			out[i] = sp
			continue
		}
		idx[sp.SpanID] = len(out)
		out = append(out, sp)
	}
	return out
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	st   *memstore.Store
	m    *Manager
	sink *recSink
}

// newFixture builds a Manager over a fresh memstore; edit may change the
// config before it is used.
func newFixture(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	f := &fixture{st: memstore.New(), sink: &recSink{}}
	cfg := Config{Store: f.st, Pricing: testPricing(t), Sink: f.sink, Owner: "test-owner"}
	if edit != nil {
		edit(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	t.Cleanup(func() { _ = m.Close() })
	return f
}

// second returns another Manager on the fixture's store and sink: a
// second process sharing the store (closed when t ends).
func (f *fixture) second(t *testing.T) *Manager {
	t.Helper()
	m, err := NewManager(Config{Store: f.st, Pricing: testPricing(t), Sink: f.sink, Owner: "second"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func (f *fixture) start(t *testing.T, s Spec) *Run {
	t.Helper()
	r, err := f.m.Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// balance returns a scope's balance once the background ledger writes of
// the live runs have landed.
func (f *fixture) balance(t *testing.T, s budget.Scope) budget.Balance {
	t.Helper()
	if err := f.m.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := f.st.Balance(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stored returns the run's stored record once the background writes of
// the live run (if it is live) have landed.
func (f *fixture) stored(t *testing.T, id string) store.Run {
	t.Helper()
	_ = f.m.FlushRun(context.Background(), id)
	rec, err := f.st.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// usage of in input and out output tokens: in+2·out cents at testPricing.
func usage(in, out int64) budget.Usage { return budget.Usage{InputTokens: in, OutputTokens: out} }

func modelStep(est budget.USD) Step {
	return Step{Kind: KindModel, Provider: "test", Model: "m", EstimatedCost: est}
}

func wantReason(t *testing.T, err error, r failure.Reason, k failure.Kind) *failure.Error {
	t.Helper()
	fe := failure.As(err)
	if fe == nil || fe.Reason != r || fe.Kind != k {
		t.Fatalf("err = %v, want %s %s", err, k, r)
	}
	return fe
}
