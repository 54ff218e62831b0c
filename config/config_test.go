package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/retry"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const full = `
listen: 0.0.0.0:8080
store: postgres://db/belay
admin_key: env:ADMIN
models:
  - alias: smart
    deployments:
      - {provider: openai, model: gpt-4o, api_key: env:OPENAI_API_KEY}
      - {name: azure, provider: openai, model: gpt-4o, base_url: https://example-azure/v1, api_key: lit-key}
      - {provider: anthropic, model: claude-sonnet-4-5, base_url: "sim://"}
retry:   {max_attempts: 3, base: 200ms, cap: 4s, max_retry_after: 10, budget_ratio: 0.5, jitter: equal}
breaker: {consecutive_failures: 5, failure_rate: 0.5, min_requests: 20, window: 60s, open_for: 30s}
limits:  {max_turns: 20, deadline: 5m, max_cost_usd: 1.10, max_tokens: 100000}
tenants:
  - {name: acme, key: env:ACME_KEY, budget: {usd: 100, period: day, alert_at: [0.5, 0.8]}, limits: {max_turns: 5}}
  - {name: beta, key: beta-key}
tools:   {irreversible: ["delete_*", issue_refund]}
redact:  [email, card_number]
capture: full
pricing: {gpt-4o: {input: 2.50, output: "$10", cached_input: 1.25}}
otlp: {endpoint: "http://localhost:4318"}
sim: {profile: storm, seed: 7}
timeouts: {connect: 5s, first_token: 30s, idle: 15s, header_read: 2s}
max_body_bytes: 1048576
`

func TestParseFull(t *testing.T) {
	c, err := Parse([]byte(full), "belay.yaml", env(map[string]string{"ADMIN": "adm", "OPENAI_API_KEY": "sk-1", "ACME_KEY": "acme-k"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "0.0.0.0:8080" || c.Store != "postgres://db/belay" || c.AdminKey.Value != "adm" {
		t.Errorf("top level: %+v", c)
	}
	d := c.Models[0].Deployments
	if d[0].Name != "openai/gpt-4o#0" || d[0].BaseURL != OpenAIBaseURL || d[0].APIKey.Value != "sk-1" {
		t.Errorf("deployment 0: %+v", d[0])
	}
	if d[1].Name != "azure" || d[1].APIKey.Value != "lit-key" || d[1].APIKey.String() != "[redacted]" {
		t.Errorf("deployment 1: %+v", d[1])
	}
	if !d[2].IsSim() || d[2].Name != "anthropic/claude-sonnet-4-5#2" {
		t.Errorf("deployment 2: %+v", d[2])
	}
	p, err := c.Retry.Policy()
	if err != nil || p.MaxAttempts != 3 || p.Base != 200*time.Millisecond || p.MaxRetryAfter != 10*time.Second || p.Jitter != retry.EqualJitter {
		t.Errorf("retry policy %+v, %v", p, err)
	}
	if c.Limits.MaxCostUSD.V() != budget.Micros(1_100_000) || c.Limits.Deadline.D() != 5*time.Minute {
		t.Errorf("limits %+v", c.Limits)
	}
	if c.Tenants[0].Key.Value != "acme-k" || c.Tenants[0].Budget.USD.V() != budget.Dollars(100) || c.Tenants[1].Budget.Period != PeriodMonth {
		t.Errorf("tenants %+v", c.Tenants)
	}
	if l := c.TenantLimits("acme"); l.MaxTurns != 5 || l.MaxTokens != 100000 {
		t.Errorf("acme limits %+v", l)
	}
	if c.Pricing["gpt-4o"].Output.V() != budget.Dollars(10) {
		t.Errorf("pricing %+v", c.Pricing)
	}
	if c.Timeouts.Idle.D() != 15*time.Second || c.Timeouts.FirstByte.D() != DefaultFirstByte || c.MaxBodyBytes != 1<<20 {
		t.Errorf("timeouts %+v, body %d", c.Timeouts, c.MaxBodyBytes)
	}
	if c.Sim.Profile != "storm" || c.Sim.Seed != 7 || c.Capture != CaptureFull {
		t.Errorf("sim %+v capture %q", c.Sim, c.Capture)
	}
}

func TestParseErrors(t *testing.T) {
	e := env(map[string]string{"K": "v"})
	cases := []struct{ name, yaml, want string }{
		{"unknown key", "listen: 127.0.0.1:1\nlistn: x\n", "belay.yaml: yaml: unmarshal errors:\n  line 2: field listn not found"},
		{"unknown nested key", "models:\n  - alias: a\n    deploymentz: []\n", "line 3: field deploymentz not found"},
		{"missing env", "models:\n  - alias: a\n    deployments: [{provider: openai, model: m, api_key: env:NOPE_KEY}]\n", "models[0].deployments[0].api_key: environment variable NOPE_KEY is not set"},
		{"bad provider", "models:\n  - alias: a\n    deployments: [{provider: azure, model: m, api_key: x}]\n", `models[0].deployments[0].provider: "azure" is not a provider; want openai or anthropic`},
		{"missing api key", "models:\n  - alias: a\n    deployments: [{provider: openai, model: m}]\n", "models[0].deployments[0].api_key: is required"},
		{"dup alias", "models:\n  - {alias: a, deployments: [{provider: openai, model: m, base_url: 'sim://'}]}\n  - {alias: a, deployments: [{provider: openai, model: m, base_url: 'sim://'}]}\n", `models[1].alias: "a" is defined twice`},
		{"capture", "capture: some\n", `capture: "some" is not allowed; want off, redacted or full`},
		{"jitter", "retry: {jitter: wild}\n", `retry.jitter: "wild" is not allowed`},
		{"retry cap", "retry: {base: 2s, cap: 1s}\n", "retry.cap (1s) is below base (2s)"},
		{"period", "tenants: [{name: a, key: k, budget: {period: week}}]\n", `tenants[0].budget.period: "week" is not allowed; want day or month`},
		{"alert", "tenants: [{name: a, key: k, budget: {alert_at: [1.5]}}]\n", "tenants[0].budget.alert_at[0]: 1.5 is outside (0, 1]"},
		{"tenant key", "tenants: [{name: a}]\n", "tenants[0].key: is required"},
		{"same key", "tenants: [{name: a, key: env:K}, {name: b, key: v}]\n", `tenants[1].key: tenants "a" and "b" have the same key`},
		{"duration", "limits: {deadline: soon}\n", `line 1: "soon" is not a duration`},
		{"money", "limits: {max_cost_usd: 1.0000000000001}\n", "more than 12 decimals"},
		{"store", "store: mysql://x\n", `store: scheme "mysql" is not supported`},
		{"listen", "listen: nowhere\n", `listen: "nowhere" is not host:port`},
		{"sim profile", "sim: {profile: tornado}\n", `sim.profile: "tornado" is not a profile; want one of`},
		{"two docs", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "more than one YAML document"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "belay.yaml", e)
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "config belay.yaml: ") {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultListen || c.Store != "sqlite://belay.db" || len(c.Tenants) != 0 || c.MaxBodyBytes != 32<<20 {
		t.Errorf("default %+v", c)
	}
	want := map[string][]string{
		"gpt-4o-mini":       {"openai/gpt-4o-mini#0", "openai/gpt-4o-mini#1"},
		"claude-sonnet-4-5": {"anthropic/claude-sonnet-4-5#0", "anthropic/claude-sonnet-4-5#1"},
	}
	for _, m := range c.Models {
		w := want[m.Alias]
		if len(m.Deployments) != len(w) {
			t.Fatalf("%s: %d deployments", m.Alias, len(m.Deployments))
		}
		for i, d := range m.Deployments {
			if d.Name != w[i] || !d.IsSim() {
				t.Errorf("%s[%d] = %+v", m.Alias, i, d)
			}
		}
	}
	if c.Limits.MaxTurns != 20 || c.Limits.MaxCostUSD.V() != budget.Dollars(1) {
		t.Errorf("limits %+v", c.Limits)
	}
}

func TestLoadEmptyFileIsDefault(t *testing.T) {
	p := filepath.Join(t.TempDir(), "belay.yaml")
	if err := os.WriteFile(p, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p || len(c.Models) != 2 || c.Models[0].Deployments[0].Name != "openai/gpt-4o-mini#0" {
		t.Errorf("config %+v", c)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"90": 90 * time.Second, "1.5": 1500 * time.Millisecond, "2m": 2 * time.Minute, "250ms": 250 * time.Millisecond} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "-2s", "x", ""} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q): no error", in)
		}
	}
}

// A config without a limits section gets the default run limits (20
// turns, 5 minutes, $1.00), as with no config at all; limits: {} sets none,
// and a section that names some fields sets only those.
func TestLimitsSectionOrDefaults(t *testing.T) {
	for y, want := range map[string]Limits{
		"admin_key: k\n":           DefaultLimits(),
		"limits: {}\n":             {},
		"limits:\n":                {},
		"limits: {max_turns: 3}\n": {MaxTurns: 3},
	} {
		c, err := Parse([]byte(y), "t.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%q: %v", y, err)
		}
		if c.Limits != want {
			t.Errorf("%q: limits %+v, want %+v", y, c.Limits, want)
		}
	}
	dollar, err := Parse([]byte("limits: {max_cost_usd: 1.00}\n"), "t.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if l := DefaultLimits(); l.MaxTurns != 20 || l.Deadline.D() != 5*time.Minute || l.MaxCostUSD != dollar.Limits.MaxCostUSD {
		t.Errorf("DefaultLimits = %+v; want 20 turns, 5m, $1", l)
	}
}
