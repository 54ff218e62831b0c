package gateway

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/internal/ids"
	"github.com/belay-run/belay/internal/shellword"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/sim"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/store/open"
	"github.com/belay-run/belay/store/sqlite"
	"github.com/belay-run/belay/trace"
)

// Stack is a gateway Server with everything it runs on: the store, the run
// manager, the trace recorder and, when a deployment uses "sim://", the
// built-in simulator.
type Stack struct {
	Server   *Server
	Store    store.Store
	Runs     *run.Manager
	Recorder *trace.Recorder
	// Sim is the built-in simulator; nil when no deployment uses it.
	Sim *sim.Server

	closeStore bool
	unbuilt    bool // Build failed: Close undoes a partial build
	exporter   *trace.Recorder
	log        *slog.Logger
	// flushing counts the Flush calls waiting for the recorder: the span
	// writes they wait for are not deferrable meanwhile.
	flushing atomic.Int32
}

// StartRun starts a run as Runs.Start does, under the config's limits for
// the run's tenant (Config.TenantLimits), as the gateway bounds a run its
// client names: a limit spec leaves 0 takes the config's, and one it sets
// is kept only where it is tighter (a spec cannot raise a limit the
// operator set). Runs.Start itself applies spec.Limits alone: zero there
// is no limit; a negative one is an error.
//
// The run is the caller's to end (spec.Owned is set): it ends with
// Run.Finish, or stopped at its deadline, never ended for being idle nor
// by its last call's outcome (a library run whose deadline passed between
// two calls was recorded "succeeded" while the agent failed, and its
// Finish then kept that).
//
// With tenants configured, spec.Tenant must name one of them (an error
// otherwise), and the run is stored as TENANT~ID (RunKeySep), the id the
// gateway gives the run that tenant's requests name ID: a client of that
// tenant's key sending X-Belay-Run-Id: ID (transport.WithRunID) makes
// turns of this run. spec.ID empty is a new UUIDv7; one already holding
// the TENANT~ prefix keeps it. Without tenants, spec.Tenant empty is
// "default" (another tenant is an error: no request would reach the run)
// and the id is spec.ID. An id a request could not name in X-Belay-Run-Id
// (validRunID: 1-128 letters, digits and . _ : -) is an error. Other errors
// are Runs.Start's. Safe for concurrent use.
func (st *Stack) StartRun(ctx context.Context, spec run.Spec) (*run.Run, error) {
	cfg := st.Server.cfg
	if spec.Tenant == "" {
		if len(cfg.Tenants) > 0 {
			return nil, fmt.Errorf("gateway: StartRun: the config has tenants (%s): name the run's tenant in run.Spec.Tenant", strings.Join(tenantNames(cfg), ", "))
		}
		spec.Tenant = run.DefaultTenant
	}
	clientID := spec.ID
	if len(cfg.Tenants) > 0 {
		if !slices.Contains(tenantNames(cfg), spec.Tenant) {
			return nil, fmt.Errorf("gateway: StartRun: tenant %q is not one of the config's tenants (%s)", spec.Tenant, strings.Join(tenantNames(cfg), ", "))
		}
		if spec.ID == "" {
			spec.ID = ids.New()
		}
		prefix := spec.Tenant + RunKeySep
		clientID = strings.TrimPrefix(spec.ID, prefix)
		spec.ID = prefix + clientID
	} else if spec.Tenant != run.DefaultTenant {
		return nil, fmt.Errorf("gateway: StartRun: tenant %q: the config has no tenants, so every request's tenant is %q and none would reach the run", spec.Tenant, run.DefaultTenant)
	}
	if clientID != "" && !validRunID(clientID) {
		return nil, fmt.Errorf("gateway: StartRun: run id %q: want 1-128 characters of letters, digits and . _ : -, not only dots (the ids %s accepts), so that requests can name the run", clientID, HeaderRunID)
	}
	// A negative limit stays negative here (smaller than any), and
	// Runs.Start refuses it.
	spec.Limits = tighter(spec.Limits, storeLimits(cfg.TenantLimits(spec.Tenant)))
	spec.Owned = true
	return st.Runs.Start(ctx, spec)
}

