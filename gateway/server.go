// Package gateway is belay's HTTP front: an OpenAI-compatible
// (POST /v1/chat/completions) and Anthropic-compatible (POST /v1/messages)
// endpoint that puts every model call on belay's request path —
// identify → admit → route → relay → settle → record → respond — plus
// GET /v1/models (in the caller's dialect), /healthz, /readyz, /metrics and
// the admin API.
//
// A client changes only its base URL: belay adds retries, fallback across
// deployments that speak the client's dialect, circuit breakers, run
// limits (turns, deadline, money), the kill switch and traces. Errors belay
// decides itself come back in the client's dialect with
// x-should-retry: false, so the official SDKs do not retry them again; the
// exception is a failure of belay's own store (503 store_unavailable, with
// Retry-After), which is transient. Error bodies never carry internals
// (upstream URLs, socket addresses, database errors): those go to the log.
// Unknown paths (404) and wrong methods (405) are JSON errors in the
// caller's dialect too.
//
// The same Handler serves in-process Go clients through package transport,
// so gateway and library share one request path.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/route"
	"github.com/belay-run/belay/store"
)

// Deps are the parts a Server is built over. Runs is required; the others
// have defaults.
type Deps struct {
	// Runs is the run layer: identity, admission, settlement, records.
	Runs Turns
	// Store backs /readyz and the admin API. Nil: /readyz reports ready
	// and the admin API answers 503.
	Store store.Store
	// Router routes calls. Nil: built from the config (Router(cfg)), with
	// breaker transitions reported to the metrics.
	Router *route.Router
	// Upstream carries requests to real providers. Nil: an http.Transport
	// with the config's connect timeout.
	Upstream http.RoundTripper
	// Sim serves deployments whose base_url is "sim://". Nil: such
	// deployments fail with a connection error.
	Sim http.Handler
	// Logger receives one line per failed call. Nil: slog.Default().
	Logger *slog.Logger
	// Flush, when set, is called by the admin API before it reads runs
	// from the store: with the run's id before GET /admin/runs/{id}, with
	// "" before a listing. It waits for what this process has written in
	// the background (records, settles, spans), so that a call's answer
	// is never ahead of what the admin API shows for it. The admin API
	// gives it at most adminFlushWait, then reads what is there.
	Flush func(ctx context.Context, runID string) error
	// Unpriced names the deployments without a price (Build finds them).
	// A request that asks a money limit (X-Belay-Max-Cost-Usd) of a model
	// with one of them in its chain is refused: the limit could not hold.
	Unpriced map[string]bool
}

// Server is the gateway. It is safe for concurrent use.
type Server struct {
	// contexts holds the context sizes of the Responses the gateway
	// relayed, for the reservations of their continuations.
	contexts contextCache
	cfg      *config.Config
	runs     Turns
	store    store.Store
	flush    func(ctx context.Context, runID string) error
	// disabled returns the kill flag that disables a deployment (nil:
	// none can); aliasDisabled the one on a model alias clients name;
	// tenantDisabled the all or tenant flag (see Disabler).
	disabled       func(route.Deployment) (store.Kill, bool)
	aliasDisabled  func(alias string) (store.Kill, bool)
	tenantDisabled func(tenant string) (store.Kill, bool)
	// clientAlias maps the router's alias names to the model aliases
	// clients name (their route.Alias DisplayName).
	clientAlias map[string]string
	router      *route.Router
	// upstream sends the attempts. It is called directly, not through an
	// http.Client: an attempt is one request, and a provider's redirect
	// is an answer to classify, not one to follow (a client would also
	// copy the headers of every request in case one came).
	upstream http.RoundTripper
	log      *slog.Logger
	metrics  *metrics
	tenants  tenants
	models   []modelInfo
	handler  http.Handler
	// aliases maps (dialect, alias) to the route alias serving it.
	aliases map[aliasKey]string
	// unpriced: Deps.Unpriced.
	unpriced map[string]bool
	// depTimeouts are the attempt timeouts of the deployments that set
	// their own (config.Deployment.Timeouts), by name; nil when none do.
	depTimeouts map[string]config.Timeouts
	// probe runs /readyz's store probes.
	probe readiness
	// calls counts the model calls in progress (serveModel's handlers).
	calls atomic.Int64
	// finishWait bounds the read of an upstream body's end after its
	// stream's terminator (afterTerminatorWait; tests lengthen it).
	finishWait time.Duration
}

