package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadProviders reports a deployment's unset env: key ("environment
// variable NAME is not set") also when it is written "env: NAME", as
// config accepts it (a third review: the check looked the untrimmed name
// up, and the stand-in "env:NAME" became the credential sent).
func TestProvidersUnsetKeyWithSpace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gw.yaml")
	y := "models:\n  - alias: m\n    deployments:\n      - {name: r, provider: openai, model: x, base_url: \"http://127.0.0.1:1/v1\", api_key: \"env: BELAY_ADV18_UNSET_KEY\"}\n"
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("BELAY_ADV18_UNSET_KEY")
	cfg, err := loadProviders(p)
	if err == nil {
		t.Errorf("api_key \"env: BELAY_ADV18_UNSET_KEY\" with the variable unset: expected error \"environment variable BELAY_ADV18_UNSET_KEY is not set\"; got no error and api_key value %q",
			cfg.Models[0].Deployments[0].APIKey.Value)
	} else if !strings.Contains(err.Error(), "BELAY_ADV18_UNSET_KEY is not set") {
		t.Errorf("got %v", err)
	}
}

// The tenants' keys and the admin key are dropped, so a suite pointed at a
// gateway's own config does not need its tenants' secrets: variables set
// but empty (as a CI job without the secret has them) or holding a newline
// do not fail the load; a deployment's key holding one does.
func TestProvidersTenantSecretNotNeeded(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gw.yaml")
	y := "admin_key: env:BELAY_ADV18_ADMIN\nmodels:\n  - alias: m\n    deployments:\n      - {name: r, provider: openai, model: x, base_url: \"http://127.0.0.1:1/v1\", api_key: sk-x}\n" +
		"tenants:\n  - {name: a, key: env:BELAY_ADV18_TENANT}\n"
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"", "tk\n"} {
		t.Setenv("BELAY_ADV18_TENANT", v)
		t.Setenv("BELAY_ADV18_ADMIN", v)
		if _, err := loadProviders(p); err != nil {
			t.Errorf("tenant and admin keys (dropped) set to %q: expected the providers loaded; got %v", v, err)
		}
	}
	t.Setenv("BELAY_ADV18_DEPLOY", "sk-x\n")
	q := filepath.Join(dir, "gw2.yaml")
	if err := os.WriteFile(q, []byte(strings.Replace(y, "api_key: sk-x", "api_key: env:BELAY_ADV18_DEPLOY", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "models[0].deployments[0].api_key: environment variable BELAY_ADV18_DEPLOY holds a control character"
	if _, err := loadProviders(q); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "sk-x") {
		t.Errorf("a deployment key with a newline: %v; want %q, without the key", err, want)
	}
}
