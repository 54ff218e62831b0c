package route

import (
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/retry"
)

func TestNewValidates(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"no deployments", func(c *Config) { c.Deployments = nil }, "route: deployments is empty"},
		{"empty name", func(c *Config) { c.Deployments[1].Name = "" }, "route: deployments[1].name is empty"},
		{"duplicate deployment", func(c *Config) { c.Deployments[2].Name = "a" }, `route: deployments[2].name "a" is a duplicate`},
		{"bad dialect", func(c *Config) { c.Deployments[0].Dialect = "cohere" }, `route: deployments[0] (a).dialect "cohere" is unknown`},
		{"unknown deployment", func(c *Config) { c.Aliases[0].Deployments[1] = "zz" }, `route: aliases[0] (smart).deployments[1]: unknown deployment "zz"`},
		{"deployment twice", func(c *Config) { c.Aliases[0].Deployments[1] = "a" }, `route: aliases[0] (smart).deployments[1]: deployment "a" is listed twice`},
		{"duplicate alias", func(c *Config) { c.Aliases[1].Name = "smart" }, `route: aliases[1].name "smart" is a duplicate`},
		{"empty alias", func(c *Config) { c.Aliases[1].Deployments = nil }, `route: aliases[1] (long).deployments is empty`},
		{"unknown fallback", func(c *Config) { c.Aliases[0].ContextWindowFallback = []string{"big", "huge"} },
			`route: aliases[0] (smart).context_window_fallback[1]: unknown deployment or alias "huge"`},
		{"unknown content fallback", func(c *Config) { c.Aliases[0].ContentPolicyFallback = []string{"x"} },
			`route: aliases[0] (smart).content_policy_fallback[0]: unknown deployment or alias "x"`},
		{"negative max attempts", func(c *Config) { c.MaxAttempts = -1 }, "route: max_attempts (-1) is negative"},
		{"retry cap below base", func(c *Config) { c.Retry = retry.Policy{Base: 2 * time.Second, Cap: time.Second} }, "retry: cap (1s) is below base (2s)"},
		{"retry negative attempts", func(c *Config) { c.Retry.MaxAttempts = -2 }, "retry: max_attempts (-2) is negative"},
		{"budget ratio above 1", func(c *Config) { c.RetryBudget.Ratio = 1.2 }, "retry: budget_ratio (1.2) is outside [0, 1]"},
		{"breaker rate", func(c *Config) { c.Breaker = breaker.Settings{FailureRate: 2} }, "breaker: failure_rate (2) is outside (0, 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			tt.modify(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("New = %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestAccessors(t *testing.T) {
	cfg := testConfig()
	cfg.Deployments[0].Labels = map[string]string{"region": "us"}
	cfg.Deployments[0].APIKey = "sk-secret"
	r := mustRouter(t, cfg)
	if got := strings.Join(r.Aliases(), ","); got != "long,smart" {
		t.Errorf("Aliases = %s", got)
	}
	ds := r.Deployments("smart")
	if len(ds) != 3 || ds[0].Name != "a" || ds[2].Name != "c" || ds[0].Labels["region"] != "us" {
		t.Fatalf("Deployments = %v", ds)
	}
	ds[0].Labels["region"] = "eu" // a copy: the router is unchanged
	if r.Deployments("smart")[0].Labels["region"] != "us" {
		t.Error("Deployments returned the router's own labels map")
	}
	if r.Deployments("nope") != nil || r.Breaker("nope") != nil {
		t.Error("unknown names should give nil")
	}
	if r.Breaker("b") == nil || r.Breaker("b").Name() != "b" {
		t.Error("Breaker(b) missing")
	}
	if got := r.Breakers(); len(got) != 4 || got["big"] != breaker.Closed {
		t.Errorf("Breakers = %v", got)
	}
	if s := ds[0].String(); strings.Contains(s, "secret") || s != "a (sim/m-a)" {
		t.Errorf("String = %q", s)
	}
}
