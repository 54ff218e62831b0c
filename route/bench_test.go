package route

import (
	"context"
	"testing"

	"github.com/belay-run/belay/failure"
)

func BenchmarkDoSuccess(b *testing.B) {
	b.ReportAllocs()
	r := mustRouter(b, testConfig())
	ctx := context.Background()
	call := func(context.Context, *Deployment) error { return nil }
	for b.Loop() {
		if _, err := r.Do(ctx, "smart", call); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDoSuccessParallel(b *testing.B) {
	b.ReportAllocs()
	r := mustRouter(b, testConfig())
	ctx := context.Background()
	call := func(context.Context, *Deployment) error { return nil }
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = r.Do(ctx, "smart", call)
		}
	})
}

func BenchmarkDoAllOpen(b *testing.B) {
	b.ReportAllocs()
	cfg := testConfig()
	cfg.Breaker.ConsecutiveFailures = 1
	r := mustRouter(b, cfg)
	for _, n := range []string{"a", "b", "c"} {
		tk, _ := r.Breaker(n).Allow()
		tk.Done(failure.New(failure.ServerError, "x"))
	}
	ctx := context.Background()
	call := func(context.Context, *Deployment) error { return nil }
	for b.Loop() {
		if _, err := r.Do(ctx, "smart", call); err == nil {
			b.Fatal("served")
		}
	}
}

func TestSuccessPathAllocs(t *testing.T) {
	r := mustRouter(t, testConfig())
	ctx := context.Background()
	call := func(context.Context, *Deployment) error { return nil }
	if n := testing.AllocsPerRun(200, func() { _, _ = r.Do(ctx, "smart", call) }); n > 0 {
		t.Errorf("success path allocates %v times per call, want 0", n)
	}
}

func TestRejectionPathAllocs(t *testing.T) {
	cfg := testConfig()
	cfg.Breaker.ConsecutiveFailures = 1
	r := mustRouter(t, cfg)
	for _, n := range []string{"a", "b", "c"} {
		tk, _ := r.Breaker(n).Allow()
		tk.Done(failure.New(failure.ServerError, "x"))
	}
	ctx := context.Background()
	call := func(context.Context, *Deployment) error { return nil }
	if n := testing.AllocsPerRun(200, func() { _, _ = r.Do(ctx, "smart", call) }); n > 0 {
		t.Errorf("all-open path allocates %v times per call, want 0", n)
	}
}
