package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// BenchWriteSpans writes batches of 100 new spans (each with the attributes
// of a model call and one event) and reports spans/s.
func BenchWriteSpans(b *testing.B, s store.Store) {
	ctx := context.Background()
	b.ReportAllocs()
	batch := make([]trace.Span, 100)
	n := 0
	for b.Loop() {
		for i := range batch {
			sp := span("bench", fmt.Sprintf("bench-%09d", n), "root", time.Duration(n)*time.Millisecond)
			sp.Attrs[trace.AttrOutputTokens] = int64(321)
			sp.Attrs[trace.AttrFinishReasons] = []string{"stop"}
			sp.Attrs[trace.AttrCostUSD] = 0.0042
			sp.Events = []trace.Event{{Name: "first_token", Time: sp.Start.Add(300 * time.Millisecond)}}
			batch[i] = sp
			n++
		}
		if err := s.WriteSpans(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "spans/s")
}

// BenchReserveSettle runs one Reserve (two scopes: run and tenant) then one
// Settle per iteration and reports the pairs per second. With parallel > 1
// it runs that many goroutines per GOMAXPROCS (b.SetParallelism).
func BenchReserveSettle(b *testing.B, s store.Store, parallel int) {
	ctx := context.Background()
	b.ReportAllocs()
	var seq atomicCounter
	one := func(i int64) {
		id := fmt.Sprintf("bench-%012d", i)
		r := budget.Reservation{ID: id, Owner: "bench", Amount: budget.Micros(50), ExpiresAt: t0.Add(time.Hour),
			Scopes: []budget.ScopeLimit{
				{Scope: budget.Scope(fmt.Sprintf("run:bench-%d", i%64)), Limit: budget.Dollars(1_000_000)},
				{Scope: "tenant:bench:2026-11", Limit: 0},
			}}
		if err := s.Reserve(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := s.Settle(ctx, id, budget.Micros(42)); err != nil {
			b.Fatal(err)
		}
	}
	if parallel <= 1 {
		for b.Loop() {
			one(seq.next())
		}
	} else {
		b.SetParallelism(parallel)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one(seq.next())
			}
		})
	}
	b.ReportMetric(float64(seq.load())/b.Elapsed().Seconds(), "pairs/s")
}

// BenchModelCall writes what belay serve writes for one model call in a run
// of its own (a call without X-Belay-Run-Id), as background writes
// (store.Deferrable): the run's record with its spend (two scopes, the
// run's and the tenant's), then its three spans (the run, the call with
// the attributes and messages a redacted capture records, the attempt).
// parallel goroutines per GOMAXPROCS write at once (b.SetParallelism), so
// that the writes share commits as under a gateway's load. It reports
// calls/s and the process's CPU time per call (cpu-ns/op): the store's
// share of a call's cost, which bench/gateway's throughput goal feels.
func BenchModelCall(b *testing.B, s store.Store, parallel int) {
	rs, ok := s.(store.RunSpender)
	if !ok {
		b.Skip("the store does not create a run with its spend in one write (store.RunSpender)")
	}
	ctx := store.Deferrable(context.Background())
	b.ReportAllocs()
	messages := `[{"role":"user","content":"Where is my order 8812? It was due on Monday and the tracking page has said 'label created' for a week."}]`
	answer := `[{"index":0,"message":{"role":"assistant","content":"I checked order 8812: the carrier has not scanned it yet. I have asked the warehouse to re-ship it today; you will get a new tracking link by email.","refusal":null},"finish_reason":"stop"}]`
	var seq atomicCounter
	one := func(i int64) {
		id := fmt.Sprintf("01a22f10-%08x-7d7c-b76e-6f696883fd3e", i)
		start := t0.Add(time.Duration(i) * time.Millisecond)
		cost := budget.Micros(18)
		rec := store.Run{ID: id, Tenant: "default", Labels: map[string]string{"source": "gateway"},
			Limits: store.Limits{MaxTurns: 20, Deadline: 5 * time.Minute, MaxCost: budget.Dollars(1)},
			Status: store.RunSucceeded, Started: start, Ended: start.Add(3 * time.Millisecond),
			Turns: 1, InputTokens: 31, OutputTokens: 38, Cost: cost}
		spend := budget.Reservation{ID: "spend-" + id, Owner: "bench", Amount: cost, Spend: true,
			Scopes: []budget.ScopeLimit{{Scope: budget.RunScope(id)}, {Scope: "tenant:default:2026-12"}}}
		if err := rs.CreateRunSpent(ctx, rec, []budget.Reservation{spend}); err != nil {
			b.Fatal(err)
		}
		root := trace.Span{TraceID: "trace-" + id, SpanID: fmt.Sprintf("r%015x", i), RunID: id, Kind: trace.KindRun,
			Name: "invoke_agent", Start: start, End: rec.Ended, Status: trace.StatusOK,
			Attrs: map[string]any{trace.AttrOperationName: "invoke_agent", trace.AttrConversationID: id,
				trace.AttrInputTokens: int64(31), trace.AttrOutputTokens: int64(38), trace.AttrCostUSD: cost.Float(),
				"belay.run.status": "succeeded", "belay.run.turns": int64(1), "belay.tenant": "default"}}
		call := trace.Span{TraceID: root.TraceID, SpanID: fmt.Sprintf("c%015x", i), ParentID: root.SpanID, RunID: id,
			Kind: trace.KindModel, Name: "chat gpt-4o-mini", Start: start, End: rec.Ended, Status: trace.StatusOK,
			Attrs: map[string]any{trace.AttrOperationName: "chat", trace.AttrRequestModel: "gpt-4o-mini",
				trace.AttrResponseModel: "gpt-4o-mini", trace.AttrInputTokens: int64(31), trace.AttrOutputTokens: int64(38),
				trace.AttrFinishReasons: []string{"stop"}, trace.AttrCostUSD: cost.Float(),
				"gen_ai.provider.name": "openai", "gen_ai.response.id": "chatcmpl-" + id,
				"gen_ai.input.messages": messages, "gen_ai.output.messages": answer,
				"belay.deployment": "openai/gpt-4o-mini#0", "belay.model_alias": "gpt-4o-mini"}}
		attempt := trace.Span{TraceID: root.TraceID, SpanID: fmt.Sprintf("a%015x", i), ParentID: call.SpanID, RunID: id,
			Kind: trace.KindAttempt, Name: "attempt openai/gpt-4o-mini#0", Start: start, End: rec.Ended, Status: trace.StatusOK,
			Attrs: map[string]any{"belay.attempt": int64(1), "belay.deployment": "openai/gpt-4o-mini#0", "belay.wait_ms": int64(0)}}
		if err := s.WriteSpans(ctx, []trace.Span{call, attempt, root}); err != nil {
			b.Fatal(err)
		}
	}
	cpu0, cpuOK := processCPU()
	b.SetParallelism(max(parallel, 1))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			one(seq.next())
		}
	})
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(seq.load())/b.Elapsed().Seconds(), "calls/s")
}
