package retry

import (
	"strings"
	"sync"
	"testing"
)

func TestBudgetFloor(t *testing.T) {
	b, err := NewBudget(BudgetSettings{})
	if err != nil {
		t.Fatal(err)
	}
	b.Begin()
	for i := range DefaultMinConcurrency {
		if !b.TryRetry() {
			t.Fatalf("retry %d refused below the floor of %d", i+1, DefaultMinConcurrency)
		}
	}
	if b.TryRetry() {
		t.Fatalf("retry %d allowed with 1 request in flight", DefaultMinConcurrency+1)
	}
	b.DoneRetry()
	if !b.TryRetry() {
		t.Fatal("retry refused after one was released")
	}
}

func TestBudgetRatio(t *testing.T) {
	b, err := NewBudget(BudgetSettings{Ratio: 0.25, MinConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		b.Begin()
	}
	got := 0
	for b.TryRetry() {
		got++
	}
	if got != 5 {
		t.Errorf("retries allowed with 20 in flight at 25%% = %d, want 5", got)
	}
	if req, ret := b.InFlight(); req != 20 || ret != 5 {
		t.Errorf("InFlight = %d, %d, want 20, 5", req, ret)
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b, _ := NewBudget(BudgetSettings{Ratio: 0.5, MinConcurrency: 2})
	for range 10 {
		b.Begin()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 50 {
		wg.Go(func() {
			if b.TryRetry() {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted != 5 {
		t.Errorf("granted %d retries, want exactly 5", granted)
	}
}

func TestBudgetValidate(t *testing.T) {
	for _, tt := range []struct {
		s    BudgetSettings
		want string
	}{
		{BudgetSettings{Ratio: 1.5}, "retry: budget_ratio (1.5) is outside [0, 1]"},
		{BudgetSettings{Ratio: -0.1}, "retry: budget_ratio (-0.1) is outside [0, 1]"},
		{BudgetSettings{MinConcurrency: -2}, "retry: budget_min_concurrency (-2) is negative"},
	} {
		if _, err := NewBudget(tt.s); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("NewBudget(%+v) = %v, want %q", tt.s, err, tt.want)
		}
	}
}

func BenchmarkBudget(b *testing.B) {
	b.ReportAllocs()
	bu, _ := NewBudget(BudgetSettings{})
	for b.Loop() {
		bu.Begin()
		if bu.TryRetry() {
			bu.DoneRetry()
		}
		bu.End()
	}
}
