package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/sim"
	"github.com/belay-run/belay/store/open"
)

// serverCommands returns serve and sim.
func serverCommands() []*cobra.Command { return []*cobra.Command{serveCmd(), simCmd()} }

func serveCmd() *cobra.Command {
	var listen, file, storeURL, cpuProfile string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the OpenAI- and Anthropic-compatible gateway (point an agent's base URL at it)",
		Long: `serve runs belay's gateway: POST /v1/chat/completions and POST /v1/responses (OpenAI), POST
/v1/messages and POST /v1/messages/count_tokens (Anthropic), GET /v1/models and /v1/models/{id}, the run
API (GET /v1/belay/runs/{id}, POST /v1/belay/runs/{id}/end), /healthz, /readyz, /metrics and /admin/... .
Every model call is a turn of a run
(X-Belay-Run-Id), admitted against the run's limits and budget, routed with retries, breakers and
fallback, and recorded in the store.

With no --config it uses the embedded SQLite store belay.db in the working directory and the
built-in simulator as its upstream (models gpt-4o-mini and claude-sonnet-5-5), so it answers on a
fresh machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			if file != "" {
				var err error
				if cfg, err = config.Load(file); err != nil {
					if looksLikeSuite(file) {
						err = fmt.Errorf("%w\n(%s looks like an eval suite, with scenarios: run it with belay eval %s)", err, file, file)
					}
					return badInput(err)
				}
			}
			if file != "" && unlimited(cfg) {
				// A config that sets no limits (limits: {}; a config without the
				// section keeps the defaults): say so.
				fmt.Fprintf(cmd.ErrOrStderr(), "belay serve: warning: %s sets no run limits (turns, deadline, cost); "+
					"runs are bounded only by their clients' X-Belay-* headers: set some, or drop the empty limits section to keep the defaults\n", file)
			}
			if len(cfg.Tools.Irreversible) > 0 {
				// Newcomer finding: the config's irreversible tools looked
				// like a guard on the gateway's clients.
				fmt.Fprintf(cmd.ErrOrStderr(), "belay serve: note: tools.irreversible (%s) holds tools run through belay (Go agents' Run.Tool, belay eval); "+
					"the gateway relays a model's tool calls to its client, which runs them without an approval from belay\n", strings.Join(cfg.Tools.Irreversible, ", "))
			}
			if len(cfg.Tools.ReadOnly) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "belay serve: note: tools.read_only (%s) applies to tools run through belay (Go agents' Run.Tool, belay eval); "+
					"the gateway relays a model's tool calls to its client, which runs them itself\n", strings.Join(cfg.Tools.ReadOnly, ", "))
			}
			if file != "" && cfg.ModelsDefaulted {
				fmt.Fprintf(cmd.ErrOrStderr(), "belay serve: warning: %s has no models: the built-in simulator answers %s; "+
					"add a models: section to call real providers\n", file, strings.Join(aliases(cfg), " and "))
			}
			if listen != "" {
				if err := checkListen(listen); err != nil {
					return badInput(err)
				}
				cfg.Listen = listen
			}
			if storeURL != "" {
				cfg.Store = storeURL
			}
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(serveGCPercent)
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return badInput(err)
				}
				defer stop()
			}
			listening := func(addr net.Addr) {
				upstream := ""
				if onlySim(cfg) {
					upstream = ", answered by the built-in simulator"
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "belay serve: listening on http://%s (store %s; models %s%s)\n",
					addr, open.Redacted(cfg.Store), strings.Join(aliases(cfg), ", "), upstream)
			}
			if err := gateway.Serve(cmd.Context(), cfg, listening); err != nil {
				if ue, ok := errors.AsType[*gateway.UnpricedError](err); ok { // the config's fault
					return badInput(ue)
				}
				if ce, ok := errors.AsType[*gateway.ConfigError](err); ok {
					return badInput(ce)
				}
				if errors.Is(err, open.ErrScheme) || errors.Is(err, open.ErrURL) { // --store or the config's store: bad input, as for belay runs
					return badInput(err)
				}
				return exit(1, err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&listen, "listen", "", "address to listen on (default from the config, else 127.0.0.1:4000)")
	f.StringVar(&file, "config", "", "YAML config file (models, retry, breaker, limits, tenants, tools, ...)")
	f.StringVar(&storeURL, "store", "", "store URL: sqlite://PATH (or a bare file path), postgres://URL or memory:// (nothing kept) (default from the config, else sqlite://belay.db)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a Go CPU profile (go tool pprof) to this file until the gateway stops")
	return c
}

// checkListen refuses a --listen that is not host:port before anything
// starts, as the config's listen: is refused (exit 2): "localhost" alone
// failed at bind, exit 1.
func checkListen(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--listen %q is not host:port (e.g. 127.0.0.1:4000, or :4000 for every interface)", addr)
	}
	return nil
}

// serveGCPercent is the garbage collector's target of `belay serve` when
// the environment sets no GOGC: the heap may grow to 5× what is live
// before a collection (Go's default is 2×). The gateway's live heap is
// small and flat (tens of MiB: runs leave memory with their calls), while
// every call allocates: at the default, bench/gateway measured the
// collector's background work at 4.6% of the gateway's CPU under load, at
// 400 at 1.4%.
const serveGCPercent = 400

// unlimited reports whether some runs the config admits have no limit of
// its own: no global limits, and no tenants, or a tenant without limits.
func unlimited(cfg *config.Config) bool {
	if cfg.Limits != (config.Limits{}) {
		return false
	}
	for _, t := range cfg.Tenants {
		if t.Limits == (config.Limits{}) {
			return true
		}
	}
	return len(cfg.Tenants) == 0
}

// startCPUProfile starts a CPU profile written to path; stop ends it and
// closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func simCmd() *cobra.Command {
	var listen, profile, script string
	var seed uint64
	c := &cobra.Command{
		Use:   "sim",
		Short: "Run the LLM API simulator: OpenAI and Anthropic endpoints with scripted replies and fault profiles",
		Long: fmt.Sprintf(`sim serves POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, POST /v1/messages/count_tokens and GET /v1/models in the providers'
real wire formats, with faults drawn from a profile, deterministically for a seed. Each endpoint is
also served under /d/NAME/, where NAME selects a built-in profile (e.g. /d/down/v1/...).

Profiles:
%s`, profileList()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := sim.ParseProfile(profile)
			if err != nil {
				return badInput(err)
			}
			if err := checkListen(listen); err != nil {
				return badInput(err)
			}
			cfg := sim.Config{Profile: p, Seed: seed}
			if script != "" {
				b, err := os.ReadFile(script)
				if err != nil {
					return badInput(err)
				}
				if cfg.Script, err = sim.ParseScript(b); err != nil {
					return badInput(fmt.Errorf("%s: %w", script, err))
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "belay sim: listening on http://%s (profile %s, seed %d)\n", listen, p.Name, seed)
			if err := sim.ListenAndServe(cmd.Context(), listen, cfg); err != nil {
				return exit(1, err)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:4010", "address to listen on")
	f.StringVar(&profile, "profile", "none", "fault profile")
	f.Uint64Var(&seed, "seed", 1, "seed for every random draw")
	f.StringVar(&script, "script", "", "YAML file of scripted replies")
	return c
}

// aliases returns the model aliases cfg serves, in config order.
func aliases(cfg *config.Config) []string {
	out := make([]string, 0, len(cfg.Models))
	for _, m := range cfg.Models {
		out = append(out, m.Alias)
	}
	return out
}

// looksLikeSuite reports whether the YAML file at path has a top-level
// scenarios key, as an eval suite has and a gateway config has not.
func looksLikeSuite(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var top map[string]any
	if yaml.Unmarshal(b, &top) != nil {
		return false
	}
	_, ok := top["scenarios"]
	return ok
}

// onlySim reports whether every deployment of cfg is the built-in
// simulator's.
func onlySim(cfg *config.Config) bool {
	for _, m := range cfg.Models {
		for _, d := range m.Deployments {
			if !strings.HasPrefix(d.BaseURL, config.SimBaseURL) {
				return false
			}
		}
	}
	return true
}

// profileList is the simulator's profiles, one per line with what each does.
func profileList() string {
	var b strings.Builder
	for _, n := range sim.ProfileNames() {
		fmt.Fprintf(&b, "  %-13s %s\n", n, sim.ProfileDoc(n))
	}
	return strings.TrimRight(b.String(), "\n")
}
