package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

func TestSettleChargesAndCounts(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{Tenant: "acme", Agent: "support", Limits: store.Limits{MaxCost: budget.Dollars(1)}})
	a, err := r.Admit(ctx, modelStep(cents(20)))
	if err != nil {
		t.Fatal(err)
	}
	if b := f.balance(t, budget.RunScope(r.ID())); b.Reserved != cents(20) {
		t.Fatalf("reserved %s, want $0.20", b.Reserved)
	}
	err = a.Settle(ctx, usage(3, 4), Outcome{ResponseModel: "m-2026", Deployment: "primary", FinishReasons: []string{"stop"},
		Attempts: []AttemptRecord{
			{Deployment: "primary", Duration: time.Millisecond, Failure: failure.New(failure.RateLimited, "slow down")},
			{Deployment: "primary", Wait: 500 * time.Millisecond},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if c, est := a.Cost(); c != cents(11) || est {
		t.Fatalf("Cost() = %s, %v", c, est)
	}
	if err := a.Settle(ctx, usage(1, 1), Outcome{}); !errors.Is(err, ErrSettled) {
		t.Fatalf("second settle: %v", err)
	}
	// 3·1¢ + 4·2¢ = 11¢
	rec := f.stored(t, r.ID())
	if rec.Cost != cents(11) || rec.Turns != 1 || rec.InputTokens != 3 || rec.OutputTokens != 4 {
		t.Fatalf("stored record %+v", rec)
	}
	for _, s := range []budget.Scope{budget.RunScope(r.ID()), budget.TenantScope("acme", budget.Month, time.Now())} {
		if b := f.balance(t, s); b.Settled != cents(11) || b.Reserved != 0 {
			t.Fatalf("%s: %+v", s, b)
		}
	}
	ms := f.sink.byKind(trace.KindModel)
	if len(ms) != 1 || ms[0].Name != "chat m" || ms[0].Attrs[trace.AttrInputTokens] != int64(3) ||
		ms[0].Attrs[trace.AttrResponseModel] != "m-2026" || ms[0].Attrs[trace.AttrCostUSD] != 0.11 ||
		ms[0].ParentID != runSpanIDFor(r.ID()) || ms[0].TraceID != r.TraceID() {
		t.Fatalf("model span %+v", ms)
	}
	at := f.sink.byKind(trace.KindAttempt)
	if len(at) != 2 || at[0].ParentID != ms[0].SpanID || at[0].Attrs[trace.AttrFailureReason] != "rate_limited" ||
		at[1].Attrs[trace.AttrWaitMS] != int64(500) || at[1].Status != trace.StatusOK {
		t.Fatalf("attempt spans %+v", at)
	}
	if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}
	rs := f.sink.byKind(trace.KindRun)
	if len(rs) != 1 || rs[0].Name != "invoke_agent support" || rs[0].Attrs[trace.AttrRunStatus] != "succeeded" || rs[0].End.IsZero() {
		t.Fatalf("run span %+v", rs)
	}
}

// Each limit refuses before any spend, with its reason, and stops the run
// keeping its partial state.
func TestRefusalsStopTheRunBeforeSpend(t *testing.T) {
	cases := []struct {
		name   string
		limits store.Limits
		tenant budget.USD
		prep   func(t *testing.T, f *fixture, r *Run, c *clock)
		step   Step
		want   failure.Reason
	}{
		{"killed", store.Limits{}, 0, func(t *testing.T, f *fixture, r *Run, c *clock) {
			_ = f.st.SetKill(context.Background(), store.Kill{Target: store.KillRun, Name: r.ID()})
			_ = f.m.refreshKills(context.Background())
		}, modelStep(cents(1)), failure.Killed},
		{"model killed", store.Limits{}, 0, func(t *testing.T, f *fixture, r *Run, c *clock) {
			_ = f.m.Kill(context.Background(), store.KillModel, "m", "bad model")
		}, modelStep(cents(1)), failure.Killed},
		{"turns", store.Limits{MaxTurns: 1}, 0, nil, modelStep(cents(1)), failure.MaxTurnsExceeded},
		{"deadline", store.Limits{Deadline: time.Hour}, 0, func(t *testing.T, f *fixture, r *Run, c *clock) {
			c.Add(time.Hour)
		}, modelStep(cents(1)), failure.DeadlineExceeded},
		{"tokens", store.Limits{MaxTokens: 10}, 0, nil, Step{Kind: KindModel, Provider: "test", Model: "m", EstimatedTokens: 9}, failure.BudgetExceeded},
		{"run budget", store.Limits{MaxCost: cents(10)}, 0, nil, modelStep(cents(8)), failure.BudgetExceeded},
		{"tenant budget", store.Limits{}, cents(10), nil, modelStep(cents(8)), failure.BudgetExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
			f := newFixture(t, func(cfg *Config) {
				cfg.Now = clk.Now
				cfg.TenantBudgets = map[string]TenantBudget{"acme": {Limit: c.tenant}}
			})
			ctx := context.Background()
			r := f.start(t, Spec{Tenant: "acme", Limits: c.limits})
			// One settled turn first: 1 input + 1 output token = 3¢, 2 tokens.
			if err := r.Call(ctx, modelStep(cents(3)), func(context.Context) (budget.Usage, error) { return usage(1, 1), nil }); err != nil {
				t.Fatal(err)
			}
			if c.prep != nil {
				c.prep(t, f, r, clk)
			}
			called := false
			err := r.Call(ctx, c.step, func(context.Context) (budget.Usage, error) { called = true; return usage(1, 1), nil })
			wantReason(t, err, c.want, failure.Fatal)
			if called {
				t.Fatal("the refused step ran")
			}
			rb := f.balance(t, budget.RunScope(r.ID()))
			tb := f.balance(t, budget.TenantScope("acme", budget.Month, clk.Now()))
			if rb.Settled != cents(3) || rb.Reserved != 0 || tb.Settled != cents(3) || tb.Reserved != 0 {
				t.Fatalf("ledger after refusal: run %+v tenant %+v", rb, tb)
			}
			rec := f.stored(t, r.ID())
			if rec.Status != store.RunStopped || rec.StopReason != string(c.want) || rec.Turns != 1 ||
				rec.Cost != cents(3) || rec.InputTokens != 1 || rec.OutputTokens != 1 {
				t.Fatalf("stored record %+v", rec)
			}
			if r.Context().Err() == nil {
				t.Fatal("run context still live after stop")
			}
			// Later steps are refused with the same reason.
			_, err = r.Admit(ctx, modelStep(0))
			wantReason(t, err, c.want, failure.Fatal)
			// Finish keeps the first ending.
			_ = r.Finish(ctx, store.RunSucceeded, nil)
			if rec := f.stored(t, r.ID()); rec.Status != store.RunStopped {
				t.Fatalf("finish replaced the stop: %+v", rec)
			}
		})
	}
}

