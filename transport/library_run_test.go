package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/transport"
)

// A run StartRun started is the caller's to end: when its deadline passes
// between two calls (the agent working on its own), it is stopped
// deadline_exceeded, not ended "succeeded" by its last call's outcome as
// an idle gateway run is, which its Finish(failed) then could not change
// (adversarial review, session 26).
func TestLibraryRunOwnsItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		tr, err := transport.Open(ctx, nil, transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close(ctx)
		r, err := tr.StartRun(ctx, run.Spec{Limits: store.Limits{Deadline: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		oc := openai.NewClient(ooption.WithHTTPClient(&http.Client{Transport: tr}), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
		chat := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
		if _, err := oc.Chat.Completions.New(transport.WithRunID(ctx, r.ID()), chat); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // the agent's own work, past the deadline
		synctest.Wait()
		if err := r.Finish(ctx, store.RunFailed, errors.New("agent could not complete the task")); err != nil {
			t.Fatal(err)
		}
		if rec := r.Record(); rec.Status != store.RunStopped || rec.StopReason != "deadline_exceeded" {
			t.Errorf("record %s %q; want stopped deadline_exceeded", rec.Status, rec.StopReason)
		}
	})
}

// A negative limit in a spec is refused: it would read as no limit and
// lift the config's (adversarial review: a MaxCost of a budget less what
// was spent, gone below zero, ran ten calls past every limit).
func TestStartRunNegativeLimit(t *testing.T) {
	ctx := context.Background()
	tr, err := transport.Open(ctx, nil, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	for _, c := range []struct {
		l    store.Limits
		says string
	}{
		{store.Limits{MaxTurns: -1}, "run: Spec.Limits.MaxTurns -1: want ≥ 0 (0 is no limit)"},
		{store.Limits{Deadline: -time.Second}, "run: Spec.Limits.Deadline -1s: want ≥ 0"},
		{store.Limits{MaxTokens: -5}, "run: Spec.Limits.MaxTokens -5: want ≥ 0"},
		{store.Limits{MaxCost: -budget.Micros(1)}, "run: Spec.Limits.MaxCost $-0.000001: want ≥ 0"},
	} {
		r, err := tr.StartRun(ctx, run.Spec{Limits: c.l})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("StartRun(%+v) = %v, %v; want an error saying %q", c.l, r, err, c.says)
		}
	}
}

// A response body the caller neither reads nor closes does not hold its
// run, as over a socket: a small answer is buffered whole (a larger one
// is cut at timeouts.client_write, see package inproc), the call is
// charged, and the run's next call goes ahead (adversarial review: in
// process the next call waited for its context's end).
func TestUnreadAnswerDoesNotHoldTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		cfg, err := config.Parse([]byte("store: memory://\ntimeouts: {client_write: 1s}\n"), "inline.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		tr, err := transport.Open(ctx, cfg, transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close(ctx)
		r, err := tr.StartRun(ctx, run.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		rctx := transport.WithRunID(ctx, r.ID())
		req, _ := http.NewRequestWithContext(rctx, "POST", "http://belay.invalid/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close() // at the end: neither read nor closed before
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		oc := openai.NewClient(ooption.WithHTTPClient(&http.Client{Transport: tr}), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
		chat := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("again")}}
		start := time.Now()
		if _, err := oc.Chat.Completions.New(rctx, chat); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("the run's next call took %v: it waited for the unread one", d)
		}
		if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
			t.Fatal(err)
		}
		if rec := r.Record(); rec.Turns != 2 || rec.Cost == 0 {
			t.Errorf("record: %d turns, cost %s; want 2 turns, both charged", rec.Turns, rec.Cost)
		}
	})
}
