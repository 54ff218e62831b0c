// Package config is belay's YAML configuration: the listen address, the
// store, model aliases and their deployments, retry and breaker policies,
// run limits, tenants and their virtual keys and budgets, tools that need
// approval, redaction, capture, pricing overrides, OTLP export, the admin
// key, the built-in simulator and the gateway's timeouts.
//
// Load reads a file strictly, resolves "env:NAME" secrets, applies
// defaults and validates everything once. A mistake is an *Error that
// names the file, the line and the key path
// (models[0].deployments[1].timeout), what was found and what is wanted
// (a duration such as 30s, a list of models; for an unknown key, the keys
// allowed there). Default returns the configuration used when there is no
// file: the built-in simulator as upstream and the embedded SQLite store,
// so `belay serve` answers on a fresh machine.
//
// A *Config is plain data; after Load it is not modified by belay and may be
// read from several goroutines.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Defaults applied to zero fields by Load and Default.
const (
	DefaultListen       = "127.0.0.1:4000"
	DefaultStore        = "sqlite://belay.db"
	DefaultMaxBodyBytes = 32 << 20 // 32 MiB
	// DefaultMaxUpstreamBodyBytes bounds what is read of one upstream
	// response (or one stream event).
	DefaultMaxUpstreamBodyBytes = 32 << 20 // 32 MiB
	DefaultCapture              = CaptureRedacted
)

// Config is the whole configuration. The zero value of each field means its
// default (see the field docs); Load and Default fill them in.
type Config struct {
	// Listen is the gateway's address, host:port. Default 127.0.0.1:4000.
	Listen string `yaml:"listen"`
	// Store is the store URL: sqlite://PATH (default sqlite://belay.db, in
	// the working directory), postgres://..., or memory:// (tests).
	Store string `yaml:"store"`
	// AdminKey guards /admin/... (Authorization: Bearer). Empty disables
	// the admin API.
	AdminKey Secret `yaml:"admin_key"`
	// Models are the model aliases clients name in "model". Empty means
	// the built-in simulator's models of Default.
	Models []Model `yaml:"models"`
	// Retry is the retry policy applied on each deployment.
	Retry Retry `yaml:"retry"`
	// Breaker configures one circuit breaker per deployment.
	Breaker Breaker `yaml:"breaker"`
	// Limits bound every run; a tenant's limits replace them field by
	// field; a request may only lower them.
	Limits Limits `yaml:"limits"`
	// Tenants and their virtual keys. When empty, the gateway is open:
	// every request belongs to the tenant "default" whatever key it sends.
	Tenants []Tenant `yaml:"tenants"`
	// Tools lists tool names (glob patterns) that need approval.
	Tools Tools `yaml:"tools"`
	// Redact names the redaction rules applied to captured content
	// (email, card_number, api_key, ...).
	Redact []string `yaml:"redact"`
	// Capture is what message content traces keep: off, redacted
	// (default) or full.
	Capture Capture `yaml:"capture"`
	// Pricing overrides the built-in price table, by model name.
	Pricing map[string]Price `yaml:"pricing"`
	// OTLP exports traces over OTLP/HTTP when Endpoint is set.
	OTLP OTLP `yaml:"otlp"`
	// Sim configures the built-in simulator used by deployments whose
	// base_url is "sim://".
	Sim Sim `yaml:"sim"`
	// Timeouts of the gateway's client and upstream connections.
	Timeouts Timeouts `yaml:"timeouts"`
	// MaxBodyBytes is the largest request body accepted; a larger one is
	// refused with 413. Default 32 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxUpstreamBodyBytes is the most the gateway reads of one upstream
	// response body (non-streamed), and of one stream event; a larger
	// response fails the attempt as a server error of the deployment
	// (transient: retried, then the chain falls back). Default 32 MiB.
	MaxUpstreamBodyBytes int64 `yaml:"max_upstream_body_bytes"`

	// Path is the file the configuration was read from; empty for Default.
	Path string `yaml:"-"`
	// LimitsDefaulted: the file had no limits section, so Limits are
	// DefaultLimits() (set by Load and Parse).
	LimitsDefaulted bool `yaml:"-"`
	// ModelsDefaulted is set when the config named no models and got the
	// default ones (the built-in simulator's): belay serve warns when a
	// config file has none. Not read from YAML.
	ModelsDefaulted bool `yaml:"-"`
}

// Provider names the wire dialect of a deployment.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// SimBaseURL is the base_url that sends a deployment to the built-in
// simulator.
const SimBaseURL = "sim://"

// Default base URLs, as the official SDKs use them: OpenAI's includes /v1,
// Anthropic's does not (its paths start with /v1).
const (
	OpenAIBaseURL    = "https://api.openai.com/v1"
	AnthropicBaseURL = "https://api.anthropic.com"
)

