package config

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/belay-run/belay/internal/suggest"
	"github.com/belay-run/belay/retry"
	"github.com/belay-run/belay/sim"
	"github.com/belay-run/belay/trace"
)

// Validate reports the first invalid field as an *Error naming its key path
// and the allowed values ("models[0].deployments[1].provider: \"azure\" is
// not a provider; want openai or anthropic"). Load calls it (and adds the
// file and line); call it again after editing a Config in code.
func (c *Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen", "%q is not host:port", c.Listen)
	}
	if err := validStoreURL(c.Store); err != nil {
		return err
	}
	if err := c.validateKeys(); err != nil {
		return err
	}
	if err := c.validateModels(); err != nil {
		return err
	}
	if _, err := c.Retry.Policy(); err != nil {
		return err
	}
	if err := c.Breaker.validate(); err != nil {
		return err
	}
	if err := c.Limits.validate("limits"); err != nil {
		return err
	}
	if err := c.validateTenants(); err != nil {
		return err
	}
	for i, p := range c.Tools.Irreversible {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return bad(fmt.Sprintf("tools.irreversible[%d]", i), "%q is not a glob pattern", p)
		}
	}
	for i, p := range c.Tools.ReadOnly {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return bad(fmt.Sprintf("tools.read_only[%d]", i), "%q is not a glob pattern", p)
		}
	}
	switch c.Capture {
	case CaptureOff, CaptureRedacted, CaptureFull:
	default:
		return bad("capture", "%q is not allowed; want off, redacted or full", c.Capture)
	}
	for m, p := range c.Pricing {
		if m == "" {
			return bad("pricing", "a model name is empty")
		}
		_ = p // amounts are non-negative by construction (USD.UnmarshalYAML)
	}
	if c.OTLP.Endpoint != "" {
		if u, err := url.Parse(c.OTLP.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("otlp.endpoint", "%q is not an http(s) URL", c.OTLP.Endpoint)
		}
	}
	for i, name := range c.Redact {
		if !slices.Contains(trace.BuiltinRedactions, name) {
			return bad(fmt.Sprintf("redact[%d]", i), "%q is not a redaction; want one of %s", name, strings.Join(trace.BuiltinRedactions, ", "))
		}
	}
	if _, err := sim.ParseProfile(c.Sim.Profile); err != nil {
		return bad("sim.profile", "%q is not a profile; want one of %s", c.Sim.Profile, strings.Join(sim.ProfileNames(), ", "))
	}
	if c.MaxBodyBytes < 0 {
		return bad("max_body_bytes", "%d is negative; want a byte count (default %d)", c.MaxBodyBytes, DefaultMaxBodyBytes)
	}
	if c.MaxUpstreamBodyBytes < 0 {
		return bad("max_upstream_body_bytes", "%d is negative; want a byte count (default %d)", c.MaxUpstreamBodyBytes, DefaultMaxUpstreamBodyBytes)
	}
	return nil
}

func validStoreURL(s string) error {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return bad("store", "%q is not a store URL; want sqlite://PATH, postgres://... or memory://", s)
	}
	switch strings.ToLower(scheme) { // as store/open reads it
	case "sqlite", "sqlite3", "file", "postgres", "postgresql":
		return nil
	case "memory":
		if rest != "" {
			return bad("store", "%q: the in-memory store takes no path; want memory://", s)
		}
		return nil
	}
	return bad("store", "scheme %q is not supported; want sqlite, postgres or memory", scheme)
}

