// Package route sends a model call through a model alias's fallback chain:
// each deployment behind its own circuit breaker, transient failures retried
// on the same deployment under a retry policy and an Envoy-style retry
// budget, degraded failures passed to the next deployment, and the whole
// chain held to one attempt budget and one deadline (the context's).
//
// A Router is built once from a Config and is safe for concurrent use. Its
// Do method is the attempt loop; the other methods expose the deployments,
// aliases and breakers for admin pages and metrics.
package route

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
)

// Deployment is one place a model can be called: a provider, a model, the
// credentials and base URL to reach it. Its String method leaves out APIKey.
type Deployment struct {
	// Name is unique among a Router's deployments; traces, metrics and
	// failures name the deployment by it.
	Name     string
	Provider string
	Model    string
	BaseURL  string
	APIKey   string
	// Dialect is the wire format the deployment speaks: "openai",
	// "anthropic" or "gemini" ("" when the caller does not need it).
	Dialect string
	Labels  map[string]string
}

// String returns "name (provider/model)", without the API key.
func (d Deployment) String() string {
	return fmt.Sprintf("%s (%s/%s)", d.Name, d.Provider, d.Model)
}

// Alias is a model alias: a name callers use, and the ordered fallback chain
// of deployments behind it.
type Alias struct {
	Name string
	// DisplayName is the alias as callers know it, for failure messages;
	// empty means Name. (The gateway routes one alias as one chain per
	// dialect, named "openai:smart" and so on; its clients asked for
	// "smart".)
	DisplayName string
	// Deployments names the chain in order; at least one.
	Deployments []string
	// ContextWindowFallback names deployments or aliases (expanded to their
	// chains) to try, once, when the chain stops on a
	// context_length_exceeded failure. Empty means no such fallback.
	ContextWindowFallback []string
	// ContentPolicyFallback is the same for a content_filtered failure.
	ContentPolicyFallback []string
}

// Config builds a Router. The zero value of each field but Deployments and
// Aliases means its default.
type Config struct {
	Deployments []Deployment
	Aliases     []Alias

	// Retry is the policy for each deployment: Retry.MaxAttempts is the
	// attempts on one deployment.
	Retry retry.Policy
	// Breaker configures every deployment's breaker. Its OnStateChange, if
	// set, is called as well as OnBreakerChange.
	Breaker breaker.Settings
	// RetryBudget configures every deployment's retry budget: retries in
	// flight to one deployment are held to a share of the calls in flight
	// to it. A transient failure the budget refuses to retry moves to the
	// next deployment, as if its attempts were used up.
	RetryBudget retry.BudgetSettings

	// MaxAttempts is the attempt budget of one Do call across the whole
	// chain, fallbacks included; attempts refused by a breaker do not
	// count. Zero means Retry's attempts plus one for each further
	// deployment of the alias's chain. Negative is invalid.
	MaxAttempts int

	// Rand returns uniform draws in [0, 1) for backoff jitter. It must be
	// safe for concurrent use. Nil means math/rand/v2's Float64.
	Rand func() float64

	// OnBreakerChange, if set, is called after any deployment's breaker
	// changes state, without any lock held (see breaker.Settings).
	OnBreakerChange func(deployment string, from, to breaker.State)

	// Skip, if set, is asked before each attempt of a call on a
	// deployment, retries included, with the alias the call was made
	// for (Do's); true passes over the deployment as if its breaker were
	// open (an operator disabled it, or the alias, with the kill
	// switch), also in the middle of the call's retries and fallbacks.
	// It must be fast and safe for concurrent use.
	Skip func(alias string, d *Deployment) bool
}

// Router routes calls over deployments and aliases. It is safe for
// concurrent use.
type Router struct {
	deployments map[string]*member
	names       []string // deployment names in Config order
	aliases     map[string]*chain
	policy      retry.Policy
	maxAttempts int
	rand        func() float64
	skip        func(alias string, d *Deployment) bool
}

// member is a deployment with its breaker and retry budget.
type member struct {
	d      Deployment
	b      *breaker.Breaker
	budget *retry.Budget
}

// chain is an alias resolved to members.
type chain struct {
	name            string
	members         []*member
	contextFallback []*member
	contentFallback []*member
	maxAttempts     int
	errAllOpen      *failure.Error
}

