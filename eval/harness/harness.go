// Package harness is belay's side of `belay eval`: for each provider setup
// of a suite it builds the gateway stack (run manager, ledger, trace
// recorder, router, and the built-in simulator or real deployments) over
// one shared store, and gives each run of the agent an HTTP client that
// reaches the gateway in-process, or a loopback address for command agents.
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/sim"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
	"github.com/belay-run/belay/transport/inproc"
	"golang.org/x/net/http/httpguts"
)

// Tenant is the tenant eval runs belong to (the open gateway's tenant).
const Tenant = "default"

// internalBase is the base URL in-process agents use; the transport never
// dials it.
const internalBase = "http://belay.internal/v1"

// Timeouts for simulated deployments: the simulator answers in
// milliseconds, so a hang is detected in seconds, not minutes.
var simTimeouts = config.Timeouts{
	FirstByte:  config.Duration(2 * time.Second),
	FirstToken: config.Duration(2 * time.Second),
	Idle:       config.Duration(2 * time.Second),
}

// quiet drops the gateway's per-call log lines: eval reports failures
// itself, with their reasons, and keeps every trace.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Factory returns a HarnessFactory whose harnesses share st. st stays open
// when the harnesses close.
func Factory(st store.Store) eval.HarnessFactory {
	return func(ctx context.Context, s *eval.Suite, p eval.Providers) (eval.Harness, error) {
		return New(ctx, st, s, p)
	}
}

// Harness serves one provider setup. It is safe for concurrent use.
type Harness struct {
	suite *eval.Suite
	st    store.Store
	stack *gateway.Stack
	rt    http.RoundTripper

	listenOnce sync.Once
	listenURL  string
	listenErr  error
	srv        *http.Server
}

var _ eval.Harness = (*Harness)(nil)

// New builds the gateway stack for providers p of suite s over st. A
// provider setup that cannot be built is an error wrapping
// eval.ErrBadSuite that names the suite file and the field.
func New(ctx context.Context, st store.Store, s *eval.Suite, p eval.Providers) (*Harness, error) {
	// A setup that cannot be built is the suite's mistake (a script or
	// config file missing, an unknown profile): eval.ErrBadSuite.
	cfg, err := configFor(s, p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", eval.ErrBadSuite, err)
	}
	cfg.Limits = suiteMoneyLimit(s) // the runs' limits are the suite's: see Start
	stack, err := gateway.Build(ctx, cfg, gateway.Options{Store: st, Approver: approver(s.Approvals), Logger: quiet})
	if ue, ok := errors.AsType[*gateway.UnpricedError](err); ok {
		ue.Limit = "the suite's money limit (max_cost_usd " + cfg.Limits.MaxCostUSD.V().String() + ")"
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: providers: %w", eval.ErrBadSuite, s.Path, err)
	}
	if stack.Sim != nil {
		// The same seed gives the same faults and replies in every run of
		// the suite, whatever the run ids' per-invocation prefix.
		stack.Sim.SetRunKey(eval.RunKey)
	}
	if p.Sim != nil && stack.Sim != nil {
		down, err := sim.ParseProfile("down")
		if err != nil {
			return nil, err
		}
		for _, i := range p.Sim.Down {
			stack.Sim.SetProfile(simName(i), down)
		}
	}
	return &Harness{suite: s, st: st, stack: stack, rt: inproc.RoundTripper(stack.Server.Handler())}, nil
}

// suiteMoneyLimit returns limits holding only a money limit the suite's
// runs get (eval.EffectiveLimits; the first scenario's that has one), for
// the gateway's check that every deployment is priced
// (gateway.UnpricedError): the runs get their limits from the suite, not
// from a config's limits, which eval does not use.
func suiteMoneyLimit(s *eval.Suite) config.Limits {
	for i := range s.Scenarios {
		if l, err := eval.EffectiveLimits(s, &s.Scenarios[i]); err == nil && l.MaxCost > 0 {
			return config.Limits{MaxCostUSD: config.USD(l.MaxCost)}
		}
	}
	return config.Limits{}
}

func simName(i int) string { return "sim-" + strconv.Itoa(i) }