func (c *Config) validateModels() error {
	aliases := map[string]bool{}
	names := map[string]bool{}
	for i, m := range c.Models {
		f := fmt.Sprintf("models[%d]", i)
		if m.Alias == "" {
			return bad(f+".alias", "is required")
		}
		if aliases[m.Alias] {
			return bad(f+".alias", "%q is defined twice", m.Alias)
		}
		aliases[m.Alias] = true
		if len(m.Deployments) == 0 {
			return bad(f+".deployments", "alias %q has no deployments", m.Alias)
		}
		inAlias := map[string]int{}
		for j, d := range m.Deployments {
			df := fmt.Sprintf("%s.deployments[%d]", f, j)
			if k, dup := inAlias[d.Name]; dup && d.Name != "" {
				// A chain tries each deployment once (its retries are its
				// own): a second place in it is a slip (a newcomer's got
				// exit 1 from the router, without the file's line).
				return bad(df+".name", "%q is listed twice in alias %q (also deployments[%d])", d.Name, m.Alias, k)
			}
			inAlias[d.Name] = j
			if d.Provider != ProviderOpenAI && d.Provider != ProviderAnthropic {
				return bad(df+".provider", "%q is not a provider; want openai or anthropic", d.Provider)
			}
			if d.Model == "" {
				return bad(df+".model", "is required")
			}
			if diff := deploymentDiff(c, d); names[d.Name] && diff != nil {
				msg := fmt.Sprintf("%q names two different deployments (they differ in %s)", d.Name, strings.Join(diff, ", "))
				if d.Name == fmt.Sprintf("%s/%s#%d", d.Provider, d.Model, j) {
					msg += "; belay gave them this name, as they have none: give each deployment a name of its own"
				}
				return bad(df+".name", "%s", msg)
			}
			names[d.Name] = true
			if d.SimProfile != "" {
				if !d.IsSim() {
					return bad(df+".sim_profile", "applies to the built-in simulator only (base_url: %s); this deployment's base_url is %q", SimBaseURL, d.BaseURL)
				}
				if _, ok := sim.LookupProfile(d.SimProfile); !ok {
					hint := ""
					if near := suggest.Closest(d.SimProfile, sim.ProfileNames()); near != "" {
						hint = fmt.Sprintf(" (did you mean %s?)", near)
					}
					return bad(df+".sim_profile", "%q is not a profile%s; want one of %s", d.SimProfile, hint, strings.Join(sim.ProfileNames(), ", "))
				}
			}
			if d.IsSim() {
				continue
			}
			u, err := url.Parse(d.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return bad(df+".base_url", "%q is not an http(s) URL or %s", d.BaseURL, SimBaseURL)
			}
			if u.RawQuery != "" || u.ForceQuery || strings.Contains(d.BaseURL, "#") { // "#" alone leaves u.Fragment empty
				return bad(df+".base_url", "%q has a query or a fragment: belay adds the API's path to base_url (BASE/chat/completions, BASE/v1/messages), "+
					"which would land after it; give the URL without ?… or #… (Azure OpenAI: its v1 API, https://RESOURCE.openai.azure.com/openai/v1)", d.BaseURL)
			}
			if msg := pathSlip(d.Provider, u); msg != "" {
				return bad(df+".base_url", "%q %s", d.BaseURL, msg)
			}
			if !d.APIKey.IsSet() && (sameHost(u, OpenAIBaseURL) || sameHost(u, AnthropicBaseURL)) {
				// A self-hosted endpoint (vLLM, Ollama) may take no key:
				// the call then goes without Authorization or x-api-key.
				return bad(df+".api_key", "is required for %s (a literal or env:NAME)", u.Hostname())
			}
		}
	}
	return nil
}

// pathSlip says what is wrong with a base_url whose path has a /v1 too
// many or too few, or "": the Anthropic SDKs' base URL has no /v1 (belay
// adds /v1/messages, so ".../v1" would call /v1/v1/messages), and OpenAI's
// own API is under /v1 (https://api.openai.com alone would call
// /chat/completions, a 404). Other OpenAI-compatible hosts keep their own
// layouts (Groq's /openai/v1, Azure's deployment paths) and are not
// checked.
func pathSlip(provider string, u *url.URL) string {
	p := strings.TrimSuffix(u.Path, "/")
	switch {
	case provider == ProviderAnthropic && strings.HasSuffix(p, "/v1"):
		return "ends in /v1, which belay adds itself for anthropic (it calls BASE/v1/messages, as the Anthropic SDKs do): drop the /v1"
	case provider == ProviderOpenAI && sameHost(u, OpenAIBaseURL) && p != "/v1":
		return "is OpenAI's API without its /v1 path: use " + OpenAIBaseURL + " (belay calls BASE/chat/completions, as the OpenAI SDKs do)"
	}
	return ""
}