// TenantOf returns the name of the tenant whose virtual key is key, as the
// gateway identifies a request's tenant; "default" for any key when the
// config has no tenants, and false for a key that is no tenant's.
func (st *Stack) TenantOf(key string) (string, bool) {
	r := &http.Request{Header: http.Header{"Authorization": {"Bearer " + key}}}
	t, fe := st.Server.tenants.identify(r)
	if fe != nil {
		return "", false
	}
	return t.Name, true
}

func tenantNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Tenants))
	for i, t := range cfg.Tenants {
		names[i] = t.Name
	}
	return names
}

// tighter returns, for each limit, the smaller of a's and b's, where 0 is
// no limit.
func tighter(a, b store.Limits) store.Limits {
	pick := func(x, y int64) int64 {
		if x == 0 || (y != 0 && y < x) {
			return y
		}
		return x
	}
	return store.Limits{
		MaxTurns:  int(pick(int64(a.MaxTurns), int64(b.MaxTurns))),
		Deadline:  time.Duration(pick(int64(a.Deadline), int64(b.Deadline))),
		MaxTokens: pick(a.MaxTokens, b.MaxTokens),
		MaxCost:   budget.USD(pick(int64(a.MaxCost), int64(b.MaxCost))),
	}
}

// Flush waits, until ctx is done, for what the stack writes in the
// background to be in the store: the records, settles and announced
// steps of run runID (of every run this process holds when runID is
// ""), then every span recorded so far. Writes that a store holds to
// share a transaction (store.Deferrable) are hurried. It returns ctx's
// error, or the recorder's (spans dropped, ErrClosed). Safe for
// concurrent use.
func (st *Stack) Flush(ctx context.Context, runID string) error {
	var err error
	if runID == "" {
		err = st.Runs.Flush(ctx)
	} else {
		err = st.Runs.FlushRun(ctx, runID)
	}
	st.flushing.Add(1)
	defer st.flushing.Add(-1)
	if h, ok := st.Store.(store.Hurrier); ok {
		h.Hurry() // a span write already waiting
	}
	return errors.Join(err, st.Recorder.Flush(ctx))
}

// Options adjust Build. The zero value opens the store named by the config.
type Options struct {
	// Store, when set, is used instead of opening cfg.Store; Close leaves
	// it open.
	Store store.Store
	// Upstream carries requests to real providers (see Deps.Upstream).
	Upstream http.RoundTripper
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Approver decides approvals of irreversible tools for runs of this
	// gateway's manager; nil means the stored queue (run.QueueApprover):
	// a request waits, up to its timeout (10 minutes), for a person to
	// approve or deny it, and is denied when the time is up.
	Approver run.Approver
}

