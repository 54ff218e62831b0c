package run

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/store/sqlite"
)

// BenchmarkModelStep measures one model step through the store (Admit,
// then Settle with usage), as the gateway does for each request: the turn
// reserved in the run's turn scope (with a turn limit), the money reserved in the run's and
// the tenant's scopes, the settle, the run record written.
func BenchmarkModelStep(b *testing.B) {
	for _, c := range []struct {
		backend  string
		maxTurns int
	}{{"memstore", 0}, {"memstore", 1 << 30}, {"sqlite", 0}, {"sqlite", 1 << 30}} {
		backend := c.backend
		name := backend + "/no_turn_limit"
		if c.maxTurns > 0 {
			name = backend + "/turn_limit"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			st := benchStore(b, backend)
			m, err := NewManager(Config{Store: st, KillPoll: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			r, err := m.Start(ctx, Spec{Tenant: "acme", Limits: store.Limits{MaxTurns: c.maxTurns}})
			if err != nil {
				b.Fatal(err)
			}
			step := Step{Kind: KindModel, Provider: "openai", Model: "gpt-4o-mini", PromptTokens: 500, MaxOutputTokens: 200}
			u := budget.Usage{InputTokens: 500, OutputTokens: 120}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				a, err := r.Admit(ctx, step)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Settle(ctx, u, Outcome{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchStore returns a memstore, or for backend "sqlite" a SQLite store in
// the benchmark's temporary folder, closed when it ends.
func benchStore(b *testing.B, backend string) store.Store {
	if backend != "sqlite" {
		return memstore.New()
	}
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "belay.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