type aliasKey struct {
	dialect failure.Dialect
	alias   string
}

type modelInfo struct {
	alias    string
	dialects []string
}

// simHost is the host of the in-process simulator's base URLs.
const simHost = "sim.belay.internal"

// New builds a Server from cfg (already validated by config.Load or
// config.Default) and deps. It returns an error when deps.Runs is nil or
// the routes cannot be built.
func New(cfg *config.Config, deps Deps) (*Server, error) {
	if deps.Runs == nil {
		return nil, errors.New("gateway: Deps.Runs is required")
	}
	s := &Server{finishWait: afterTerminatorWait, cfg: cfg, runs: deps.Runs, store: deps.Store, flush: deps.Flush, log: deps.Logger, metrics: newMetrics(),
		unpriced: deps.Unpriced}
	if st, ok := deps.Runs.(runStats); ok {
		s.metrics.watchRuns(st.Stats)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.tenants = newTenants(cfg)
	rcfg, aliases, models, err := routeConfig(cfg)
	if err != nil {
		return nil, err
	}
	s.aliases, s.models = aliases, models
	for _, m := range cfg.Models {
		for _, d := range m.Deployments {
			if d.Timeouts != (config.DeploymentTimeouts{}) {
				if s.depTimeouts == nil {
					s.depTimeouts = map[string]config.Timeouts{}
				}
				s.depTimeouts[d.Name] = d.Timeouts.Of(cfg.Timeouts)
			}
		}
	}
	if dis, ok := deps.Runs.(Disabler); ok {
		s.disabled, s.aliasDisabled, s.tenantDisabled = dis.Disabled, dis.AliasDisabled, dis.TenantDisabled
	}
	s.clientAlias = map[string]string{}
	for _, a := range rcfg.Aliases {
		s.clientAlias[a.Name] = a.DisplayName
	}
	s.router = deps.Router
	if s.router == nil {
		rcfg.OnBreakerChange = func(name string, from, to breaker.State) {
			s.metrics.breakerState(name, to)
			// Each change is logged (an open breaker refuses every call to
			// its deployment until it half-opens: newcomer finding, an
			// opening showed only in /admin/breakers and the metrics).
			level := slog.LevelInfo
			if to == breaker.Open {
				level = slog.LevelWarn
			}
			s.log.LogAttrs(context.Background(), level, "breaker "+to.String(), slogString("deployment", name),
				slogString("from", from.String()))
		}
		if s.disabled != nil {
			rcfg.Skip = func(alias string, d *route.Deployment) bool {
				if _, off := s.disabled(*d); off {
					return true
				}
				_, off := s.aliasDisabled(s.clientAlias[alias])
				return off
			}
		}
		if s.router, err = route.New(rcfg); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	for _, d := range rcfg.Deployments {
		s.metrics.breakerState(d.Name, breaker.Closed)
	}
	up := deps.Upstream
	if up == nil {
		up = defaultUpstream(cfg.Timeouts)
	}
	s.upstream = &upstreamMux{real: up, sim: deps.Sim}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the gateway's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Router returns the router the gateway uses (for breakers and tests).
func (s *Server) Router() *route.Router { return s.router }

// ListenAndServe serves on cfg.Listen until ctx ends, then shuts down:
// new connections are refused, and the calls in flight get
// timeouts.shutdown (default 10s) to finish; those still open then are
// canceled (errShutdown), each ending with an error in its client's
// dialect (an error event in a stream), charged for what it used and
// recorded, and Serve waits up to shutdownDrain more for their handlers.
// The http.Server has ReadHeaderTimeout = timeouts.header_read (a client
// that sends its headers slowly cannot hold a connection) and
// IdleTimeout = timeouts.client_idle; each model request's body must
// arrive within timeouts.body_read (a read deadline set for the body
// only, so streamed responses are not bounded).
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return s.Serve(ctx, ln)
}

// errShutdown is the cause a call still open when the gateway's shutdown
// grace ends is canceled with.
var errShutdown = errors.New("the gateway is shutting down (timeouts.shutdown passed)")

// shutdownDrain bounds the wait, after the calls still open are canceled,
// for their handlers to write their ends and settle.
const shutdownDrain = 10 * time.Second

// Serve is ListenAndServe on an existing listener, which it closes. It
// returns nil after a shutdown in which every call ended.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := s.HTTPServer()
	base, cancelCalls := context.WithCancelCause(context.Background())
	defer cancelCalls(nil)
	hs.BaseContext = func(net.Listener) context.Context { return base }
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	gctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeouts.Shutdown.D())
	defer cancel()
	err := hs.Shutdown(gctx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("shutdown: canceling the calls still open", slog.Duration("after", s.cfg.Timeouts.Shutdown.D()))
		cancelCalls(failure.Wrap(failure.Canceled, errShutdown))
		dctx, dcancel := context.WithTimeout(context.Background(), shutdownDrain)
		defer dcancel()
		err = hs.Shutdown(dctx)
	}
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// HTTPServer returns an *http.Server for the Handler with the config's
// client-side timeouts; no write timeout, since streams last as long as
// the model writes.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Addr:              s.cfg.Listen,
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.Timeouts.HeaderRead.D(),
		IdleTimeout:       s.cfg.Timeouts.ClientIdle.D(),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// routeConfig builds the router's configuration: every distinct
// deployment once, and one route alias per (model alias, dialect) holding
// the alias's deployments of that dialect in order, so a fallback never
// crosses dialects.
func routeConfig(cfg *config.Config) (route.Config, map[aliasKey]string, []modelInfo, error) {
	rc := route.Config{Breaker: breakerSettings(cfg.Breaker), RetryBudget: retryBudget(cfg.Retry),
		MaxAttempts: cfg.Retry.ChainMaxAttempts}
	p, err := cfg.Retry.Policy()
	if err != nil {
		return rc, nil, nil, err
	}
	rc.Retry = p
	seen := map[string]bool{}
	aliases := map[aliasKey]string{}
	var models []modelInfo
	for _, m := range cfg.Models {
		byDialect := map[string][]string{}
		var order []string
		for _, d := range m.Deployments {
			if !seen[d.Name] {
				seen[d.Name] = true
				rc.Deployments = append(rc.Deployments, deployment(d))
			}
			if byDialect[d.Provider] == nil {
				order = append(order, d.Provider)
			}
			byDialect[d.Provider] = append(byDialect[d.Provider], d.Name)
		}
		for _, dl := range order {
			name := dl + ":" + m.Alias
			rc.Aliases = append(rc.Aliases, route.Alias{Name: name, DisplayName: m.Alias, Deployments: byDialect[dl]})
			aliases[aliasKey{failure.Dialect(dl), m.Alias}] = name
		}
		models = append(models, modelInfo{alias: m.Alias, dialects: order})
	}
	return rc, aliases, models, nil
}

func deployment(d config.Deployment) route.Deployment {
	base := d.BaseURL
	if d.IsSim() {
		base = "http://" + simHost + "/d/" + url.PathEscape(d.Name)
		if d.Provider == config.ProviderOpenAI {
			base += "/v1"
		}
	}
	return route.Deployment{Name: d.Name, Provider: d.Provider, Model: d.Model, BaseURL: base, APIKey: d.APIKey.Value, Dialect: d.Provider}
}

func breakerSettings(b config.Breaker) breaker.Settings {
	return breaker.Settings{
		ConsecutiveFailures: b.ConsecutiveFailures,
		FailureRate:         b.FailureRate,
		MinRequests:         b.MinRequests,
		Window:              b.Window.D(),
		OpenFor:             b.OpenFor.D(),
	}
}

// timeoutsOf returns the attempt timeouts of deployment name: its own
// where it sets them, the gateway's otherwise.
func (s *Server) timeoutsOf(name string) config.Timeouts {
	if t, ok := s.depTimeouts[name]; ok {
		return t
	}
	return s.cfg.Timeouts
}
