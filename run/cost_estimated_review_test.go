package run

import (
	"context"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// Review: a run this process held idle (evicted, still referenced) is
// revived by Get with the stored record (refresh). Another process had
// settled an estimated step meanwhile: the stored record is marked
// cost_estimated. The revived run must keep the mark: in Record, in
// CostEstimated, after its next exact settle, and on the run span.
func TestReviewCostEstimatedSurvivesRefresh(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	f := newFixture(t, func(c *Config) { c.IdleTTL = time.Minute; c.Now = clk.Now })
	r := f.start(t, Spec{ID: "est-1", Tenant: "acme"})
	a, err := r.Admit(ctx, modelStep(cents(10)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, usage(1, 1), Outcome{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	m2 := f.second(t)
	r2, err := m2.Get(ctx, "est-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r2.Admit(ctx, modelStep(cents(10)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Settle(ctx, usage(1, 1), Outcome{Estimated: true}); err != nil {
		t.Fatal(err)
	}
	if err := r2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, _ := f.st.GetRun(ctx, "est-1"); !rec.CostEstimated {
		t.Fatalf("stored after B's estimated step: CostEstimated false")
	}

	clk.Add(2 * time.Minute)
	if !f.m.evict(r, true) {
		t.Fatal("not evicted")
	}
	rA, err := f.m.Get(ctx, "est-1")
	if err != nil {
		t.Fatal(err)
	}
	if rA != r {
		t.Fatal("not the held object")
	}
	t.Logf("after revive: Record().CostEstimated=%v CostEstimated()=%v", rA.Record().CostEstimated, rA.CostEstimated())
	if !rA.CostEstimated() {
		t.Errorf("revived run: CostEstimated() false, stored record true")
	}
	a, err = rA.Admit(ctx, modelStep(cents(10)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, usage(1, 1), Outcome{}); err != nil {
		t.Fatal(err)
	}
	if !rA.Record().CostEstimated {
		t.Errorf("after an exact settle: Record().CostEstimated false (in memory), stored true")
	}
	if rec, ok := f.m.Held("est-1", "acme"); ok && !rec.CostEstimated {
		t.Errorf("Held (GET /v1/belay/runs/{id} while held): cost_estimated false")
	}
	if err := rA.Finish(ctx, store.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	spans := f.sink.byKind(trace.KindRun)
	last := spans[len(spans)-1]
	if last.Attrs[trace.AttrCostEstimated] != true {
		t.Errorf("final run span: no %s (trace show would not mark the cost estimated)", trace.AttrCostEstimated)
	}
	if rec, _ := f.st.GetRun(ctx, "est-1"); !rec.CostEstimated {
		t.Errorf("stored final: CostEstimated false")
	}
}