// configFor builds the gateway configuration of a provider setup.
func configFor(s *eval.Suite, p eval.Providers) (*config.Config, error) {
	if p.Config != "" {
		path := p.Config
		if !filepath.IsAbs(path) {
			path = filepath.Join(s.Dir, path)
		}
		cfg, err := loadProviders(path)
		if err != nil {
			return nil, fmt.Errorf("%s: providers.config: %w", s.Path, err)
		}
		cfg.Tools.Irreversible = append(cfg.Tools.Irreversible, s.Tools.Irreversible...)
		cfg.Tools.ReadOnly = append(cfg.Tools.ReadOnly, s.Tools.ReadOnly...)
		return cfg, nil
	}
	sp := eval.SimSpec{}
	if p.Sim != nil {
		sp = *p.Sim
	}
	n := sp.Deployments
	if n == 0 {
		n = 2
	}
	cfg := config.Default()
	m := config.Model{Alias: s.Model}
	for i := 0; i < n; i++ {
		m.Deployments = append(m.Deployments, config.Deployment{Name: simName(i), Provider: config.ProviderOpenAI,
			Model: s.Model, BaseURL: config.SimBaseURL})
	}
	cfg.Models = []config.Model{m}
	if _, _, err := budget.DefaultPricing().Lookup(config.ProviderOpenAI, s.Model); err != nil {
		// The simulated deployments answer as s.Model, a name the suite
		// chose: priced as the default model, so its money limits hold
		// (a simulator setup has no config to add a price to).
		if p, _, err := budget.DefaultPricing().Lookup(config.ProviderOpenAI, eval.DefaultModel); err == nil {
			cfg.Pricing = map[string]config.Price{s.Model: {Input: config.USD(p.Input), Output: config.USD(p.Output),
				CachedInput: config.USD(p.CachedInput), CacheWrite: config.USD(p.CacheWrite), CacheWrite1h: config.USD(p.CacheWrite1h)}}
		}
	}
	cfg.Sim.Profile = sp.Profile
	cfg.Sim.Seed = s.Seed
	if sp.Script != "" {
		path := sp.Script
		if !filepath.IsAbs(path) {
			path = filepath.Join(s.Dir, path)
		}
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s: providers.sim.script: %w", s.Path, err)
		}
		cfg.Sim.Script = path
	}
	cfg.Timeouts.FirstByte, cfg.Timeouts.FirstToken, cfg.Timeouts.Idle = simTimeouts.FirstByte, simTimeouts.FirstToken, simTimeouts.Idle
	cfg.Tools.Irreversible = s.Tools.Irreversible
	cfg.Tools.ReadOnly = s.Tools.ReadOnly
	cfg.Capture = config.CaptureFull
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: providers: %w", s.Path, err)
	}
	return cfg, nil
}

// loadProviders reads a suite's providers.config for its deployments:
// env: secrets are resolved from the environment, and only the
// deployments' keys must be set, since the tenants' keys and the admin key
// are dropped (eval runs belong to Tenant; a suite pointed at a gateway's
// own config must not need its tenants' secrets). The config's limits and
// store are not used either: the suite's limits apply, and the runs go to
// the evaluation's store.
func loadProviders(path string) (*config.Config, error) {
	// unusable names the variables that are unset, empty, or hold what a
	// header cannot carry; each resolves to a stand-in, and only a
	// deployment's key is then refused for it (the others are dropped).
	unusable := map[string]string{}
	cfg, err := config.LoadWith(path, func(name string) (string, bool) {
		v, ok := os.LookupEnv(name)
		switch {
		case !ok:
			unusable[name] = "is not set"
		case v == "":
			unusable[name] = "is set but empty"
		case !httpguts.ValidHeaderFieldValue(v) || strings.Trim(v, " \t") != v:
			unusable[name] = "holds a control character, or a space or tab at an end: an HTTP header cannot carry it as it is"
		default:
			return v, true
		}
		return "env:" + name, true // a stand-in: checked below for the deployments
	})
	if err != nil {
		return nil, err
	}
	for i, m := range cfg.Models {
		for j, d := range m.Deployments {
			if name, ok := strings.CutPrefix(d.APIKey.Ref, "env:"); ok {
				// As config resolves it: the name trimmed ("env: NAME").
				if why, bad := unusable[strings.TrimSpace(name)]; bad {
					return nil, fmt.Errorf("config %s: models[%d].deployments[%d].api_key: environment variable %s %s",
						path, i, j, strings.TrimSpace(name), why)
				}
			}
		}
	}
	cfg.Tenants, cfg.AdminKey = nil, config.Secret{}
	return cfg, nil
}