// With every limit broken at once, the refusal names the first in order.
func TestAdmissionOrder(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	f := newFixture(t, func(cfg *Config) { cfg.Now = clk.Now })
	ctx := context.Background()
	lim := store.Limits{MaxTurns: 1, Deadline: time.Minute, MaxTokens: 2, MaxCost: cents(3)}
	order := []failure.Reason{failure.Killed, failure.MaxTurnsExceeded, failure.DeadlineExceeded, failure.BudgetExceeded, failure.BudgetExceeded}
	for i, want := range order {
		r := f.start(t, Spec{Tenant: fmt.Sprint("t", i), Limits: lim})
		if err := r.Call(ctx, modelStep(cents(3)), func(context.Context) (budget.Usage, error) { return usage(1, 1), nil }); err != nil {
			t.Fatal(err)
		}
		lim := lim
		if i == 0 {
			_ = f.m.Kill(ctx, store.KillTenant, fmt.Sprint("t", i), "")
		}
		if i >= 2 {
			lim.MaxTurns = 0
		}
		if i >= 3 {
			lim.Deadline = 0
		}
		if i >= 4 {
			lim.MaxTokens = 0
		}
		r.mu.Lock()
		r.rec.Limits = lim
		if lim.Deadline == 0 {
			r.deadline = time.Time{}
		}
		r.mu.Unlock()
		clk.Add(2 * time.Minute)
		_, err := r.Admit(ctx, Step{Kind: KindModel, Provider: "test", Model: "m", EstimatedCost: cents(1), EstimatedTokens: 1})
		fe := wantReason(t, err, want, failure.Fatal)
		if i == 4 && !errors.Is(fe, budget.ErrExceeded) {
			t.Fatalf("case %d: budget refusal should wrap budget.ErrExceeded: %v", i, fe)
		}
		if i == 3 && errors.Is(fe, budget.ErrExceeded) {
			t.Fatalf("case %d: token refusal came from the ledger: %v", i, fe)
		}
	}
}

