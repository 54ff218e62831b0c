package run

import (
	"context"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
)

// BenchmarkSingleCall measures the run layer's part of a gateway call
// whose client names no run: a Fresh, Single run started, its one model
// step admitted in memory, quoted and settled (the record, the spend and
// the spans written in the background), as gateway.runTurns does for each
// such request. "admit" fails the step once admitted (nothing to charge,
// the run ends with it), which leaves out the quote, the charge and the
// step's usage: most of what differs is the settle.
func BenchmarkSingleCall(b *testing.B) {
	for _, backend := range []string{"memstore", "sqlite"} {
		for _, part := range []string{"admit", "whole"} {
			b.Run(backend+"/"+part, func(b *testing.B) {
				ctx := context.Background()
				st := benchStore(b, backend)
				m, err := NewManager(Config{Store: st, KillPoll: -1, FirstStepInMemory: true})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				limits := store.Limits{MaxTurns: 20, Deadline: 300e9, MaxCost: budget.Dollars(1)}
				step := Step{Kind: KindModel, Provider: "openai", Model: "gpt-4o-mini", PromptTokens: 500, MaxOutputTokens: 200}
				u := budget.Usage{InputTokens: 500, OutputTokens: 120}
				b.ReportAllocs()
				for b.Loop() {
					r, err := m.Start(ctx, Spec{Tenant: "default", Limits: limits, Fresh: true, Single: true,
						Labels: map[string]string{"source": "gateway"}})
					if err != nil {
						b.Fatal(err)
					}
					a, err := r.Admit(ctx, step)
					if err != nil {
						b.Fatal(err)
					}
					if part == "admit" {
						_ = a.Fail(ctx, nil)
						continue
					}
					a.Quote(u, Outcome{})
					if err := a.Settle(ctx, u, Outcome{}); err != nil {
						b.Fatal(err)
					}
				}
				if err := m.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
