// Package transport gives an in-process Go HTTP LLM client (openai-go,
// anthropic-sdk-go, langchaingo, ...) belay's guards without a gateway
// process: its http.RoundTripper serves each request through the gateway's
// http.Handler inside the process, so the library and the gateway share
// one request path (identify → admit → route → relay → settle → record →
// respond) and behave the same, streams included.
//
//	stack, _ := gateway.Build(ctx, cfg, gateway.Options{})
//	client := openai.NewClient(option.WithHTTPClient(&http.Client{
//		Transport: transport.New(transport.Options{Handler: stack.Server.Handler(), RunID: "run-1"}),
//	}))
//
// The request's host is ignored: the path selects the dialect
// (/v1/chat/completions, /v1/responses or /v1/messages), so the SDKs' default base URLs
// work unchanged.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/transport/inproc"
)

// Options configure New.
type Options struct {
	// Handler is the gateway's handler (gateway.Server.Handler()).
	// Required.
	Handler http.Handler
	// RunID, when set, is sent as X-Belay-Run-Id on every request that
	// names no run itself (see WithRunID), so all the client's calls are
	// turns of one run. With tenants configured, the gateway stores the
	// run as TENANT~ID (gateway.RunKeySep).
	RunID string
	// Key, when set, is sent as the belay virtual key (Authorization:
	// Bearer) in place of whatever credential the client set; needed when
	// the gateway has tenants (every call without a tenant's key is
	// refused 401), and then it names the tenant of Transport.StartRun's
	// runs.
	Key string
	// Logger receives the log lines of the gateway stack Open builds
	// (failed calls, budget alerts, "gateway stopped" on Close); nil
	// discards them: a library does not log unless asked to. New does not
	// use it (the handler given logs as it was built to).
	Logger *slog.Logger
	// Approver decides approvals of irreversible tools for the runs of the
	// stack Open builds (gateway.Options.Approver); nil means the stored
	// queue (run.QueueApprover), which `belay approvals` decides from
	// another process when the config's store is a file or PostgreSQL.
	// With Open's nil config the store is in memory: decide them in
	// process with an Approver, or through Stack.Store (ListApprovals,
	// DecideApproval). New does not use it.
	Approver run.Approver
}

// ErrNoHandler is returned by every request of a transport built without
// a Handler.
var ErrNoHandler = errors.New("transport: Options.Handler is nil")

// New returns an http.RoundTripper that serves requests through
// o.Handler in-process, streaming (see package inproc). It is safe for
// concurrent use.
func New(o Options) http.RoundTripper {
	t := &roundTripper{o: o}
	if o.Handler != nil {
		t.rt = inproc.RoundTripper(o.Handler)
	}
	return t
}

type roundTripper struct {
	o     Options
	rt    http.RoundTripper
	drain *drain // Open's: counts the calls in flight for Close
	// prefix is "TENANT~" of Options.Key's tenant when the stack Open
	// built has tenants: a run id holding it (Transport.StartRun's
	// run.ID()) is sent without it, as the gateway's clients name runs.
	prefix string
}

func (t *roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.rt == nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, ErrNoHandler
	}
	if t.drain != nil && !t.drain.enter() {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, ErrClosed
	}
	id, _ := r.Context().Value(runIDKey{}).(string)
	if id == "" {
		id = t.o.RunID
	}
	if t.prefix != "" {
		id = strings.TrimPrefix(id, t.prefix)
	}
	if (id != "" && r.Header.Get(gateway.HeaderRunID) == "") || t.o.Key != "" {
		r = r.Clone(r.Context()) // a RoundTripper must not modify the caller's request
		if id != "" && r.Header.Get(gateway.HeaderRunID) == "" {
			r.Header.Set(gateway.HeaderRunID, id)
		}
		if t.o.Key != "" {
			r.Header.Del("X-Api-Key")
			r.Header.Set("Authorization", "Bearer "+t.o.Key)
		}
	}
	return t.rt.RoundTrip(r)
}

type runIDKey struct{}