func TestBudgetNeverExceededWithConcurrentSteps(t *testing.T) {
	f := newFixture(t, func(cfg *Config) {
		cfg.TenantBudgets = map[string]TenantBudget{"acme": {Limit: budget.Dollars(1)}}
	})
	ctx := context.Background()
	var mu sync.Mutex
	ok, runsCost := 0, budget.USD(0)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r := f.start(t, Spec{ID: fmt.Sprint("run-", i), Tenant: "acme"})
			var inner sync.WaitGroup
			for range 10 {
				inner.Go(func() {
					// 5 input tokens = 5¢, exactly the estimate.
					err := r.Call(ctx, modelStep(cents(5)), func(context.Context) (budget.Usage, error) { return usage(5, 0), nil })
					if err == nil {
						mu.Lock()
						ok++
						mu.Unlock()
					} else if !errors.Is(err, failure.BudgetExceeded) {
						t.Error(err)
					}
				})
			}
			inner.Wait()
			mu.Lock()
			runsCost = runsCost.Add(r.Record().Cost)
			mu.Unlock()
		})
	}
	wg.Wait()
	b := f.balance(t, budget.TenantScope("acme", budget.Month, time.Now()))
	if b.Settled > budget.Dollars(1) || b.Reserved != 0 || b.Settled != cents(5*int64(ok)) || runsCost != b.Settled {
		t.Fatalf("tenant %+v after %d successful steps, runs total %s", b, ok, runsCost)
	}
	if ok != 20 {
		t.Fatalf("%d steps fit in $1 at 5¢, want 20", ok)
	}
}

func TestTenantAlertsFireOncePerPeriod(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	var mu sync.Mutex
	var got []budget.Alert
	f := newFixture(t, func(cfg *Config) {
		cfg.Now = clk.Now
		cfg.TenantBudgets = map[string]TenantBudget{"acme": {Limit: budget.Dollars(1), AlertAt: []float64{0.5, 0.8, 0.95}}}
		cfg.OnAlert = func(a budget.Alert) { mu.Lock(); got = append(got, a); mu.Unlock() }
	})
	ctx := context.Background()
	spend := func(r *Run, c int64) {
		t.Helper()
		if err := r.Call(ctx, modelStep(cents(c)), func(context.Context) (budget.Usage, error) { return usage(c, 0), nil }); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(ctx); err != nil { // the settle and the alert check run in the background
			t.Fatal(err)
		}
	}
	r1, r2 := f.start(t, Spec{Tenant: "acme"}), f.start(t, Spec{Tenant: "acme"})
	spend(r1, 30)
	spend(r2, 30) // 60%: crosses 0.5
	spend(r1, 25) // 85%: crosses 0.8
	spend(r2, 5)  // 90%: nothing new
	mu.Lock()
	if len(got) != 2 || got[0].Threshold != 0.5 || got[1].Threshold != 0.8 || got[1].Settled != cents(85) ||
		got[0].Scope != "tenant:acme:2026-11" {
		t.Fatalf("alerts %v", got)
	}
	mu.Unlock()
	clk.Add(3 * 24 * time.Hour) // December: a new period
	r3 := f.start(t, Spec{Tenant: "acme"})
	spend(r3, 96)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 5 || got[4].Scope != "tenant:acme:2026-12" || got[4].Threshold != 0.95 {
		t.Fatalf("alerts after the period changed %v", got)
	}
	_ = r1.Finish(ctx, store.RunSucceeded, nil)
	var events int
	for _, sp := range f.sink.byKind(trace.KindRun) {
		for _, e := range sp.Events {
			if e.Name == "budget.alert" {
				events++
			}
		}
	}
	if events != 1 { // r1's settle crossed 0.8; r2 crossed 0.5 and is not finished
		t.Fatalf("%d budget.alert events on r1's span", events)
	}
}

