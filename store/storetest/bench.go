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