// Model is one model alias and its fallback chain.
type Model struct {
	Alias       string       `yaml:"alias"`
	Deployments []Deployment `yaml:"deployments"`
}

// Deployment is one provider + model + credentials + base URL.
type Deployment struct {
	// Name identifies the deployment in metrics, traces and headers.
	// Default "provider/model#i", i its index in the alias's chain.
	Name string `yaml:"name"`
	// Provider is the wire dialect: openai or anthropic.
	Provider string `yaml:"provider"`
	// Model is the provider's model name sent upstream.
	Model string `yaml:"model"`
	// BaseURL defaults to the provider's public API; "sim://" is the
	// built-in simulator.
	BaseURL string `yaml:"base_url"`
	// APIKey is the provider credential, usually env:NAME. Required for
	// the providers' own APIs (api.openai.com, api.anthropic.com); a
	// self-hosted base_url (vLLM, Ollama) may go without, and its calls
	// then carry no Authorization or x-api-key header.
	APIKey Secret `yaml:"api_key"`
	// SimProfile is the fault profile of the built-in simulator for this
	// deployment (base_url sim:// only): none, storm, flaky, down, … (see
	// sim.ProfileNames). Default: the profile the deployment is named
	// after (name: down), else sim.profile.
	SimProfile string `yaml:"sim_profile"`
	// Timeouts replace the gateway's attempt timeouts for this
	// deployment, each one set (a reasoning model that thinks for minutes
	// before its first output, beside fast ones); zero keeps the
	// gateway's.
	Timeouts DeploymentTimeouts `yaml:"timeouts"`
}

// DeploymentTimeouts are the attempt timeouts one deployment may set for
// itself (see Timeouts for each).
type DeploymentTimeouts struct {
	FirstByte  Duration `yaml:"first_byte"`
	FirstToken Duration `yaml:"first_token"`
	Idle       Duration `yaml:"idle"`
}

// Of returns t with the timeouts d sets in place of t's.
func (d DeploymentTimeouts) Of(t Timeouts) Timeouts {
	if d.FirstByte > 0 {
		t.FirstByte = d.FirstByte
	}
	if d.FirstToken > 0 {
		t.FirstToken = d.FirstToken
	}
	if d.Idle > 0 {
		t.Idle = d.Idle
	}
	return t
}

// IsSim reports whether the deployment goes to the built-in simulator.
func (d Deployment) IsSim() bool { return d.BaseURL == SimBaseURL }

// Retry is the retry policy (see package retry for the rules).
type Retry struct {
	MaxAttempts   int      `yaml:"max_attempts"`    // per deployment, first included; default 4
	Base          Duration `yaml:"base"`            // default 500ms
	Cap           Duration `yaml:"cap"`             // default 8s
	MaxRetryAfter Duration `yaml:"max_retry_after"` // default 20s
	Jitter        string   `yaml:"jitter"`          // full (default), equal, none
	BudgetRatio   float64  `yaml:"budget_ratio"`    // retries in flight / requests in flight; default 0.2
	// ChainMaxAttempts caps the attempts of one call across its whole
	// fallback chain; default max_attempts plus one for each further
	// deployment (package route).
	ChainMaxAttempts int `yaml:"chain_max_attempts"`
}

// Breaker configures the per-deployment circuit breakers. Zero fields mean
// the breaker package's defaults.
type Breaker struct {
	ConsecutiveFailures int      `yaml:"consecutive_failures"`
	FailureRate         float64  `yaml:"failure_rate"`
	MinRequests         int      `yaml:"min_requests"`
	Window              Duration `yaml:"window"`
	OpenFor             Duration `yaml:"open_for"`
}

// Limits bound a run. Zero means unlimited for each field.
type Limits struct {
	MaxTurns   int      `yaml:"max_turns"`
	Deadline   Duration `yaml:"deadline"`
	MaxCostUSD USD      `yaml:"max_cost_usd"`
	MaxTokens  int64    `yaml:"max_tokens"`
}

// Or returns l with each zero field taken from base.
func (l Limits) Or(base Limits) Limits {
	if l.MaxTurns == 0 {
		l.MaxTurns = base.MaxTurns
	}
	if l.Deadline == 0 {
		l.Deadline = base.Deadline
	}
	if l.MaxCostUSD == 0 {
		l.MaxCostUSD = base.MaxCostUSD
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = base.MaxTokens
	}
	return l
}

// Tenant is one customer of the gateway with its virtual key.
type Tenant struct {
	Name string `yaml:"name"`
	// Key is the virtual key clients send (Authorization: Bearer or
	// x-api-key); a literal or env:NAME. Required, unique.
	Key    Secret       `yaml:"key"`
	Budget TenantBudget `yaml:"budget"`
	// Limits replace the global limits field by field for this tenant's runs.
	Limits Limits `yaml:"limits"`
}