// Build opens the store, starts the run manager and the trace recorder
// (with OTLP export when configured), builds the simulator for sim://
// deployments, and returns the gateway over them. Close the Stack when
// done.
func Build(ctx context.Context, cfg *config.Config, o Options) (*Stack, error) {
	st := &Stack{Store: o.Store, log: o.Logger}
	if st.log == nil {
		st.log = slog.Default()
	}
	if st.Store == nil {
		s, err := open.Open(ctx, cfg.Store)
		if err != nil {
			return nil, err
		}
		st.Store, st.closeStore = s, true
	}
	ok := false
	defer func() {
		if !ok {
			st.unbuilt = true // no "gateway stopped" for a gateway that never started
			_ = st.Close(context.WithoutCancel(ctx))
		}
	}()
	pricing, err := pricingFor(cfg)
	if err != nil {
		return nil, err
	}
	unpriced, err := checkPriced(cfg, pricing, st.log)
	if err != nil {
		return nil, err
	}
	ropts := trace.RecorderOptions{Payload: trace.PayloadPolicy{Capture: trace.Capture(cfg.Capture)}, Logger: o.Logger,
		MaxRetries: spanWriteRetries}
	if cfg.Capture == config.CaptureRedacted && len(cfg.Redact) > 0 {
		red, err := trace.NewRedactor(cfg.Redact)
		if err != nil {
			return nil, fmt.Errorf("gateway: redact: %w", err)
		}
		ropts.Payload.Redactor = red
	}
	if cfg.OTLP.Endpoint != "" {
		exp, err := trace.NewExporter(ctx, trace.OTLPConfig{Endpoint: cfg.OTLP.Endpoint})
		if err != nil {
			return nil, fmt.Errorf("gateway: otlp: %w", err)
		}
		st.exporter = trace.NewRecorder(exp, trace.RecorderOptions{DropWhenFull: true, Logger: o.Logger})
		ropts.Fanout = []trace.Sink{st.exporter}
	}
	st.Recorder = trace.NewRecorder(deferredSpans{st.Store, &st.flushing}, ropts)
	approver := o.Approver
	if approver == nil {
		// Irreversible tools wait in the stored queue for a person:
		// `belay approvals approve ID`, or POST /admin/approvals/ID/approve.
		log := st.log
		where := "--store URL (the store given to this process)"
		if o.Store == nil {
			where = approvalStoreArg(cfg)
		}
		approver = run.QueueApprover{Approvals: st.Store, Notify: func(a store.Approval, until time.Time) {
			// Without it the agent only seemed to hang (newcomer finding).
			log.LogAttrs(context.Background(), slog.LevelWarn, "tool call waits for an approval",
				slog.String("approval", a.ID), slog.String("run", a.RunID), slog.String("tool", a.Tool),
				slog.String("decide", decideHint(a.ID, where)),
				slog.Duration("expires_in", time.Until(until).Round(time.Second)))
		}}
	}
	st.Runs, err = run.NewManager(run.Config{
		Store: st.Store, Pricing: pricing, Sink: st.Recorder,
		Policy:       run.Policy{Irreversible: cfg.Tools.Irreversible, ReadOnly: cfg.Tools.ReadOnly},
		Approver:     approver,
		TenantBudget: tenantBudgets(cfg),
		// The gateway's clients never say a run is over: a run nobody
		// uses for the idle TTL ends by the outcome of its last call.
		EndIdle: true,
		// With a store no other replica serves runs from, the first call
		// of a run the gateway names goes upstream without a store write.
		FirstStepInMemory: processLocal(st.Store),
		Logger:            o.Logger,
		// A crossed alert_at threshold is a WARN log line and
		// belay_budget_alerts_total, besides the run span's event.
		OnAlert: st.alert,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	deps := Deps{Runs: RunTurns(st.Runs, pricing), Store: st.Store, Upstream: o.Upstream, Logger: o.Logger,
		Flush: st.Flush}
	if usesSim(cfg) {
		p, err := sim.ParseProfile(cfg.Sim.Profile)
		if err != nil {
			return nil, &ConfigError{fmt.Errorf("gateway: sim.profile: %w", err)}
		}
		var script *sim.Script
		if cfg.Sim.Script != "" {
			b, err := os.ReadFile(cfg.Sim.Script)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, &ConfigError{fmt.Errorf("gateway: sim.script: %w (a relative path in a config file is read from that file's folder)", err)}
			}
			if err != nil {
				return nil, &ConfigError{fmt.Errorf("gateway: sim.script: %w", err)}
			}
			if script, err = sim.ParseScript(b); err != nil {
				return nil, &ConfigError{fmt.Errorf("gateway: sim.script %s: %w", cfg.Sim.Script, err)}
			}
		}
		st.Sim = sim.New(sim.Config{Profile: p, Seed: uint64(cfg.Sim.Seed), Script: script, Deployments: simProfiles(cfg)})
		deps.Sim = st.Sim
	}
	deps.Unpriced = unpriced
	if st.Server, err = New(cfg, deps); err != nil {
		return nil, err
	}
	ok = true
	return st, nil
}

// simProfiles maps the simulated deployments that set sim_profile to their
// profile (validated by config.Validate); nil when none does.
func simProfiles(cfg *config.Config) map[string]sim.Profile {
	var out map[string]sim.Profile
	for _, m := range cfg.Models {
		for _, d := range m.Deployments {
			if p, ok := sim.LookupProfile(d.SimProfile); ok && d.IsSim() {
				if out == nil {
					out = map[string]sim.Profile{}
				}
				out[d.Name] = p
			}
		}
	}
	return out
}

// processLocal reports whether s is a store only this process serves runs
// from: the embedded SQLite file or memory (PostgreSQL is shared by
// replicas).
func processLocal(s store.Store) bool {
	switch s.(type) {
	case *memstore.Store, *sqlite.Store:
		return true
	}
	return false
}

// deferredSpans writes the recorder's batches as store.Deferrable writes
// (traces are never on a request path), except while a Stack.Flush waits
// for them.
type deferredSpans struct {
	s        store.Spans
	flushing *atomic.Int32
}

func (d deferredSpans) WriteSpans(ctx context.Context, spans []trace.Span) error {
	if d.flushing.Load() == 0 {
		ctx = store.Deferrable(ctx)
	}
	return d.s.WriteSpans(ctx, spans)
}

// alert reports a crossed budget threshold: a WARN log line, and the
// metric once the Server exists (alerts come from settles, after Build).
func (st *Stack) alert(a budget.Alert) {
	st.log.Warn("budget alert", "scope", string(a.Scope), "threshold", a.Threshold,
		"spent_usd", a.Settled.Decimal(), "limit_usd", a.Limit.Decimal())
	if st.Server != nil {
		st.Server.metrics.alert(a)
	}
}

// approvalStoreArg returns the flag that gives belay approvals cfg's store
// from any folder (newcomer finding: the hint, run beside a config whose
// store was elsewhere, read ./belay.db): a SQLite file by its absolute
// path, another store through the config file when there is one, else by
// its URL with the password hidden; "" for memory://, which no other
// process reaches.
func approvalStoreArg(cfg *config.Config) string {
	if path, ok := open.SQLitePath(cfg.Store); ok {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return "--store " + shellword.Quote("sqlite://"+path)
	}
	if InMemoryStore(cfg.Store) {
		return ""
	}
	if cfg.Path != "" {
		if abs, err := filepath.Abs(cfg.Path); err == nil {
			return "--config " + shellword.Quote(abs)
		}
	}
	return "--store " + shellword.Quote(open.Redacted(cfg.Store))
}

// decideHint says how to decide approval id: with belay approvals and the
// flag that names the store (approvalStoreArg), or, for a store in this
// process's memory, only here (a gateway's admin API, or the store's
// DecideApproval in a Go program).
func decideHint(id, storeArg string) string {
	if storeArg == "" {
		return "POST /admin/approvals/" + id + "/approve|deny on the gateway, or Store.DecideApproval in this process " +
			"(belay approvals cannot reach the in-memory store)"
	}
	return "belay approvals approve|deny " + id + " " + storeArg + " (or POST /admin/approvals/" + id + "/approve|deny on the gateway)"
}

// spanWriteRetries is how many times the trace recorder retries a batch
// of spans the store refused: with its backoff (50 ms doubling to 2 s) it
// keeps trying for about a minute, as run records and settles are retried
// (run.Config.StoreRetryFor), while its queue (8192 spans) holds the
// spans that come meanwhile. With the recorder's default (3), a store
// away for a second lost the spans of answered, charged calls
// (adversarial review, session 26).
const spanWriteRetries = 35

// Close stops the run manager, flushes the traces, closes the store
// (unless it was given in Options) and the idle upstream connections.
func (st *Stack) Close(ctx context.Context) error {
	var errs []error
	if st.Runs != nil {
		// The runs the gateway named itself (each one call) that are
		// still open end now: a call in flight (a long stream) is
		// stopped softly, finishes and is charged, instead of its run
		// staying "running" in the store.
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := st.Runs.EndFresh(ectx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("gateway: ending %d runs at shutdown: %w", n, err))
		}
		if st.log != nil && !st.unbuilt {
			st.log.Info("gateway stopped", "runs_ended", n)
		}
		errs = append(errs, st.Runs.Close())
	}
	if st.Recorder != nil {
		errs = append(errs, st.Recorder.Close(ctx))
	}
	if st.exporter != nil {
		// The OTLP export is a copy of the stored trace: spans it could not
		// send are a warning in the log, not a failed shutdown (an
		// unreachable collector made belay serve exit 1 after serving well).
		if err := st.exporter.Close(ctx); err != nil {
			st.log.Warn("otlp export incomplete at shutdown; the store holds every span", "err", err)
		}
	}
	if st.closeStore && st.Store != nil {
		errs = append(errs, st.Store.Close())
	}
	if st.Server != nil {
		if c, ok := st.Server.upstream.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections() // the upstream connections it keeps alive
		}
	}
	return errors.Join(errs...)
}

