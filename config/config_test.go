package config

import (
	"errors"
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
      - {provider: anthropic, model: claude-sonnet-5-5, base_url: "sim://"}
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
	if !d[2].IsSim() || d[2].Name != "anthropic/claude-sonnet-5-5#2" {
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

// TestParseErrors: every mistake in a file names the file, the line, the
// key path, what was found and what is wanted, never a Go type (newcomer
// finding: "cannot unmarshal !!str `smart` into []config.Model", "field
// timeout not found in type config.Deployment").
func TestParseErrors(t *testing.T) {
	e := env(map[string]string{"K": "v", "NL_KEY": "sk-abc\n", "CTL_KEY": "sk\x01x", "EMPTY_KEY": ""})
	top := "listen, store, admin_key, models, retry, breaker, limits, tenants, tools, redact, capture, pricing, otlp, sim, timeouts, max_body_bytes, max_upstream_body_bytes"
	sim := "{provider: openai, model: m, base_url: 'sim://'}"
	cases := []struct{ name, yaml, want string }{
		// Unknown keys: the allowed keys at that level, and the likely one.
		{"unknown key", "listen: 127.0.0.1:1\nlistn: x\n",
			"line 2: listn: unknown key (did you mean listen?); want one of " + top},
		{"unknown key, case", "Store: memory://\n",
			"line 1: Store: unknown key (did you mean store?); want one of " + top},
		{"unknown nested key", "models:\n  - alias: a\n    deploymentz: []\n",
			"line 3: models[0].deploymentz: unknown key (did you mean deployments?); want one of alias, deployments"},
		{"unknown deployment key", "models:\n  - alias: a\n    deployments:\n      - " + sim + "\n      - {provider: openai, model: m, timeout: 30s}\n",
			"line 5: models[0].deployments[1].timeout: unknown key (did you mean timeouts?); want one of name, provider, model, base_url, api_key, sim_profile, timeouts"},
		{"sim_profile off the simulator", "models:\n  - alias: a\n    deployments:\n      - {provider: openai, model: m, base_url: 'http://127.0.0.1:9/v1', sim_profile: down}\n",
			`line 4: models[0].deployments[0].sim_profile: applies to the built-in simulator only (base_url: sim://); this deployment's base_url is "http://127.0.0.1:9/v1"`},
		{"unknown sim_profile", "models:\n  - alias: a\n    deployments:\n      - {provider: openai, model: m, base_url: 'sim://', sim_profile: dwon}\n",
			`line 4: models[0].deployments[0].sim_profile: "dwon" is not a profile (did you mean down?); want one of bad_key, down, flaky, hang, no_quota, none, rate_limited, slow, storm, unreachable`},
		{"unknown deployment timeout", "models:\n  - alias: a\n    deployments:\n      - {provider: openai, model: m, base_url: 'sim://', timeouts: {connect: 1s}}\n",
			"line 4: models[0].deployments[0].timeouts.connect: unknown key; want one of first_byte, first_token, idle"},
		{"negative deployment timeout", "models:\n  - alias: a\n    deployments:\n      - {provider: openai, model: m, base_url: 'sim://', timeouts: {idle: -1s}}\n",
			`line 4: models[0].deployments[0].timeouts.idle: "-1s" is negative; want a duration of 0 or more`},
		{"tenant name with a tilde", "tenants:\n  - {name: a~b, key: k}\n", `line 2: tenants[0].name: "a~b": want 1-64 characters of letters, digits and . _ : -`},
		{"tenant name with a slash", "tenants:\n  - {name: a/b, key: k}\n", `line 2: tenants[0].name: "a/b": want 1-64 characters of letters, digits and . _ : -`},
		{"one name, two timeouts", "models:\n  - alias: a\n    deployments:\n      - {name: d, provider: openai, model: m, base_url: 'sim://', timeouts: {first_byte: 5m}}\n  - alias: b\n    deployments:\n      - {name: d, provider: openai, model: m, base_url: 'sim://'}\n",
			`line 7: models[1].deployments[0].name: "d" names two different deployments (they differ in timeouts)`},
		{"one name, two sim profiles", "models:\n  - alias: a\n    deployments:\n      - {name: d, provider: openai, model: m, base_url: 'sim://', sim_profile: down}\n  - alias: b\n    deployments:\n      - {name: d, provider: openai, model: m, base_url: 'sim://'}\n",
			`line 7: models[1].deployments[0].name: "d" names two different deployments (they differ in sim_profile: "down" and "")`},
		{"two unnamed deployments", "models:\n  - alias: a\n    deployments:\n      - {provider: openai, model: m, base_url: 'sim://', sim_profile: down}\n  - alias: b\n    deployments:\n      - {provider: openai, model: m, base_url: 'sim://'}\n",
			`line 7: models[1].deployments[0].name: "openai/m#0" names two different deployments (they differ in sim_profile: "down" and ""); belay gave them this name, as they have none: give each deployment a name of its own`},
		{"unknown sim_profile, near one", "models:\n  - alias: a\n    deployments:\n      - {provider: openai, model: m, base_url: 'sim://', sim_profile: stromy}\n",
			`line 4: models[0].deployments[0].sim_profile: "stromy" is not a profile (did you mean storm?); want one of bad_key, down, flaky, hang, no_quota, none, rate_limited, slow, storm, unreachable`},
		{"one deployment twice in a chain", "models:\n  - alias: a\n    deployments:\n      - {name: d, provider: openai, model: m, base_url: 'sim://'}\n      - {name: d, provider: openai, model: m, base_url: 'sim://'}\n",
			`line 5: models[0].deployments[1].name: "d" is listed twice in alias "a" (also deployments[0])`},
		{"unknown retry key", "retry:\n  max_atempts: 3\n",
			"line 2: retry.max_atempts: unknown key (did you mean max_attempts?); want one of max_attempts, base, cap, max_retry_after, jitter, budget_ratio, chain_max_attempts"},
		{"unknown key far from all", "timeouts: {upstream: 3s}\n",
			"line 1: timeouts.upstream: unknown key; want one of connect, first_byte, first_token, idle, header_read, body_read, client_idle, client_write, shutdown"},
		{"key twice", "retry:\n  cap: 4s\n  cap: 8s\n", "line 3: retry.cap: given twice (first on line 2)"},
		{"price twice", "pricing:\n  gpt-4o: {input: 1}\n  gpt-4o: {input: 2}\n", "line 3: pricing.gpt-4o: given twice (first on line 2)"},

		// Wrong shapes and types, in the file's words.
		{"models a string", "models: smart\n",
			`line 1: models: found "smart"; want a list of models, each a mapping with keys alias, deployments`},
		{"models a mapping", "models:\n  smart:\n    deployments: []\n",
			"line 2: models: found a mapping; want a list of models, each a mapping with keys alias, deployments"},
		{"tenant a string", "tenants:\n  - acme\n", `line 2: tenants[0]: found "acme"; want a mapping with keys name, key, budget, limits`},
		{"retry a number", "retry: 3\n",
			"line 1: retry: found 3; want a mapping with keys max_attempts, base, cap, max_retry_after, jitter, budget_ratio, chain_max_attempts"},
		{"whole number", "retry: {max_attempts: three}\n", `line 1: retry.max_attempts: found "three"; want a whole number`},
		{"fraction for a whole number", "limits: {max_turns: 1.5}\n", "line 1: limits.max_turns: found 1.5; want a whole number"},
		{"too large", "limits: {max_turns: 99999999999999999999}\n", "line 1: limits.max_turns: 99999999999999999999 is out of range; want a whole number"},
		{"number", "breaker: {failure_rate: high}\n", `line 1: breaker.failure_rate: found "high"; want a number`},
		{"bytes", "max_body_bytes: 1MB\n", `line 1: max_body_bytes: found "1MB"; want a whole number`},
		{"string", "listen: [a, b]\n", "line 1: listen: found a list; want a string"},
		{"list of strings", "redact: email\n", `line 1: redact: found "email"; want a list of strings`},
		{"list of numbers", "tenants:\n  - name: a\n    key: k\n    budget: {alert_at: high}\n",
			`line 4: tenants[0].budget.alert_at: found "high"; want a list of numbers`},
		{"pricing a list", "pricing: [gpt-4o]\n",
			"line 1: pricing: found a list; want a mapping from names to prices, each a mapping with keys input, output, cached_input, cache_write, cache_write_1h, web_search_call, file_search_call, priority"},
		{"price a number", "pricing: {gpt-4o: 3}\n", "line 1: pricing.gpt-4o: found 3; want a mapping with keys input, output, cached_input, cache_write, cache_write_1h, web_search_call, file_search_call, priority"},
		{"priority a number", "pricing: {o3: {priority: 3}}\n", "line 1: pricing.o3.priority: found 3; want a mapping with keys input, cached_input, output"},
		{"priority unknown key", "pricing: {o3: {priority: {inptu: 3}}}\n", "line 1: pricing.o3.priority.inptu: unknown key (did you mean input?); want one of input, cached_input, output"},
		{"secret a list", "models:\n  - alias: a\n    deployments: [{provider: openai, model: m, api_key: [x]}]\n",
			"line 3: models[0].deployments[0].api_key: found a list; want a string (a literal or env:NAME)"},
		{"document a list", "- listen: x\n", "line 1: found a list; want a mapping with keys " + top},

		// Durations and dollar amounts.
		{"duration", "limits: {deadline: soon}\n", `line 1: limits.deadline: "soon" is not a duration; want one such as 500ms, 30s or 5m, or a number of seconds`},
		{"duration a mapping", "timeouts:\n  idle: {seconds: 5}\n", "line 2: timeouts.idle: found a mapping; want a duration such as 500ms, 30s or 5m, or a number of seconds"},
		{"negative duration", "retry: {cap: -1s}\n", `line 1: retry.cap: "-1s" is negative; want a duration of 0 or more`},
		{"money", "limits: {max_cost_usd: 1.0000000000001}\n", `line 1: limits.max_cost_usd: "1.0000000000001" is finer than a picodollar (more than 12 decimals); want a dollar amount such as 1.50`},
		{"not money", "pricing:\n  gpt-4.1: {input: cheap}\n", `line 2: pricing["gpt-4.1"].input: "cheap" is not a dollar amount; want one such as 1.50`},
		{"negative money", "tenants: [{name: a, key: k, budget: {usd: -5}}]\n", "line 1: tenants[0].budget.usd: -5 is negative; want a dollar amount of 0 or more"},
		// Numbers are plain decimals, as in the limit headers (adversary
		// finding: 0x10 and 1_000 were dollars, 1_000 and 1e3 seconds).
		{"money in hex", "limits: {max_cost_usd: 0x10}\n", `line 1: limits.max_cost_usd: "0x10" is not a dollar amount; want one such as 1.50`},
		{"money with separators", "limits: {max_cost_usd: 1_000}\n", `line 1: limits.max_cost_usd: "1_000" is not a dollar amount; want one such as 1.50`},
		{"seconds with separators", "limits: {deadline: 1_000}\n", `line 1: limits.deadline: "1_000" is not a duration; want one such as 500ms, 30s or 5m, or a number of seconds`},
		{"seconds with an exponent", "limits: {deadline: 1e3}\n", `line 1: limits.deadline: "1e3" is not a duration; want one such as 500ms, 30s or 5m, or a number of seconds`},

		// Bad values (Validate), now with their line.
		{"missing env", "models:\n  - alias: a\n    deployments: [{provider: openai, model: m, api_key: env:NOPE_KEY}]\n",
			"line 3: models[0].deployments[0].api_key: environment variable NOPE_KEY is not set"},
		{"missing envs", "admin_key: env:NOPE_ADMIN\nmodels:\n  - alias: a\n    deployments: [{provider: openai, model: m, api_key: env:NOPE_KEY}]\ntenants: [{name: t, key: env:NOPE_T}]\n",
			"line 1: admin_key: environment variable NOPE_ADMIN is not set (also models[0].deployments[0].api_key: environment variable NOPE_KEY is not set; tenants[0].key: environment variable NOPE_T is not set)"},
		{"missing envs in the file's order", "models:\n  - alias: a\n    deployments: [{provider: openai, model: m, api_key: env:NOPE_KEY}]\nadmin_key: env:NOPE_ADMIN\n",
			"line 3: models[0].deployments[0].api_key: environment variable NOPE_KEY is not set (also admin_key: environment variable NOPE_ADMIN is not set)"},
		// A key an HTTP header cannot carry: named at load, not at the
		// first call (an adversarial review: a plain-http deployment sent
		// such a key trimmed, an https one failed every call).
		{"key with a newline", "models:\n  - alias: a\n    deployments: [{provider: openai, model: m, api_key: env:NL_KEY}]\n",
			"line 3: models[0].deployments[0].api_key: environment variable NL_KEY holds a control character (byte 7 of 7; a newline at the end, " +
				"as a key read from a file has, is the usual one): an HTTP header cannot carry it"},
		{"literal key with a control byte", "tenants: [{name: a, key: \"k\\x01\"}]\n",
			"line 1: tenants[0].key: holds a control character (byte 2 of 2): an HTTP header cannot carry it"},
		{"admin key from env with a control byte", "admin_key: env:CTL_KEY\n",
			"line 1: admin_key: environment variable CTL_KEY holds a control character (byte 3 of 4; a newline at the end, " +
				"as a key read from a file has, is the usual one): an HTTP header cannot carry it"},
		{"empty env", "tenants: [{name: a, key: env:EMPTY_KEY}]\n", "line 1: tenants[0].key: environment variable EMPTY_KEY is set but empty"},
		{"tenant key with a leading space", "tenants: [{name: a, key: \" k\"}]\n",
			"line 1: tenants[0].key: has a space or tab at its start or end: a client's key reaches belay without them, so it could never match"},
		{"admin key of blanks", "admin_key: \"   \"\n",
			"line 1: admin_key: has a space or tab at its start or end: a client's key reaches belay without them, so it could never match"},
		{"bad provider", "models:\n  - alias: a\n    deployments:\n      - {provider: azure, model: m, api_key: x}\n",
			`line 4: models[0].deployments[0].provider: "azure" is not a provider; want openai or anthropic`},
		{"missing api key", "models:\n  - alias: a\n    deployments:\n      - provider: openai\n        model: m\n",
			"line 4: models[0].deployments[0].api_key: is required for api.openai.com (a literal or env:NAME)"},
		{"missing alias", "models:\n  - deployments: [" + sim + "]\n", "line 2: models[0].alias: is required"},
		{"dup alias", "models:\n  - {alias: a, deployments: [" + sim + "]}\n  - {alias: a, deployments: [" + sim + "]}\n",
			`line 3: models[1].alias: "a" is defined twice`},
		{"capture", "capture: some\n", `line 1: capture: "some" is not allowed; want off, redacted or full`},
		{"jitter", "retry: {jitter: wild}\n", `line 1: retry.jitter: "wild" is not allowed; want full, equal or none`},
		{"retry cap", "retry:\n  base: 2s\n  cap: 1s\n", "line 3: retry.cap: 1s is below base (2s)"},
		{"retry budget", "retry: {budget_ratio: 3}\n", "line 1: retry.budget_ratio: 3 is outside [0, 1]; want a share such as 0.2 (0 means default 0.2)"},
		{"period", "tenants: [{name: a, key: k, budget: {period: week}}]\n", `line 1: tenants[0].budget.period: "week" is not allowed; want day or month`},
		{"alert", "tenants: [{name: a, key: k, budget: {alert_at: [1.5]}}]\n", "line 1: tenants[0].budget.alert_at[0]: 1.5 is outside (0, 1]; want a fraction such as 0.8"},
		{"tenant key", "tenants:\n  - name: a\n", "line 2: tenants[0].key: is required (a literal or env:NAME)"},
		{"same key", "tenants:\n  - {name: a, key: env:K}\n  - {name: b, key: v}\n", `line 3: tenants[1].key: tenants "a" and "b" have the same key`},
		{"store", "store: mysql://x\n", `line 1: store: scheme "mysql" is not supported; want sqlite, postgres or memory`},
		{"listen", "listen: nowhere\n", `line 1: listen: "nowhere" is not host:port`},
		{"sim profile", "sim: {profile: tornado}\n", `line 1: sim.profile: "tornado" is not a profile; want one of bad_key, down, flaky, hang, no_quota, none, rate_limited, slow, storm, unreachable`},

		// The file as YAML.
		{"two docs", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "line 2: a second YAML document starts here; want one document"},
		{"syntax", "listen: x\n  store: y\n", "line 2: invalid YAML: mapping values are not allowed in this context"},
		{"unknown anchor", "listen: *addr\n", "invalid YAML: unknown anchor 'addr' referenced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "belay.yaml", e)
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if got, want := err.Error(), "config belay.yaml: "+tc.want; got != want {
				t.Errorf("error\n%s\nwant\n%s", got, want)
			}
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Errorf("error %T is not an *Error", err)
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	_, err := Parse([]byte("models:\n  - alias: a\n    deployments:\n      - {provider: openai, model: m, timeout: 30s}\n"), "belay.yaml", env(nil))
	e, ok := errors.AsType[*Error](err)
	if !ok || *e != (Error{File: "belay.yaml", Line: 4, Path: "models[0].deployments[0].timeout", Msg: "unknown key (did you mean timeouts?); want one of name, provider, model, base_url, api_key, sim_profile, timeouts"}) {
		t.Errorf("error %#v", err)
	}
	// A key an HTTP header cannot carry, in a Config built in code.
	k := Default()
	k.Models[0].Deployments[0].APIKey = Secret{Ref: "sk-x\n", Value: "sk-x\n"}
	if err := k.Validate(); err == nil || err.Error() != "models[0].deployments[0].api_key: holds a control character (byte 5 of 5): an HTTP header cannot carry it" {
		t.Errorf("Validate of an api_key with a newline: %v", err)
	}
	// Validate on a Config built in code: the path, no file or line.
	c := Default()
	c.Models[1].Deployments[0].Provider = "azure"
	if err := c.Validate(); err == nil || err.Error() != `models[1].deployments[0].provider: "azure" is not a provider; want openai or anthropic` {
		t.Errorf("Validate: %v", err)
	}
}

// Anchors, aliases and merge keys are checked where they are used.
func TestParseAnchors(t *testing.T) {
	y := `
models:
  - alias: a
    deployments:
      - &oa {provider: openai, model: m, base_url: "sim://"}
      - {<<: *oa, name: second}
  - alias: b
    deployments: [*oa]
`
	c, err := Parse([]byte(y), "belay.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Models[0].Deployments[1]; d.Name != "second" || d.Model != "m" || !d.IsSim() {
		t.Errorf("merged deployment %+v", d)
	}
	bad := y + "  - alias: c\n    deployments:\n      - {<<: *oa, tmeout: 1}\n"
	_, err = Parse([]byte(bad), "belay.yaml", env(nil))
	if want := "config belay.yaml: line 11: models[2].deployments[0].tmeout: unknown key (did you mean timeouts?); want one of name, provider, model, base_url, api_key, sim_profile, timeouts"; err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
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
		"claude-sonnet-5-5": {"anthropic/claude-sonnet-5-5#0", "anthropic/claude-sonnet-5-5#1"},
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
	for _, in := range []string{"-1", "-2s", "x", "", "1_000", "1e3", "0x1p4", "NaN", "Inf"} {
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

// A duration too large for a time.Duration is ErrDurationRange, in seconds
// or in units; a malformed one is not.
func TestParseDurationRange(t *testing.T) {
	for _, s := range []string{"3000000h", "99999999999", "1000000000000s", "2562048h"} {
		if _, err := ParseDuration(s); !errors.Is(err, ErrDurationRange) {
			t.Errorf("ParseDuration(%q) = %v; want ErrDurationRange", s, err)
		}
	}
	for _, s := range []string{"5x", "h", "1e3", "--5s", ""} {
		if _, err := ParseDuration(s); err == nil || errors.Is(err, ErrDurationRange) {
			t.Errorf("ParseDuration(%q) = %v; want an error that is not ErrDurationRange", s, err)
		}
	}
	if d, err := ParseDuration("2562047h"); err != nil || d != 2562047*time.Hour {
		t.Errorf("ParseDuration(2562047h) = %v, %v", d, err)
	}
}

// redact names a built-in redaction; a typo is the config's error, with
// its key and line (newcomer finding: `redact: [emails]` failed at start,
// exit 1, without either).
func TestRedactNamesChecked(t *testing.T) {
	_, err := Parse([]byte("redact: [email, emails]\n"), "belay.yaml", func(string) (string, bool) { return "", false })
	want := `config belay.yaml: line 1: redact[1]: "emails" is not a redaction; want one of bearer, api_key, email, card_number`
	if err == nil || err.Error() != want {
		t.Errorf("Parse: %v\nwant %s", err, want)
	}
}

// A base_url with a /v1 too many (anthropic) or too few (OpenAI's own API)
// is refused at its line: every call would 404 (newcomer finding: only
// the first call's error said so).
// The api_key check knows the providers' hosts however they are spelt.
func TestProviderHostNeedsKey(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	for _, u := range []string{"https://api.openai.com/v1", "https://API.OPENAI.COM/v1", "https://api.openai.com:443/v1", "https://api.anthropic.com:443"} {
		provider := "openai"
		if strings.Contains(strings.ToLower(u), "anthropic") {
			provider = "anthropic"
		}
		y := "models:\n  - alias: m\n    deployments:\n      - {name: d, provider: " + provider + ", model: x, base_url: \"" + u + "\"}\n"
		if _, err := Parse([]byte(y), "belay.yaml", env); err == nil || !strings.Contains(err.Error(), "api_key: is required for") {
			t.Errorf("%s without api_key: %v", u, err)
		}
	}
	y := "models:\n  - alias: m\n    deployments:\n      - {name: d, provider: openai, model: x, base_url: \"https://api.openai.com:8443/v1\"}\n"
	if _, err := Parse([]byte(y), "belay.yaml", env); err != nil {
		t.Errorf("another port is another host: %v", err)
	}
}

func TestBaseURLPathSlips(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	for _, tc := range []struct{ provider, url, want string }{
		{"anthropic", "https://api.anthropic.com/v1", "ends in /v1, which belay adds itself for anthropic"},
		{"anthropic", "http://127.0.0.1:9/proxy/v1/", "ends in /v1, which belay adds itself for anthropic"},
		{"openai", "https://api.openai.com", "is OpenAI's API without its /v1 path"},
		{"openai", "https://api.openai.com/", "is OpenAI's API without its /v1 path"},
		{"anthropic", "https://api.anthropic.com", ""},
		{"openai", "https://api.openai.com/v1/", ""},
		{"openai", "https://api.groq.com/openai/v1", ""},
		{"openai", "http://127.0.0.1:8000", ""},
		{"openai", "https://API.OpenAI.com", "is OpenAI's API without its /v1 path"},
		{"openai", "https://api.openai.com:443/", "is OpenAI's API without its /v1 path"},
		{"openai", "https://api.openai.com:443/v1", ""},
		{"openai", "https://res.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21", "has a query or a fragment"},
		{"openai", "http://127.0.0.1:8000/v1?", "has a query or a fragment"},
		{"openai", "http://127.0.0.1:8000/v1#frag", "has a query or a fragment"},
		{"anthropic", "http://127.0.0.1:8000/#", "has a query or a fragment"},
	} {
		y := "models:\n  - alias: m\n    deployments:\n      - {name: d, provider: " + tc.provider + ", model: x, base_url: \"" + tc.url + "\", api_key: k}\n"
		_, err := Parse([]byte(y), "belay.yaml", env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v", tc.provider, tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "line 4: models[0].deployments[0].base_url: \""+tc.url+"\" "+tc.want)):
			t.Errorf("%s %s: %v; want %q", tc.provider, tc.url, err, tc.want)
		}
	}
}
