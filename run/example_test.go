package run_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/route"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// A run with limits, one model call routed with fallback, and an
// irreversible tool that is approved by rule and runs once although the
// agent asks twice.
func Example() {
	ctx := context.Background()
	mgr, err := run.NewManager(run.Config{
		Store:  memstore.New(),
		Policy: run.Policy{Irreversible: []string{"issue_refund"}},
		Approver: run.RuleApprover{Rules: []run.Rule{{
			Tool: "issue_refund", If: []run.Predicate{run.ArgAtMost("amount", 100)}, Decision: store.ApprovalApproved,
		}}},
	})
	if err != nil {
		panic(err)
	}
	defer mgr.Close()
	router, err := route.New(route.Config{
		Deployments: []route.Deployment{
			{Name: "openai", Provider: "openai", Model: "gpt-4o-mini"},
			{Name: "azure", Provider: "azure", Model: "gpt-4o-mini"},
		},
		Aliases: []route.Alias{{Name: "fast", Deployments: []string{"openai", "azure"}}},
	})
	if err != nil {
		panic(err)
	}

	r, err := mgr.Start(ctx, run.Spec{Tenant: "acme", Agent: "support",
		Limits: store.Limits{MaxTurns: 5, MaxCost: budget.Dollars(1)}})
	if err != nil {
		panic(err)
	}

	// A model call: admit (reserves prompt + max_tokens at list price),
	// route, settle the usage the provider reported.
	turn, err := r.Admit(ctx, run.Step{Provider: "openai", Model: "gpt-4o-mini", Alias: "fast",
		PromptTokens: 1000, MaxOutputTokens: 500})
	if err != nil {
		panic(err)
	}
	var u budget.Usage
	res, err := router.Do(turn.Context(), "fast", func(ctx context.Context, d *route.Deployment) error {
		if d.Name == "openai" { // a fake provider: out of quota, then served by azure
			return failure.New(failure.QuotaExhausted, "insufficient_quota")
		}
		u = budget.UsageFromOpenAI(1000, 200, 0, 0)
		return nil
	})
	if err != nil {
		panic(err)
	}
	var attempts []run.AttemptRecord
	for _, a := range res.Attempts() {
		attempts = append(attempts, run.AttemptRecord{Deployment: a.Deployment, Start: a.Start,
			Duration: a.Duration, Wait: a.Wait, Failure: a.Failure})
	}
	err = turn.Settle(ctx, u, run.Outcome{Provider: res.Deployment.Provider, Model: res.Deployment.Model,
		Deployment: res.Deployment.Name, Degraded: res.Degraded, Attempts: attempts})
	if err != nil {
		panic(err)
	}

	// An irreversible tool call, asked for twice.
	refunds := 0
	refund := run.ToolCall{Name: "issue_refund", Arguments: json.RawMessage(`{"order": "o-1", "amount": 40}`)}
	for range 2 {
		out, err := r.Tool(ctx, refund, func(ctx context.Context) (json.RawMessage, error) {
			refunds++
			return json.RawMessage(`{"refunded": 40}`), nil
		})
		fmt.Println(string(out), err)
	}

	if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
		panic(err)
	}
	rec := r.Record()
	fmt.Println("served by:", res.Deployment.Name, "degraded:", res.Degraded)
	fmt.Println("status:", rec.Status, "turns:", rec.Turns, "tool calls:", rec.ToolCalls, "refunds:", refunds)
	fmt.Println("cost:", rec.Cost)
	// Output:
	// {"refunded": 40} <nil>
	// {"refunded": 40} <nil>
	// served by: azure degraded: true
	// status: succeeded turns: 1 tool calls: 2 refunds: 1
	// cost: $0.00027
}

// Call wraps admit, the call and settle; a refusal comes before any spend.
func ExampleRun_Call() {
	ctx := context.Background()
	mgr, _ := run.NewManager(run.Config{Store: memstore.New()})
	defer mgr.Close()
	r, _ := mgr.Start(ctx, run.Spec{Limits: store.Limits{MaxTurns: 1}})
	step := run.Step{Provider: "anthropic", Model: "claude-haiku-4-5", PromptTokens: 2000, MaxOutputTokens: 1000}
	for range 2 {
		err := r.Call(ctx, step, func(ctx context.Context) (budget.Usage, error) {
			return budget.UsageFromAnthropic(500, 300, 1500, 0), nil
		})
		fmt.Println(err)
	}
	rec := r.Record()
	fmt.Println(rec.Status, rec.StopReason, rec.Turns, rec.Cost)
	// Output:
	// <nil>
	// fatal: max_turns_exceeded: run used its 1 turn
	// stopped max_turns_exceeded 1 $0.00215
}
