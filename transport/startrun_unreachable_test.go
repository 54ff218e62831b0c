package transport_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/transport"
)

// On an open gateway (no tenants) every call's tenant is "default": a run
// StartRun would start for another tenant is one no call could reach
// (403 "belongs to another tenant"), so StartRun refuses it, or the run it
// returns takes the calls (adversarial review).
func TestOpenGatewayStartRunForeignTenant_adv25(t *testing.T) {
	ctx := context.Background()
	tr, err := transport.Open(ctx, nil, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	r, err := tr.StartRun(ctx, run.Spec{Tenant: "acme", Limits: store.Limits{MaxTurns: 3}})
	if err != nil {
		return // refused: fine
	}
	oc := openai.NewClient(ooption.WithHTTPClient(&http.Client{Transport: tr}), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
	if _, err := oc.Chat.Completions.New(transport.WithRunID(ctx, r.ID()), chat); err != nil {
		t.Fatalf("StartRun(Tenant: acme) on an open gateway returned run %s with no error, but its first call fails: %v", r.ID(), err)
	}
}

// A spec.ID the gateway would refuse as X-Belay-Run-Id (a space, a slash,
// more than 128 characters) is refused by StartRun, or the run it returns
// takes the calls: no run is started that every call naming it misses
// (adversarial review: such runs stayed running, their limits unused).
func TestStartRunIDTheGatewayRefuses_adv25(t *testing.T) {
	ctx := context.Background()
	tr, err := transport.Open(ctx, nil, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	oc := openai.NewClient(ooption.WithHTTPClient(&http.Client{Transport: tr}), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
	for _, id := range []string{"order 42", "run/1", strings.Repeat("a", 141)} {
		r, err := tr.StartRun(ctx, run.Spec{ID: id, Limits: store.Limits{MaxTurns: 3}})
		if err != nil {
			continue // refused at start: fine
		}
		if _, err := oc.Chat.Completions.New(transport.WithRunID(ctx, r.ID()), chat); err != nil {
			t.Errorf("StartRun(ID %.20q…) returned a run with no error, but its first call fails: %v", id, err)
		}
	}
}