// New validates cfg and returns a Router with every breaker closed. Errors
// name the offending field, e.g. `route: aliases[0] (smart).deployments[1]:
// unknown deployment "gpt-5"`.
func New(cfg Config) (*Router, error) {
	if err := cfg.Retry.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Breaker.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.RetryBudget.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxAttempts < 0 {
		return nil, fmt.Errorf("route: max_attempts (%d) is negative; want 0 (default) or more", cfg.MaxAttempts)
	}
	r := &Router{
		deployments: make(map[string]*member, len(cfg.Deployments)),
		aliases:     make(map[string]*chain, len(cfg.Aliases)),
		policy:      cfg.Retry,
		maxAttempts: cfg.MaxAttempts,
		rand:        cfg.Rand,
		skip:        cfg.Skip,
	}
	if r.rand == nil {
		r.rand = rand.Float64
	}
	if err := r.addDeployments(cfg); err != nil {
		return nil, err
	}
	if err := r.addAliases(cfg.Aliases); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Router) addDeployments(cfg Config) error {
	if len(cfg.Deployments) == 0 {
		return fmt.Errorf("route: deployments is empty; want at least one")
	}
	for i, d := range cfg.Deployments {
		switch {
		case d.Name == "":
			return fmt.Errorf("route: deployments[%d].name is empty", i)
		case r.deployments[d.Name] != nil:
			return fmt.Errorf("route: deployments[%d].name %q is a duplicate", i, d.Name)
		case d.Dialect != "" && d.Dialect != "openai" && d.Dialect != "anthropic" && d.Dialect != "gemini":
			return fmt.Errorf("route: deployments[%d] (%s).dialect %q is unknown; want openai, anthropic or gemini", i, d.Name, d.Dialect)
		}
		s := cfg.Breaker
		s.OnStateChange = listener(cfg.Breaker.OnStateChange, cfg.OnBreakerChange)
		b, err := breaker.New(d.Name, s)
		if err != nil {
			return err
		}
		budget, err := retry.NewBudget(cfg.RetryBudget)
		if err != nil {
			return err
		}
		d.Labels = maps.Clone(d.Labels)
		r.deployments[d.Name] = &member{d: d, b: b, budget: budget}
		r.names = append(r.names, d.Name)
	}
	return nil
}

func listener(a func(string, breaker.State, breaker.State), b func(string, breaker.State, breaker.State)) func(string, breaker.State, breaker.State) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(name string, from, to breaker.State) {
		a(name, from, to)
		b(name, from, to)
	}
}

func (r *Router) addAliases(aliases []Alias) error {
	// First pass: primary chains, so that fallbacks may name any alias.
	for i, a := range aliases {
		field := fmt.Sprintf("route: aliases[%d] (%s)", i, a.Name)
		switch {
		case a.Name == "":
			return fmt.Errorf("route: aliases[%d].name is empty", i)
		case r.aliases[a.Name] != nil:
			return fmt.Errorf("route: aliases[%d].name %q is a duplicate", i, a.Name)
		case len(a.Deployments) == 0:
			return fmt.Errorf("%s.deployments is empty; want at least one", field)
		}
		c := &chain{name: a.Name, errAllOpen: allOpenError(cmp.Or(a.DisplayName, a.Name), len(a.Deployments))}
		for j, name := range a.Deployments {
			m := r.deployments[name]
			if m == nil {
				return fmt.Errorf("%s.deployments[%d]: unknown deployment %q", field, j, name)
			}
			if slices.Contains(c.members, m) {
				return fmt.Errorf("%s.deployments[%d]: deployment %q is listed twice", field, j, name)
			}
			c.members = append(c.members, m)
		}
		r.aliases[a.Name] = c
	}
	for i, a := range aliases {
		c := r.aliases[a.Name]
		var err error
		field := fmt.Sprintf("route: aliases[%d] (%s)", i, a.Name)
		if c.contextFallback, err = r.resolve(field+".context_window_fallback", a.ContextWindowFallback); err != nil {
			return err
		}
		if c.contentFallback, err = r.resolve(field+".content_policy_fallback", a.ContentPolicyFallback); err != nil {
			return err
		}
		c.maxAttempts = r.maxAttempts
		if c.maxAttempts == 0 {
			c.maxAttempts = r.policy.Attempts() + len(c.members) - 1
		}
	}
	return nil
}

// resolve turns names of deployments or aliases into members, aliases
// expanded to their primary chains, duplicates dropped.
func (r *Router) resolve(field string, names []string) ([]*member, error) {
	var out []*member
	for j, name := range names {
		var ms []*member
		if c := r.aliases[name]; c != nil {
			ms = c.members
		} else if m := r.deployments[name]; m != nil {
			ms = []*member{m}
		} else {
			return nil, fmt.Errorf("%s[%d]: unknown deployment or alias %q", field, j, name)
		}
		for _, m := range ms {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// Breaker returns the named deployment's breaker, or nil if there is no such
// deployment.
func (r *Router) Breaker(deployment string) *breaker.Breaker {
	if m := r.deployments[deployment]; m != nil {
		return m.b
	}
	return nil
}

// Breakers returns every deployment's breaker state, by deployment name.
func (r *Router) Breakers() map[string]breaker.State {
	out := make(map[string]breaker.State, len(r.deployments))
	for name, m := range r.deployments {
		out[name] = m.b.State()
	}
	return out
}

// Deployments returns a copy of the alias's chain, in order, or nil if there
// is no such alias.
func (r *Router) Deployments(alias string) []Deployment {
	c := r.aliases[alias]
	if c == nil {
		return nil
	}
	out := make([]Deployment, len(c.members))
	for i, m := range c.members {
		out[i] = m.d
		out[i].Labels = maps.Clone(m.d.Labels)
	}
	return out
}

// Aliases returns the alias names, sorted.
func (r *Router) Aliases() []string {
	return slices.Sorted(maps.Keys(r.aliases))
}