// approver turns the suite's rules into a rule-based approver: the first
// rule whose tool pattern matches and whose max_amount_usd holds decides;
// no match denies.
func approver(rules []eval.Rule) run.Approver {
	var rs []run.Rule
	for _, r := range rules {
		rr := run.Rule{Tool: r.Tool, Decision: store.ApprovalDenied}
		if r.Decision == "approve" {
			rr.Decision = store.ApprovalApproved
		}
		if r.MaxAmount != nil {
			rr.If = []run.Predicate{run.ArgAtMost("amount_usd", *r.MaxAmount)}
		}
		rs = append(rs, rr)
	}
	return run.RuleApprover{Rules: rs}
}

// Start begins a run with its limits.
func (h *Harness) Start(ctx context.Context, sc *eval.Scenario, runID string, limits store.Limits) (eval.RunHandle, error) {
	agent := h.suite.Agent.Label()
	// Owned: the run ends when its agent exits (Finish), not for idleness
	// or at an idle deadline as the gateway's runs do.
	r, err := h.stack.Runs.Start(ctx, run.Spec{ID: runID, Tenant: Tenant, Agent: agent, Limits: limits, Owned: true,
		Labels: map[string]string{"suite": h.suite.Name, "scenario": sc.Name, "source": "eval"}})
	if err != nil {
		return nil, err
	}
	return &handle{h: h, r: r}, nil
}

// Golden returns a saved golden trace's canonical form.
func (h *Harness) Golden(ctx context.Context, name string) ([]byte, error) {
	b, _, err := h.st.Golden(ctx, name)
	return b, err
}

// Close stops the stack (the shared store stays open).
func (h *Harness) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h.srv != nil {
		_ = h.srv.Shutdown(ctx)
	}
	return h.stack.Close(ctx)
}

// baseURL returns the loopback root URL for command agents, listening on
// first use. A run's base URL is ROOT/runs/RUN_ID/v1: the run id travels in
// the path, so an agent that only reads OPENAI_BASE_URL (or
// ANTHROPIC_BASE_URL) still makes its calls as turns of its run.
func (h *Harness) baseURL() (string, error) {
	h.listenOnce.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			h.listenErr = err
			return
		}
		h.srv = &http.Server{Handler: runPrefix{next: h.stack.Server.Handler()}, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = h.srv.Serve(ln) }()
		h.listenURL = "http://" + ln.Addr().String()
	})
	return h.listenURL, h.listenErr
}

// handle is one run.
type handle struct {
	h *Harness
	r *run.Run
}

func (hd *handle) Env(env *eval.Env) {
	env.HTTPClient = &http.Client{Transport: runHeader{id: hd.r.ID(), next: hd.h.rt}}
	env.BaseURL = internalBase
	if len(hd.h.suite.Agent.Command) > 0 {
		if u, err := hd.h.baseURL(); err == nil {
			env.BaseURL = u + runsPath + hd.r.ID() + "/v1"
		}
	}
	env.Tools = tools{r: hd.r, safe: hd.h.suite.Tools.SafeToRepeat}
}

func (hd *handle) Finish(ctx context.Context, exitCode int, agentErr error) (store.Run, []trace.Span, error) {
	status := store.RunSucceeded
	switch {
	case errors.Is(agentErr, eval.ErrInterrupted):
		status, agentErr = store.RunStopped, failure.Wrap(failure.Canceled, agentErr)
	case exitCode != 0 || agentErr != nil:
		status = store.RunFailed
	}
	if err := hd.r.Finish(ctx, status, agentErr); err != nil {
		return store.Run{}, nil, err
	}
	if err := hd.h.stack.Flush(ctx, hd.r.ID()); err != nil {
		return store.Run{}, nil, fmt.Errorf("trace: %w", err)
	}
	spans, err := hd.h.st.RunSpans(ctx, hd.r.ID())
	if err != nil {
		return store.Run{}, nil, err
	}
	return hd.r.Record(), spans, nil
}