// deploymentDiff names the fields in which the first other deployment
// named d.Name differs from d (api_key and timeouts without their values);
// nil when every deployment of that name is d, so one deployment may
// appear in several aliases' chains.
func deploymentDiff(c *Config, d Deployment) []string {
	for _, m := range c.Models {
		for _, o := range m.Deployments {
			if o.Name != d.Name {
				continue
			}
			var out []string
			for _, f := range []struct {
				name string
				a, b string
				show bool
			}{
				{"provider", o.Provider, d.Provider, true}, {"model", o.Model, d.Model, true},
				{"base_url", o.BaseURL, d.BaseURL, true}, {"api_key", o.APIKey.Value, d.APIKey.Value, false},
				{"timeouts", fmt.Sprint(o.Timeouts), fmt.Sprint(d.Timeouts), false},
				{"sim_profile", o.SimProfile, d.SimProfile, true},
			} {
				switch {
				case f.a == f.b:
				case f.show:
					out = append(out, fmt.Sprintf("%s: %q and %q", f.name, f.a, f.b))
				default:
					out = append(out, f.name)
				}
			}
			if out != nil {
				return out
			}
		}
	}
	return nil
}

// Policy returns the retry policy, or an error naming the invalid field.
func (r Retry) Policy() (retry.Policy, error) {
	p := retry.Policy{MaxAttempts: r.MaxAttempts, Base: r.Base.D(), Cap: r.Cap.D(), MaxRetryAfter: r.MaxRetryAfter.D()}
	switch r.Jitter {
	case "", "full":
		p.Jitter = retry.FullJitter
	case "equal":
		p.Jitter = retry.EqualJitter
	case "none":
		p.Jitter = retry.NoJitter
	default:
		return p, bad("retry.jitter", "%q is not allowed; want full, equal or none", r.Jitter)
	}
	if err := p.Validate(); err != nil {
		return p, retryError(err)
	}
	if err := (retry.BudgetSettings{Ratio: r.BudgetRatio}).Validate(); err != nil {
		return p, retryError(err)
	}
	return p, nil
}

// retryError places an error of package retry, which names the config's
// keys ("retry: cap (1s) is below base (2s)"), at its key: retry.cap,
// "1s is below base (2s)".
func retryError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "retry: ")
	key, rest, _ := strings.Cut(msg, " (")
	value, rest, ok := strings.Cut(rest, ")")
	if !ok || strings.Contains(key, " ") {
		return bad("retry", "%s", msg)
	}
	return bad("retry."+key, "%s%s", value, rest)
}

func (b Breaker) validate() error {
	switch {
	case b.ConsecutiveFailures < 0:
		return bad("breaker.consecutive_failures", "%d is negative; want 0 (default) or more", b.ConsecutiveFailures)
	case !(b.FailureRate >= 0 && b.FailureRate <= 1):
		return bad("breaker.failure_rate", "%v is outside [0, 1]", b.FailureRate)
	case b.MinRequests < 0:
		return bad("breaker.min_requests", "%d is negative; want 0 (default) or more", b.MinRequests)
	}
	return nil
}

func (l Limits) validate(f string) error {
	switch {
	case l.MaxTurns < 0:
		return bad(f+".max_turns", "%d is negative; want 0 (unlimited) or more", l.MaxTurns)
	case l.MaxTokens < 0:
		return bad(f+".max_tokens", "%d is negative; want 0 (unlimited) or more", l.MaxTokens)
	}
	return nil
}