// WithRunID returns a context whose requests through a transport of this
// package belong to run id (it wins over Options.RunID; an explicit
// X-Belay-Run-Id header wins over both). As through the gateway, an id no
// run holds starts a run under the config's limits (lowered by the
// request's X-Belay-* limit headers) at its first call; a run started with
// Transport.StartRun keeps its limits. With tenants configured, the id
// of a run Transport.StartRun started (TENANT~ID) is sent as ID. A refusal reaches the client's SDK as
// an error answer in its dialect: failure.FromResponse reads belay's
// failure from the response the SDK's error keeps.
func WithRunID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, runIDKey{}, id)
}

// Transport is a RoundTripper over a whole gateway stack built by Open;
// Close releases the stack.
type Transport struct {
	http.RoundTripper
	Stack *gateway.Stack
	// tenant is Options.Key's tenant ("" without a key, or a key that is
	// no tenant's).
	tenant string
	drain  *drain
	grace  time.Duration // the config's timeouts.shutdown
}

// StartRun starts a run whose calls through t are its turns (pass r.ID()
// to WithRunID), bounded by the config's limits for its tenant as well as
// spec's (gateway.Stack.StartRun). spec.Tenant empty is Options.Key's
// tenant ("default" without tenants). Errors: the config has tenants and
// neither Options.Key nor spec.Tenant names one; spec.Tenant is not
// Options.Key's tenant (the calls, made with that key, would not reach
// the run); those of Stack.StartRun. Safe for concurrent use.
func (t *Transport) StartRun(ctx context.Context, spec run.Spec) (*run.Run, error) {
	if spec.Tenant == "" {
		spec.Tenant = t.tenant
	}
	if t.tenant != "" && spec.Tenant != t.tenant {
		return nil, fmt.Errorf("transport: StartRun: run.Spec.Tenant %q is not the tenant of Options.Key (%s): its calls would not reach the run", spec.Tenant, t.tenant)
	}
	if spec.Tenant == "" {
		if _, open := t.Stack.TenantOf(""); !open {
			return nil, errors.New("transport: StartRun: the config has tenants: set Options.Key to a tenant's virtual key (tenants[].key), whose runs these are")
		}
	}
	return t.Stack.StartRun(ctx, spec)
}

// Open builds the gateway stack for cfg (config.Default() when nil: the
// built-in simulator; its store is then in memory), logging to o.Logger
// (nil: nowhere), and returns a Transport over it. The caller closes it.
func Open(ctx context.Context, cfg *config.Config, o Options) (*Transport, error) {
	if cfg == nil {
		cfg = config.Default()
		cfg.Store = "memory://"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := gateway.Build(ctx, cfg, gateway.Options{Logger: log, Approver: o.Approver})
	if err != nil {
		return nil, err
	}
	d := newDrain()
	o.Handler = d.handler(st.Server.Handler())
	rt := New(o).(*roundTripper)
	rt.drain = d
	tr := &Transport{RoundTripper: rt, Stack: st, drain: d, grace: cfg.Timeouts.Shutdown.D()}
	if o.Key != "" {
		if name, ok := st.TenantOf(o.Key); ok && len(cfg.Tenants) > 0 {
			tr.tenant, rt.prefix = name, name+gateway.RunKeySep
		} else if !ok {
			_ = st.Close(ctx)
			return nil, fmt.Errorf("transport: Options.Key is not the virtual key of any of the config's tenants: every call would be refused 401")
		}
	}
	return tr, nil
}

// Close refuses further requests (ErrClosed) and lets those in flight
// finish, for up to the config's timeouts.shutdown (10 s by default) or
// until ctx ends, so that they are charged and recorded before the store
// closes (a stream read after Close used to end well for its caller while
// its charge and record were lost); the calls still open then are
// canceled, charged for what they used, and their streams end with an
// error. Then it closes the stack.
func (t *Transport) Close(ctx context.Context) error {
	if t.drain != nil {
		t.drain.close(ctx, t.grace)
	}
	return t.Stack.Close(ctx)
}