// runHeader attaches the run id to every request.
type runHeader struct {
	id   string
	next http.RoundTripper
}

func (t runHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(gateway.HeaderRunID, t.id)
	return t.next.RoundTrip(r)
}

// runsPath prefixes the per-run paths of the loopback listener.
const runsPath = "/runs/"

// runPrefix serves ROOT/runs/RUN_ID/REST as REST with X-Belay-Run-Id set to
// RUN_ID (unless the request names its run itself); other paths pass as
// they are.
type runPrefix struct{ next http.Handler }

func (p runPrefix) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, runsPath)
	id, tail, found := strings.Cut(rest, "/")
	if !ok || !found || id == "" {
		p.next.ServeHTTP(w, r)
		return
	}
	r = r.Clone(r.Context())
	r.URL.Path, r.URL.RawPath = "/"+tail, ""
	if r.Header.Get(gateway.HeaderRunID) == "" {
		r.Header.Set(gateway.HeaderRunID, id)
	}
	p.next.ServeHTTP(w, r)
}

// toolRetry retries transient failures of tools that are safe to repeat.
var toolRetry = retry.Policy{MaxAttempts: 3, Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond}

// tools runs the agent's tool calls under the run.
type tools struct {
	r    *run.Run
	safe []string
}

func (t tools) RunTool(ctx context.Context, name, callID string, args json.RawMessage, fn eval.ToolFunc) (json.RawMessage, error) {
	call := run.ToolCall{Name: name, CallID: callID, Arguments: args, SafeToRepeat: matchAny(t.safe, name), Retry: &toolRetry}
	return t.r.Tool(ctx, call, func(ctx context.Context) (json.RawMessage, error) {
		return fn(ctx, run.IdempotencyKeyFrom(ctx))
	})
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	return false
}

// TimeoutNotes returns a line for each deployment of s's provider setups
// (the suite's and its scenarios') with an attempt timeout (timeouts
// first_byte, first_token or idle, the deployment's own or its config's)
// at least the suite's timeout: a deployment that hangs there holds the
// agent until belay eval stops it (a failed run, reason timeout) before
// the attempt times out and the call could fall back. Such a setup is
// allowed (one slow model may need it), so these are notes, not errors. A
// setup that does not load is skipped: its runs report why. Safe for
// concurrent use; it reads provider configs and the environment.
func TimeoutNotes(s *eval.Suite) []string {
	setups := []eval.Providers{s.Providers}
	for i := range s.Scenarios {
		// Each setup once: a config file is read once, not per scenario.
		if p := s.Scenarios[i].Providers; p != nil && !slices.ContainsFunc(setups, func(q eval.Providers) bool { return q.Key() == p.Key() }) {
			setups = append(setups, *p)
		}
	}
	limit := time.Duration(s.Timeout)
	var notes []string
	for _, p := range setups {
		cfg, err := configFor(s, p)
		if err != nil {
			continue
		}
		where, fix := "the simulated deployments", "lengthen the suite's timeout (the simulator's timeouts are fixed)"
		if p.Config != "" {
			where, fix = "providers.config "+p.Config, "shorten the deployments' timeouts or lengthen the suite's timeout"
		}
		var deps []string
		for _, m := range cfg.Models {
			for _, d := range m.Deployments {
				t := d.Timeouts.Of(cfg.Timeouts)
				var long []string
				for _, w := range []struct {
					key  string
					wait config.Duration
				}{{"first_byte", t.FirstByte}, {"first_token", t.FirstToken}, {"idle", t.Idle}} {
					if time.Duration(w.wait) >= limit {
						long = append(long, fmt.Sprintf("%s %s", w.key, time.Duration(w.wait)))
					}
				}
				if len(long) > 0 {
					deps = append(deps, fmt.Sprintf("%s (%s)", d.Name, strings.Join(long, ", ")))
				}
			}
		}
		if len(deps) == 0 {
			continue
		}
		what := "deployment "
		if len(deps) > 1 {
			what = "deployments "
		}
		n := fmt.Sprintf("%s: attempt timeouts not shorter than the suite's timeout %s, on %s%s: "+
			"a hang there stops the agent (reason timeout) before belay can retry or fall back; %s",
			where, limit, what, strings.Join(deps, ", "), fix)
		notes = append(notes, n)
	}
	return notes
}
