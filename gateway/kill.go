package gateway

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/internal/suggest"
	"github.com/belay-run/belay/store"
)

// KillNames returns the names a kill flag on target t can match in a
// gateway serving cfg, in config order without repeats:
//
//   - store.KillModel: the model aliases, then the provider model names of
//     their deployments. A model flag refuses a call whose alias or first
//     deployment's model it names (run.Step's Alias and Model), and the
//     router passes over each deployment whose model it names.
//   - store.KillDeployment: the deployment names (default
//     "provider/model#index").
//   - store.KillTenant: the tenants' names; DefaultTenant when the config
//     has none (every call is then the default tenant's).
//
// Other targets' names (runs, tools) are not all in a config: nil.
func KillNames(cfg *config.Config, t store.KillTarget) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	switch t {
	case store.KillModel:
		for _, m := range cfg.Models {
			add(m.Alias)
		}
		for _, m := range cfg.Models {
			for _, d := range m.Deployments {
				add(d.Model)
			}
		}
	case store.KillDeployment:
		for _, m := range cfg.Models {
			for _, d := range m.Deployments {
				add(d.Name)
			}
		}
	case store.KillTenant:
		if len(cfg.Tenants) == 0 {
			add(DefaultTenant)
		}
		for _, t := range cfg.Tenants {
			add(t.Name)
		}
	}
	return names
}

// NotServedError is a kill flag on a model, deployment or tenant that
// nothing in a config can match: most likely a typo. Kill flags live in
// the store, which other gateways (with other configs) and Go agents may
// share, so a caller may still set it on purpose (the admin API's
// "force", the CLI's --force).
type NotServedError struct {
	Target store.KillTarget // store.KillModel, store.KillDeployment or store.KillTenant
	Name   string
	// Config is the file the config was read from (config.Config.Path);
	// empty for the default config.
	Config string
	// Known are the names the config serves: KillNames(cfg, Target).
	Known []string
}

// Error reads `no model named "gtp-4o" in the config belay.yaml: its
// models (aliases and provider model names) are smart, gpt-4o`.
func (e *NotServedError) Error() string {
	cfg := "the default config"
	if e.Config != "" {
		cfg = "the config " + e.Config
	}
	what := string(e.Target) + "s"
	if e.Target == store.KillModel {
		what = "models (aliases and provider model names)"
	}
	return fmt.Sprintf("no %s named %q in %s: its %s are %s", e.Target, e.Name, cfg, what, strings.Join(e.Known, ", "))
}

// CheckKill returns a *NotServedError when a kill flag on target t named
// name would match no model, deployment or tenant of cfg; nil when it
// would, and for the targets whose names are not in a config (all, run,
// tool).
func CheckKill(cfg *config.Config, t store.KillTarget, name string) error {
	if t == store.KillTool {
		return checkKillTool(cfg, name)
	}
	if t != store.KillModel && t != store.KillDeployment && t != store.KillTenant {
		return nil
	}
	known := KillNames(cfg, t)
	if slices.Contains(known, name) {
		return nil
	}
	return &NotServedError{Target: t, Name: name, Config: cfg.Path, Known: known}
}

// checkKillTool refuses a tool name that matches none of the config's
// tools patterns (tools.irreversible, tools.read_only) but is near one of
// its names: most likely a typo (newcomer finding: "issue_refnd" was
// flagged, and issue_refund ran on). Any other name is accepted: a tool
// need not be named in the config to be disabled.
func checkKillTool(cfg *config.Config, name string) error {
	var names []string
	for _, p := range slices.Concat(cfg.Tools.Irreversible, cfg.Tools.ReadOnly) {
		if ok, _ := path.Match(p, name); ok || p == name {
			return nil
		}
		if !strings.ContainsAny(p, "*?[") {
			names = append(names, p)
		}
	}
	if near := suggest.Closest(name, names); near != "" {
		return fmt.Errorf("tool %q is not named in the config's tools (did you mean %q?)", name, near)
	}
	return nil
}

// NoRunError is a kill flag on a run the store does not hold: most likely
// a mistyped id. A caller may still set it on purpose (the CLI's --force):
// a run the gateway named itself (a call that sent no X-Belay-Run-Id) is
// stored only when its call ends, and a flag may be set before its run
// starts.
type NoRunError struct {
	ID string
}

// Error reads `no run "r-9" in the store`.
func (e *NoRunError) Error() string { return fmt.Sprintf("no run %q in the store", e.ID) }

// Hint is what to add to the error for an id without RunKeySep, which a
// gateway with tenants never stores: "; a gateway with tenants stores a
// client's run as TENANT~ID". It is "" for other ids.
func (e *NoRunError) Hint() string {
	if strings.Contains(e.ID, RunKeySep) {
		return ""
	}
	return "; a gateway with tenants stores a client's run as TENANT" + RunKeySep + "ID"
}

// CheckKillRun returns a *NoRunError when runs holds no run id, nil when
// it holds one (running or ended), and the store's other errors as they
// are.
func CheckKillRun(ctx context.Context, runs store.Runs, id string) error {
	_, err := runs.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return &NoRunError{ID: id}
	}
	return err
}
