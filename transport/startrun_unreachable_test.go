package transport_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/transport"
)

// An open gateway (no tenants): every call's tenant is "default". A run
// Transport.StartRun starts for another tenant is one its calls can never
// reach (403 "belongs to another tenant"); StartRun's doc promises an
// error when spec.Tenant is not the tenant of the calls, and Stack.StartRun
// refuses a tenant that is not one of the config's when it has tenants.
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

// StartRun accepts a spec.ID that the gateway refuses as X-Belay-Run-Id
// (a space; more than 128 characters): the run is started and stored, but
// every call WithRunID(r.ID()) makes is refused 400 before it reaches the
// run, so its limits bound nothing and it stays running until idle.
func TestStartRunIDTheGatewayRefuses_adv25(t *testing.T) {
	ctx := context.Background()
	tr, err := transport.Open(ctx, nil, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	oc := openai.NewClient(ooption.WithHTTPClient(&http.Client{Transport: tr}), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
	for _, id := range []string{"order 42", "run/1", string(make([]byte, 0)) + "x" + string(bytesOf('a', 140))} {
		r, err := tr.StartRun(ctx, run.Spec{ID: id, Limits: store.Limits{MaxTurns: 3}})
		if err != nil {
			continue // refused at start: fine
		}
		if _, err := oc.Chat.Completions.New(transport.WithRunID(ctx, r.ID()), chat); err != nil {
			t.Errorf("StartRun(ID %.20q…) returned a run with no error, but its first call fails: %v", id, err)
		}
	}
}

func bytesOf(b byte, n int) []byte {
	s := make([]byte, n)
	for i := range s {
		s[i] = b
	}
	return s
}