// Serve builds the whole gateway for cfg (Build) and serves on cfg.Listen
// until ctx ends; then it shuts down and closes everything. This is what
// `belay serve` runs. The port is bound first: one in use fails before
// anything is built, with an error that says so. listening, when not nil,
// is called with the bound address once the store is open too.
func Serve(ctx context.Context, cfg *config.Config, listening func(net.Addr)) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("gateway: %w (another process listens on %s: give belay serve another address with --listen HOST:PORT or the config's listen:)", err, cfg.Listen)
		}
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return fmt.Errorf("gateway: %w (want HOST:PORT, such as 127.0.0.1:4000 or :4000)", err)
		}
		return fmt.Errorf("gateway: %w", err)
	}
	st, err := Build(ctx, cfg, Options{})
	if err != nil {
		ln.Close()
		return err
	}
	if listening != nil {
		listening(ln.Addr())
	}
	serr := st.Server.Serve(ctx, ln)
	cerr := st.Close(context.WithoutCancel(ctx))
	return errors.Join(serr, cerr)
}

// InMemoryStore reports whether url names the in-memory store
// (memory://), which keeps nothing once the process ends. A bare "memory"
// is a SQLite file path, as every value without a scheme is (a newcomer
// finding: `--store memory` kept nothing, and said nothing of it).
func InMemoryStore(url string) bool {
	scheme, rest, ok := strings.Cut(url, "://")
	return ok && strings.EqualFold(scheme, "memory") && rest == ""
}