// TenantBudget is a tenant's spending limit per period.
type TenantBudget struct {
	// USD is the limit per period; zero means unlimited (spend is still
	// recorded).
	USD USD `yaml:"usd"`
	// Period is day or month (default), UTC.
	Period string `yaml:"period"`
	// AlertAt are fractions of USD in (0, 1] at which an alert fires once
	// per period.
	AlertAt []float64 `yaml:"alert_at"`
}

// Tools configures tool calls.
type Tools struct {
	// Irreversible are tool-name glob patterns (path.Match syntax) whose
	// calls wait for approval; default deny.
	Irreversible []string `yaml:"irreversible"`
	// ReadOnly are tool-name glob patterns of tools without side effects,
	// whose calls are not deduplicated (run.ToolCall.ReadOnly); a tool
	// that also matches Irreversible is not read-only.
	ReadOnly []string `yaml:"read_only"`
}

// Capture is how much message content traces keep.
type Capture string

const (
	CaptureOff      Capture = "off"
	CaptureRedacted Capture = "redacted"
	CaptureFull     Capture = "full"
)

// Price overrides a model's price, in USD per million tokens (the
// per-call fees excepted).
type Price struct {
	Input       USD `yaml:"input"`
	Output      USD `yaml:"output"`
	CachedInput USD `yaml:"cached_input"`
	CacheWrite  USD `yaml:"cache_write"`
	// CacheWrite1h is the price of a write into a 1-hour cache (Anthropic:
	// 2× input); 0 prices it as CacheWrite. For a Claude model (a name
	// starting with "claude"), cache prices left at 0 follow Anthropic's
	// multipliers of Input: read 0.1×, write 1.25×, 1-hour write 2×.
	CacheWrite1h USD `yaml:"cache_write_1h"`
	// WebSearchCall and FileSearchCall are per call, not per million
	// tokens: the fee of one call of the provider's built-in web search
	// (OpenAI's web_search tool, Anthropic's web_search server tool) or
	// file search (OpenAI's file_search). 0 takes the provider's list fee
	// for an OpenAI or Anthropic deployment: $0.01 a web search, $0.0025
	// a file search (see budget.Price).
	WebSearchCall  USD `yaml:"web_search_call"`
	FileSearchCall USD `yaml:"file_search_call"`
	// Priority is the price of a call served with OpenAI's priority
	// processing (service_tier "priority" or "fast"), per million tokens.
	// Without it, an override has no priority tier: a request asking for
	// priority processing of the model is refused, and an answer served
	// at it (a project whose default tier is priority) is charged the
	// price above, marked estimated.
	Priority *TierPrice `yaml:"priority"`
}

// TierPrice is a model's price at one processing tier, in USD per
// million tokens; a zero CachedInput bills cached tokens as input.
type TierPrice struct {
	Input       USD `yaml:"input"`
	CachedInput USD `yaml:"cached_input"`
	Output      USD `yaml:"output"`
}

// OTLP configures trace export.
type OTLP struct {
	// Endpoint is the OTLP/HTTP base URL (http://localhost:4318); empty
	// disables export.
	Endpoint string `yaml:"endpoint"`
}

// Sim configures the built-in simulator.
type Sim struct {
	// Profile is a fault profile name of package sim ("" or "none" for a
	// healthy upstream).
	Profile string `yaml:"profile"`
	// Seed makes the simulator's faults reproducible; default 1.
	Seed int64 `yaml:"seed"`
	// Script is a file of scripted replies (package sim's YAML script
	// format); empty means the simulator's default replies. A relative
	// path is relative to the working directory.
	Script string `yaml:"script"`
}

// Timeouts of the gateway. Zero means the default given per field.
type Timeouts struct {
	// Connect is the upstream dial + TLS handshake limit. Default 10s.
	Connect Duration `yaml:"connect"`
	// FirstByte is the wait from sending an upstream request to its
	// response headers (for a non-streaming call, the whole generation).
	// Default 120s.
	FirstByte Duration `yaml:"first_byte"`
	// FirstToken is the wait, in a stream, from the response headers to
	// the first model output. Default 60s.
	FirstToken Duration `yaml:"first_token"`
	// Idle is the longest gap between two stream events. Default 60s.
	Idle Duration `yaml:"idle"`
	// HeaderRead is how long a client may take to send its request
	// headers (http.Server.ReadHeaderTimeout). Default 10s.
	HeaderRead Duration `yaml:"header_read"`
	// BodyRead is how long a client may take to send its request body,
	// counted from the end of its headers; a client that trickles its body
	// is cut off (the connection is closed). It does not bound the
	// response: a long stream is not affected. Default 60s.
	BodyRead Duration `yaml:"body_read"`
	// ClientIdle is how long an idle keep-alive client connection stays
	// open (http.Server.IdleTimeout). Default 120s.
	ClientIdle Duration `yaml:"client_idle"`
	// ClientWrite is how long a client may take to accept one write of a
	// stream (an event) or of a large answer: a client that stops reading
	// for longer is cut off, and its call ends as if it had disconnected
	// (the upstream call canceled, charged for what was produced,
	// recorded). It does not bound a stream's length. Default 60s.
	ClientWrite Duration `yaml:"client_write"`
	// Shutdown is how long a stopping gateway (SIGTERM, Ctrl-C) lets the
	// calls in flight finish; the calls still open then are canceled:
	// each ends with an error in its client's dialect (an error event in
	// a stream), is charged for what it used and recorded. Default 10s.
	Shutdown Duration `yaml:"shutdown"`
}

