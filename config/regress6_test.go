package config

import (
	"errors"
	"strings"
	"testing"
)

// Adversary findings (session 6) on the checker that reads a config's YAML
// before it is decoded.

func parse6(t *testing.T, y string) (*Config, error) {
	t.Helper()
	return Parse([]byte(y), "adv.yaml", env(map[string]string{"K": "secret"}))
}

// A merge key in a mapping section (pricing) brings in entries, as the
// decoder reads it; it was taken for a model named "<<".
func TestMergeKeyInAMapSection(t *testing.T) {
	c, err := parse6(t, "pricing:\n  <<: {gpt-x: {input: 1, output: 2}}\n  gpt-y: {input: 3, output: 4}\n")
	if err != nil {
		t.Fatal(err)
	}
	x, y := c.Pricing["gpt-x"], c.Pricing["gpt-y"]
	if len(c.Pricing) != 2 || x.Input == 0 || x.Output != 2*x.Input || y.Input != 3*x.Input || y.Output != 4*x.Input {
		t.Errorf("pricing %+v; want gpt-x and gpt-y", c.Pricing)
	}
	_, err = parse6(t, "pricing:\n  <<: {gpt-x: {input: 1, outptu: 2}}\n")
	if e := (*Error)(nil); !errors.As(err, &e) || e.Path != `pricing.gpt-x.outptu` || e.Line != 2 {
		t.Errorf("a bad key in a merged price: %v; want pricing.gpt-x.outptu at line 2", err)
	}
}

// An empty list item (its keys commented out) is an error: the decoder
// drops it, so a tenants list of one empty item left the gateway open, and
// the items after it moved up, so errors named the wrong item and line.
func TestEmptyListItemIsAnError(t *testing.T) {
	for _, c := range []struct{ yaml, path, says string }{
		{"tenants:\n  - # name: acme\n    # key: env:K\n", "tenants[0]", "found nothing (an empty item); want a mapping with keys name, key"},
		{"models:\n  - # alias: smart\n", "models[0]", "found nothing (an empty item); want a mapping with keys alias, deployments"},
		{"models:\n  -\n  - alias: smart\n    deployments:\n      - {provider: azure, model: m}\n", "models[0]", "found nothing"},
	} {
		_, err := parse6(t, c.yaml)
		e := (*Error)(nil)
		if !errors.As(err, &e) || e.Path != c.path || e.Line != 2 || !strings.Contains(e.Msg, c.says) {
			t.Errorf("%q: %v; want %s at line 2 saying %q", c.yaml, err, c.path, c.says)
		}
	}
}

// A few kilobytes of nested aliases expand to millions of values: the
// check stops at its bound with an *Error at a line, instead of walking
// them all and then returning the decoder's error without one.
func TestAliasExpansionIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("tenants:\n  - &t {name: x, key: k, budget: {alert_at: [&f 0.5")
	for range 1199 {
		b.WriteString(", *f")
	}
	b.WriteString("]}}\n")
	for range 1199 {
		b.WriteString("  - *t\n")
	}
	_, err := parse6(t, b.String())
	e := (*Error)(nil)
	if !errors.As(err, &e) || e.Line == 0 || !strings.Contains(e.Msg, "aliases") {
		t.Errorf("error %v (%T); want an *Error at a line about aliases", err, err)
	}
}

// Two swapped letters are one edit: short keys get their suggestion
// (newcomer finding: modle and alais got none).
func TestSwappedLettersAreSuggested(t *testing.T) {
	for _, c := range []struct{ yaml, says string }{
		{"models:\n  - alias: a\n    deployments:\n      - {provider: openai, modle: m}\n", "(did you mean model?)"},
		{"models:\n  - alais: a\n", "(did you mean alias?)"},
	} {
		if _, err := parse6(t, c.yaml); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v; want %q", c.yaml, err, c.says)
		}
	}
}