func usesSim(cfg *config.Config) bool {
	for _, m := range cfg.Models {
		for _, d := range m.Deployments {
			if d.IsSim() {
				return true
			}
		}
	}
	return false
}

func pricingFor(cfg *config.Config) (*budget.Pricing, error) {
	if len(cfg.Pricing) == 0 {
		return budget.DefaultPricing(), nil
	}
	over := map[string]budget.Price{}
	for m, p := range cfg.Pricing {
		pr := budget.Price{Input: p.Input.V(), Output: p.Output.V(), CachedInput: p.CachedInput.V(), CacheWrite: p.CacheWrite.V(), CacheWrite1h: p.CacheWrite1h.V(),
			WebSearchCall: p.WebSearchCall.V(), FileSearchCall: p.FileSearchCall.V()}
		if t := p.Priority; t != nil {
			pr.Priority = &budget.Price{Input: t.Input.V(), CachedInput: t.CachedInput.V(), Output: t.Output.V()}
		}
		over[m] = pr
	}
	p, err := budget.NewPricing(budget.PricingOptions{Overrides: over})
	if err != nil {
		return nil, fmt.Errorf("gateway: pricing: %w", err)
	}
	return p, nil
}

// ConfigError is a config the gateway cannot be built from for a reason
// config.Validate does not see, because it reads no files: sim.script
// missing or malformed. It is the operator's to fix (belay serve exits 2,
// as for a config that fails to load).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// UnpricedError is a config whose money limits cannot hold: a deployment's
// model has no price (not in the built-in table, no pricing: entry), so
// its calls would be reserved and charged $0.
type UnpricedError struct {
	Config      string   // the config file, "" for one built in code
	Deployments []string // `d1 (openai model "ft:…")`, in config order
	Limit       string   // the money limit that would not hold, as written in the config
	Example     string   // a pricing: entry to copy
}

