package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/transport"
)

// A Go agent on the official openai-go client gets belay in a few lines:
// its model calls go through belay's transport (retries, fallback,
// breakers, turn and budget limits, traces), its tools run under the same
// run (kill switch, approvals, idempotency).
func Example() {
	ctx := context.Background()
	// nil config: the built-in simulator and an in-memory store. Pass a
	// *config.Config (config.Load("belay.yaml")) for real providers.
	tr, err := transport.Open(ctx, nil, transport.Options{})
	if err != nil {
		panic(err)
	}
	defer tr.Close(ctx)

	r, err := tr.StartRun(ctx, run.Spec{Agent: "support", // under the config's limits too
		Limits: store.Limits{MaxTurns: 10, MaxCost: budget.Dollars(1)}})
	if err != nil {
		panic(err)
	}
	client := openai.NewClient(option.WithHTTPClient(&http.Client{Transport: tr}), option.WithAPIKey("unused"))
	resp, err := client.Chat.Completions.New(transport.WithRunID(ctx, r.ID()), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Where is order A-1001?")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Choices[0].Message.Content != "")

	out, err := r.Tool(ctx, run.ToolCall{Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"A-1001"}`)},
		func(ctx context.Context) (json.RawMessage, error) {
			return json.RawMessage(`{"status":"delivered"}`), nil
		})
	fmt.Println(string(out), err)

	if err := r.Finish(ctx, store.RunSucceeded, nil); err != nil {
		panic(err)
	}
	rec := r.Record()
	fmt.Println(rec.Status, rec.Turns, rec.ToolCalls, rec.Cost > 0)
	// Output:
	// true
	// {"status":"delivered"} <nil>
	// succeeded 1 1 true
}
