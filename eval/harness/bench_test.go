package harness_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/eval/harness"
	"github.com/belay-run/belay/store/sqlite"
)

// suiteRuns is the number of scenario runs one iteration of
// BenchmarkSuite10k does, at least: the goal is 10,000 runs of the example
// suite with the agent in-process within 60 s.
const suiteRuns = 10_000

// BenchmarkSuite10k runs the example suite about 10,000 times (runs per
// scenario = ⌈10000/7⌉) with the refund agent in-process, on a SQLite store
// in a temporary folder and the simulator without faults. Run it with
//
//	go test -run x -bench Suite10k -benchtime 1x ./eval/harness
//
// and read runs/s and s/10k-runs; the goal is s/10k-runs ≤ 60.
func BenchmarkSuite10k(b *testing.B) {
	s := loadExample(b, registerRefundAgent())
	sim := *s.Providers.Sim
	sim.Profile = "none"
	s.Providers.Sim = &sim
	perScenario := (suiteRuns + len(s.Scenarios) - 1) / len(s.Scenarios)
	b.ReportAllocs()
	var total int
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "belay.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		rep, err := eval.Run(b.Context(), s, harness.Factory(st), eval.Options{Runs: perScenario})
		elapsed += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		total += rep.Overall.Runs
		if rep.Overall.Runs != perScenario*len(s.Scenarios) {
			b.Fatalf("%d runs, want %d", rep.Overall.Runs, perScenario*len(s.Scenarios))
		}
		if rep.Overall.FailuresByReason["harness"] > 0 {
			b.Fatalf("harness failures: %v", rep.Overall.FailuresByReason)
		}
		b.Logf("%d runs in %.1fs: pass rate %.3f, failures %v", rep.Overall.Runs, rep.Duration, rep.Overall.PassRate, rep.Overall.FailuresByReason)
		for _, sc := range rep.Scenarios {
			b.Logf("  %-26s p50 %6.1f ms  p95 %6.1f ms", sc.Name, sc.P50MS, sc.P95MS)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	runsPerSec := float64(total) / elapsed.Seconds()
	b.ReportMetric(runsPerSec, "runs/s")
	b.ReportMetric(suiteRuns/runsPerSec, "s/10k-runs")
}