// Load reads the file at path, resolving env: secrets from the process
// environment. See Parse.
func Load(path string) (*Config, error) { return LoadWith(path, os.LookupEnv) }

// LoadWith is Load resolving env: secrets with lookup (see Parse): a
// caller that reads a config only for some of its parts can stand in for
// the secrets it does not use.
func LoadWith(path string, lookup func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, path, lookup)
	if err != nil {
		return nil, err
	}
	// A simulator script is named relative to the config file.
	if c.Sim.Script != "" && !filepath.IsAbs(c.Sim.Script) {
		c.Sim.Script = filepath.Join(filepath.Dir(path), c.Sim.Script)
	}
	return c, nil
}

// Parse decodes YAML data (name is the file name used in errors), resolves
// env: secrets with lookup, applies defaults and validates; an empty
// document is the default configuration. Every mistake is an *Error naming
// the file, the line and the key path, what was found and what is wanted:
//
//	config belay.yaml: line 3: listn: unknown key (did you mean listen?); want one of listen, store, …
//	config belay.yaml: line 2: models: found "smart"; want a list of models, each a mapping with keys alias, deployments
//	config belay.yaml: line 7: limits.deadline: "soon" is not a duration; want one such as 500ms, 30s or 5m, or a number of seconds
func Parse(data []byte, name string, lookup func(string) (string, bool)) (*Config, error) {
	c, err := parse(data, lookup)
	if err != nil {
		if e, ok := errors.AsType[*Error](err); ok {
			e.File = name
			return nil, err
		}
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	c.Path = name
	return c, nil
}

func parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	root, err := readDocument(data)
	if err != nil {
		return nil, err
	}
	var c Config
	chk := checker{lines: map[string]int{}}
	if root != nil {
		if err := chk.check(root, reflect.TypeFor[Config](), ""); err != nil {
			return nil, err
		}
		if err := root.Decode(&c); err != nil {
			return nil, err // not reached: check refuses what Decode would
		}
	}
	if _, ok := chk.lines["limits"]; !ok {
		// No limits section: the defaults, not unbounded runs (a config
		// written to set models or a port kept no limit at all before; a
		// newcomer found it). limits: {} sets none.
		c.Limits, c.LimitsDefaulted = DefaultLimits(), true
	}
	if err := c.resolve(lookup, chk.line); err != nil {
		return nil, chk.locate(err)
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, chk.locate(err)
	}
	return &c, nil
}

// locate gives an *Error found after decoding the line of its path (or of
// the nearest ancestor the file has: the item of a missing key).
func (c *checker) locate(err error) error {
	if e, ok := errors.AsType[*Error](err); ok && e.Line == 0 {
		e.Line = c.line(e.Path)
	}
	return err
}

// resolve fills every secret's value. A reference that does not resolve
// is an *Error at the first such field in the file (line gives a path's
// line); when several do not, its message names the others too, so one start shows every variable to set (a
// newcomer restarted once per missing variable).
func (c *Config) resolve(lookup func(string) (string, bool), line func(path string) int) error {
	var errs []*Error
	try := func(s *Secret, field string) {
		if e := s.resolve(field, lookup); e != nil {
			if e.Line == 0 {
				e.Line = line(e.Path)
			}
			errs = append(errs, e)
		}
	}
	try(&c.AdminKey, "admin_key")
	for i := range c.Models {
		for j := range c.Models[i].Deployments {
			try(&c.Models[i].Deployments[j].APIKey, fmt.Sprintf("models[%d].deployments[%d].api_key", i, j))
		}
	}
	for i := range c.Tenants {
		try(&c.Tenants[i].Key, fmt.Sprintf("tenants[%d].key", i))
	}
	if len(errs) == 0 {
		return nil
	}
	// In the file's order: the error names the first line to fix.
	slices.SortStableFunc(errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	first := errs[0]
	if len(errs) > 1 {
		others := make([]string, 0, len(errs)-1)
		for _, e := range errs[1:] {
			others = append(others, e.Path+": "+e.Msg)
		}
		first.Msg += " (also " + strings.Join(others, "; ") + ")"
	}
	return first
}