func TestUnknownModelIsChargedItsEstimate(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{})
	err := r.Call(ctx, Step{Provider: "test", Model: "mystery", EstimatedCost: cents(7)},
		func(context.Context) (budget.Usage, error) { return usage(100, 100), nil })
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.Record(); rec.Cost != cents(7) || !r.CostEstimated() || !rec.CostEstimated {
		t.Fatalf("cost %s estimated %v (record %v); want the 7¢ estimate, marked", rec.Cost, r.CostEstimated(), rec.CostEstimated)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if stored, err := f.st.GetRun(ctx, r.ID()); err != nil || !stored.CostEstimated {
		t.Fatalf("stored record: %+v %v; want its cost marked estimated", stored, err)
	}
	if ms := f.sink.byKind(trace.KindModel); ms[0].Attrs[trace.AttrCostEstimated] != true {
		t.Fatalf("span not marked estimated: %+v", ms[0].Attrs)
	}
}

func TestEstimateFromTokens(t *testing.T) {
	f := newFixture(t, nil)
	r := f.start(t, Spec{})
	a, err := r.Admit(context.Background(), Step{Provider: "test", Model: "m", PromptTokens: 10, MaxOutputTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	// 10·1¢ + 5·2¢
	if s := a.Step(); s.EstimatedCost != cents(20) || s.EstimatedTokens != 15 {
		t.Fatalf("step %+v", s)
	}
	if err := a.Fail(context.Background(), errors.New("boom")); err != nil {
		t.Fatal(err)
	}
	if b := f.balance(t, budget.RunScope(r.ID())); b.Reserved != 0 || b.Settled != 0 {
		t.Fatalf("after Fail %+v", b)
	}
	if rec := r.Record(); rec.Turns != 1 || rec.Status != store.RunRunning {
		t.Fatalf("after Fail %+v", rec)
	}
}

func TestGetResumesStoredRun(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	r := f.start(t, Spec{ID: "r1", Tenant: "acme", Limits: store.Limits{MaxTurns: 2}})
	if got, _ := f.m.Get(ctx, "r1"); got != r {
		t.Fatal("Get did not return the live run")
	}
	_ = r.Call(ctx, modelStep(cents(3)), func(context.Context) (budget.Usage, error) { return usage(1, 1), nil })
	_ = r.Flush(ctx) // the record is written in the background

	// Another process picks the run up from the store.
	m2, err := NewManager(Config{Store: f.st, Pricing: testPricing(t), Sink: f.sink})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	r2, err := m2.Resume(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if rec := r2.Record(); rec.Turns != 1 || rec.Cost != cents(3) || r2.TraceID() != r.TraceID() {
		t.Fatalf("resumed %+v", rec)
	}
	_ = r2.Call(ctx, modelStep(cents(3)), func(context.Context) (budget.Usage, error) { return usage(1, 1), nil })
	_, err = r2.Admit(ctx, modelStep(0))
	wantReason(t, err, failure.MaxTurnsExceeded, failure.Fatal)
	if _, err := m2.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(nope) = %v", err)
	}
	ended, err := m2.Get(ctx, "r1")
	if err != nil || ended.Record().Status != store.RunStopped {
		t.Fatalf("ended run %+v %v", ended.Record(), err)
	}
}

func TestNewManagerValidates(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Store: nil},
	} {
		if _, err := NewManager(cfg); err == nil {
			t.Errorf("NewManager(%+v) accepted", cfg)
		}
	}
	f := newFixture(t, nil)
	for _, cfg := range []Config{
		{Store: f.st, Policy: Policy{Irreversible: []string{"[bad"}}},
		{Store: f.st, RunAlertAt: []float64{1.5}},
		{Store: f.st, TenantBudgets: map[string]TenantBudget{"a": {Period: "week"}}},
	} {
		if _, err := NewManager(cfg); err == nil {
			t.Errorf("NewManager(%+v) accepted", cfg)
		}
	}
}

