package transport_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/transport"
)

const tenantsConfig = `
store: memory://
limits: {max_turns: 5}
tenants:
  - {name: acme, key: k-acme}
  - {name: globex, key: k-globex}
`

func openTenants(t *testing.T, key string) (*transport.Transport, error) {
	t.Helper()
	cfg, err := config.Parse([]byte(tenantsConfig), "belay.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return transport.Open(context.Background(), cfg, transport.Options{Key: key})
}

// With tenants, a run Transport.StartRun starts is the run its calls
// reach: stored as TENANT~ID, its turns counted and its own limit held
// (newcomer finding: the calls went to a new run acme~ID under the
// config's limits, and the started run kept 0 turns, its MaxTurns 2
// never reached).
func TestStartRunWithTenants(t *testing.T) {
	ctx := context.Background()
	tr, err := openTenants(t, "k-acme")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	r, err := tr.StartRun(ctx, run.Spec{Agent: "support", Limits: store.Limits{MaxTurns: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.ID(), "acme~") {
		t.Errorf("run id %q; want it under acme~", r.ID())
	}
	oc := openai.NewClient(ooption.WithHTTPClient(&http.Client{Transport: tr}), ooption.WithAPIKey("a-provider-key"), ooption.WithMaxRetries(0))
	chat := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}}
	rctx := transport.WithRunID(ctx, r.ID())
	for i := range 2 {
		if _, err := oc.Chat.Completions.New(rctx, chat); err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
	}
	_, err = oc.Chat.Completions.New(rctx, chat)
	var oe *openai.Error
	if !errors.As(err, &oe) || !errors.Is(failure.FromResponse(oe.Response), failure.MaxTurnsExceeded) {
		t.Fatalf("turn 3: %v; want max_turns_exceeded", err)
	}
	if rec := r.Record(); rec.Turns != 2 || rec.Tenant != "acme" {
		t.Errorf("run record: %d turns, tenant %q; want 2 turns of acme", rec.Turns, rec.Tenant)
	}

	if _, err := tr.StartRun(ctx, run.Spec{Tenant: "globex"}); err == nil || !strings.Contains(err.Error(), `run.Spec.Tenant "globex" is not the tenant of Options.Key (acme)`) {
		t.Errorf("StartRun of another tenant: %v", err)
	}
}

// Without a key a config with tenants has StartRun say what to set, and a
// key that is no tenant's fails Open (every call would be refused 401).
func TestTenantsNeedAKey(t *testing.T) {
	ctx := context.Background()
	tr, err := openTenants(t, "")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	if _, err := tr.StartRun(ctx, run.Spec{}); err == nil || !strings.Contains(err.Error(), "set Options.Key to a tenant's virtual key") {
		t.Errorf("StartRun without a key: %v", err)
	}
	if _, err := tr.Stack.StartRun(ctx, run.Spec{Tenant: "initech"}); err == nil || !strings.Contains(err.Error(), `tenant "initech" is not one of the config's tenants (acme, globex)`) {
		t.Errorf("Stack.StartRun of an unknown tenant: %v", err)
	}
	if _, err := openTenants(t, "k-nobody"); err == nil || !strings.Contains(err.Error(), "Options.Key is not the virtual key of any of the config's tenants") {
		t.Errorf("Open with an unknown key: %v", err)
	}
}