func (e *UnpricedError) Error() string {
	where := ""
	if e.Config != "" {
		where = "config " + e.Config + ": "
	}
	return fmt.Sprintf("%sno price for deployment %s, so %s would count its calls as $0: add the model under pricing: "+
		"(USD per million tokens), e.g. %s, with input: 0 and output: 0 for a model that costs nothing",
		where, strings.Join(e.Deployments, ", "), e.Limit, e.Example)
}

// checkPriced refuses a config with money limits (limits.max_cost_usd,
// a tenant's, or a tenant budget) and a deployment whose model pricing
// does not price: the limits would not hold for its calls (adversary
// finding: a fine-tuned model's calls ran past a run's money limit at $0
// each). Without money limits, such deployments are named in a warning
// and returned (by name): a request asking X-Belay-Max-Cost-Usd of a
// model they serve is refused (see Deps.Unpriced), since the limit could
// not hold for them either.
func checkPriced(cfg *config.Config, pricing *budget.Pricing, log *slog.Logger) (map[string]bool, error) {
	var unpriced []string
	names := map[string]bool{}
	example := ""
	for _, m := range cfg.Models {
		for _, d := range m.Deployments {
			if _, _, err := pricing.Lookup(d.Provider, d.Model); err != nil {
				unpriced = append(unpriced, fmt.Sprintf("%s (%s model %q)", d.Name, d.Provider, d.Model))
				names[d.Name] = true
				if example == "" {
					example = fmt.Sprintf("pricing: {%q: {input: 0.30, output: 1.20}}", d.Model)
				}
			}
		}
	}
	if len(unpriced) == 0 {
		return nil, nil
	}
	if limit := moneyLimit(cfg); limit != "" {
		return nil, &UnpricedError{Config: cfg.Path, Deployments: unpriced, Limit: limit, Example: example}
	}
	log.Warn("no price for these deployments: their calls count as $0, and a request asking X-Belay-Max-Cost-Usd of a model they serve is refused; add their models under pricing:",
		slog.Any("deployments", unpriced))
	return names, nil
}

// moneyLimit names a money limit of cfg ("limits.max_cost_usd $1.00",
// "tenant acme's budget $50.00"), or "" when there is none.
func moneyLimit(cfg *config.Config) string {
	if cfg.Limits.MaxCostUSD > 0 {
		if cfg.LimitsDefaulted {
			return "the default run limit of " + cfg.Limits.MaxCostUSD.V().String() +
				" (the config has no limits section; one without max_cost_usd sets no money limit)"
		}
		return "limits.max_cost_usd " + cfg.Limits.MaxCostUSD.V().String()
	}
	for _, t := range cfg.Tenants {
		switch {
		case t.Limits.MaxCostUSD > 0:
			return fmt.Sprintf("tenant %s's limits.max_cost_usd %s", t.Name, t.Limits.MaxCostUSD.V())
		case t.Budget.USD > 0:
			return fmt.Sprintf("tenant %s's budget %s", t.Name, t.Budget.USD.V())
		}
	}
	return ""
}

func tenantBudgets(cfg *config.Config) func(string) (run.TenantBudget, bool) {
	m := map[string]run.TenantBudget{}
	for _, t := range cfg.Tenants {
		m[t.Name] = run.TenantBudget{Limit: t.Budget.USD.V(), Period: budget.Period(t.Budget.Period), AlertAt: t.Budget.AlertAt}
	}
	return func(name string) (run.TenantBudget, bool) {
		tb, ok := m[name]
		return tb, ok
	}
}