// tenantNamePattern is what a tenant's name may hold.
var tenantNamePattern = regexp.MustCompile(`^[A-Za-z0-9._:\-]{1,64}$`)

func (c *Config) validateTenants() error {
	names := map[string]bool{}
	keys := map[string]string{}
	for i, t := range c.Tenants {
		f := fmt.Sprintf("tenants[%d]", i)
		if t.Name == "" {
			return bad(f+".name", "is required")
		}
		if !tenantNamePattern.MatchString(t.Name) {
			// The name is part of its runs' ids (TENANT~ID), its ledger
			// scopes and admin URLs.
			return bad(f+".name", "%q: want 1-64 characters of letters, digits and . _ : -", t.Name)
		}
		if names[t.Name] {
			return bad(f+".name", "%q is defined twice", t.Name)
		}
		names[t.Name] = true
		if !t.Key.IsSet() {
			return bad(f+".key", "is required (a literal or env:NAME)")
		}
		if other, dup := keys[t.Key.Value]; dup {
			return bad(f+".key", "tenants %q and %q have the same key", other, t.Name)
		}
		keys[t.Key.Value] = t.Name
		switch t.Budget.Period {
		case PeriodDay, PeriodMonth:
		default:
			return bad(f+".budget.period", "%q is not allowed; want day or month", t.Budget.Period)
		}
		for k, a := range t.Budget.AlertAt {
			if !(a > 0 && a <= 1) {
				return bad(fmt.Sprintf("%s.budget.alert_at[%d]", f, k), "%v is outside (0, 1]; want a fraction such as 0.8", a)
			}
		}
		if err := t.Limits.validate(f + ".limits"); err != nil {
			return err
		}
	}
	return nil
}

// TenantLimits returns the limits of tenant name: its own, each zero field
// taken from the global limits. An unknown name gets the global limits.
func (c *Config) TenantLimits(name string) Limits {
	for _, t := range c.Tenants {
		if t.Name == name {
			return t.Limits.Or(c.Limits)
		}
	}
	return c.Limits
}

// sameHost reports whether u is on the host of a provider's base URL:
// host names compared without case (RFC 3986 section 3.2.2), and a port
// that is its scheme's default the same as none.
func sameHost(u *url.URL, base string) bool {
	b, _ := url.Parse(base)
	port := u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	return strings.EqualFold(u.Hostname(), b.Hostname()) && port == b.Port()
}

// validateKeys refuses a key an HTTP header cannot carry (see controlByte;
// an env: key is checked as it is read, naming its variable, so this
// catches literal keys and those of a Config built in code), and a key
// clients send (admin_key, a tenant's key) with a space or tab at an end.
// The error names the key's field, never the key.
func (c *Config) validateKeys() error {
	check := func(field, v string) error {
		if i := controlByte(v); i >= 0 {
			return bad(field, "holds a control character (byte %d of %d): an HTTP header cannot carry it", i+1, len(v))
		}
		return nil
	}
	// A client's key arrives with the spaces and tabs at its ends removed
	// (HTTP strips them from a header's value), so a key a client sends
	// must not have any there.
	sent := func(field, v string) error {
		if err := check(field, v); err != nil {
			return err
		}
		if strings.Trim(v, " \t") != v {
			return bad(field, "has a space or tab at its start or end: a client's key reaches belay without them, so it could never match")
		}
		return nil
	}
	if err := sent("admin_key", c.AdminKey.Value); err != nil {
		return err
	}
	for i, m := range c.Models {
		for j, d := range m.Deployments {
			if err := check(fmt.Sprintf("models[%d].deployments[%d].api_key", i, j), d.APIKey.Value); err != nil {
				return err
			}
		}
	}
	for i, t := range c.Tenants {
		if err := sent(fmt.Sprintf("tenants[%d].key", i), t.Key.Value); err != nil {
			return err
		}
	}
	return nil
}
