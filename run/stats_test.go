package run

import (
	"context"
	"maps"
	"testing"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
)

// Stats.Stops counts each run stopped for a limit or a kill once, by
// reason: not the later steps the stopped run refuses, not a run that
// ends otherwise, not a refusal that stops nothing (a disabled tool).
func TestStatsCountEachStoppedRunOnce(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.KillPoll = -1 })
	ctx := context.Background()

	turns := f.start(t, Spec{Limits: store.Limits{MaxTurns: 1}})
	a, err := turns.Admit(ctx, modelStep(cents(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(ctx, usage(1, 0), Outcome{}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the first refusal stops the run; the next two find it stopped
		_, err := turns.Admit(ctx, modelStep(cents(1)))
		wantReason(t, err, failure.MaxTurnsExceeded, failure.Fatal)
	}

	killed := f.start(t, Spec{})
	if err := f.m.Kill(ctx, store.KillRun, killed.ID(), "runaway"); err != nil {
		t.Fatal(err)
	}
	_, err = killed.Admit(ctx, modelStep(cents(1)))
	wantReason(t, err, failure.Killed, failure.Fatal)

	tool := f.start(t, Spec{})
	if err := f.m.Kill(ctx, store.KillTool, "issue_refund", ""); err != nil {
		t.Fatal(err)
	}
	_, err = tool.Admit(ctx, Step{Kind: KindTool, Tool: "issue_refund"})
	wantReason(t, err, failure.ToolDisabled, failure.Fatal)
	if err := tool.Finish(ctx, store.RunFailed, err); err != nil {
		t.Fatal(err)
	}
	done := f.start(t, Spec{})
	if err := done.Finish(ctx, store.RunSucceeded, nil); err != nil {
		t.Fatal(err)
	}

	want := map[failure.Reason]int64{failure.MaxTurnsExceeded: 1, failure.Killed: 1, failure.DeadlineExceeded: 0, failure.BudgetExceeded: 0}
	if got := f.m.Stats().Stops; !maps.Equal(got, want) {
		t.Errorf("Stops = %v, want %v", got, want)
	}
}
