package run

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
)

// BenchmarkKillLatency measures how long an in-flight step takes to see a
// kill, as p50 and p99 in milliseconds over b.N kills:
//
//   - manager: the operator's Kill goes through this process's Manager
//     (the gateway's admin API, `belay kill` against the gateway);
//   - store: the flag is written to the store directly, as another process
//     would (`belay kill` against a shared store), and pushed to the
//     Manager (memstore, like PostgreSQL's LISTEN/NOTIFY);
//   - sqlite: the same through an SQLite file, found by the Manager's
//     50 ms poll.
//
// Goal (issue 3): p99 within 100 ms in one process.
func BenchmarkKillLatency(b *testing.B) {
	for _, via := range []string{"manager", "store", "sqlite"} {
		b.Run(via, func(b *testing.B) {
			ctx := context.Background()
			st := benchStore(b, via)
			m, err := NewManager(Config{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				r, err := m.Start(ctx, Spec{})
				if err != nil {
					b.Fatal(err)
				}
				a, err := r.Admit(ctx, Step{Kind: KindModel, Provider: "openai", Model: "gpt-4o-mini", PromptTokens: 10})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if via == "manager" {
					err = m.Kill(ctx, store.KillRun, r.ID(), "bench")
				} else {
					err = st.SetKill(ctx, store.Kill{Target: store.KillRun, Name: r.ID(), At: start})
				}
				if err != nil {
					b.Fatal(err)
				}
				<-a.Context().Done()
				lat = append(lat, time.Since(start))
				_ = a.Fail(ctx, context.Canceled)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[(len(lat)*99)/100])/1e6, "p99-ms")
		})
	}
}