// gateStore holds each ReserveAll until gate is closed, announcing it on
// entered.
type gateStore struct {
	*memstore.Store
	entered chan struct{}
	gate    chan struct{}
}

func (g *gateStore) ReserveAll(ctx context.Context, rs []budget.Reservation) error {
	select {
	case g.entered <- struct{}{}:
	default: // a refused reservation asked again (holdWaits): announced once
	}
	<-g.gate
	return g.Store.ReserveAll(ctx, rs)
}

// Adversary of session 9: with all of a run's turns taken by steps whose
// reservations were still in flight, a further step was refused with
// max_turns_exceeded and stopped the run for it, although those steps
// were then refused for money and the run had used fewer turns. The
// further step is refused, the run goes on, and it stops for what the
// in-flight steps meet: here the money limit.
func TestTurnsTakenByStepsStillReserving(t *testing.T) {
	ms := memstore.New()
	gs := &gateStore{Store: ms, entered: make(chan struct{}, 3), gate: make(chan struct{})}
	f := newFixture(t, func(c *Config) { c.Store = gs })
	ctx := context.Background()
	r := f.start(t, Spec{Tenant: "acme", Limits: store.Limits{MaxTurns: 3, MaxCost: cents(10)}})
	type admitted struct {
		a   *Admitted
		err error
	}
	errs := make(chan admitted, 3)
	for range 3 {
		go func() {
			a, err := r.Admit(ctx, modelStep(cents(6))) // one fits the $0.10
			errs <- admitted{a, err}
		}()
	}
	for range 3 {
		<-gs.entered
	}
	_, err := r.Admit(ctx, modelStep(cents(1)))
	if fe := wantReason(t, err, failure.MaxTurnsExceeded, failure.Fatal); !strings.Contains(fe.Message, "being admitted") {
		t.Errorf("refusal %q; want it to say the turns are in flight", fe.Message)
	}
	if r.isEnded() {
		t.Fatal("the run stopped on a refusal whose turns were still being reserved")
	}
	close(gs.gate)
	var ok, budgetRefused int
	var steps []*Admitted
	for range 3 {
		got := <-errs
		switch err := got.err; {
		case err == nil:
			ok++
			steps = append(steps, got.a)
		case errors.Is(err, failure.BudgetExceeded):
			budgetRefused++
		default:
			t.Errorf("step: %v", err)
		}
	}
	for _, a := range steps {
		if err := a.Settle(ctx, usage(2, 1), Outcome{}); err != nil {
			t.Error(err)
		}
	}
	_ = f.m.FlushRun(ctx, r.ID())
	rec, err := ms.GetRun(ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if ok != 1 || budgetRefused != 2 || rec.Status != store.RunStopped || rec.StopReason != string(failure.BudgetExceeded) || rec.Turns != 1 {
		t.Fatalf("%d steps ran, %d refused for money; run %s/%s with %d turns; want 1, 2, stopped for budget_exceeded after 1 turn",
			ok, budgetRefused, rec.Status, rec.StopReason, rec.Turns)
	}
}
