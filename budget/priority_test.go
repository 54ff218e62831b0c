package budget

import (
	"errors"
	"testing"
)

// Priority prices come from https://openai.com/api-priority-processing/:
// a Usage with Priority set is priced at them, cached input included, and
// per-call fees stay the base price's.
func TestPriorityPrices(t *testing.T) {
	p := DefaultPricing()
	for _, c := range []struct {
		model string
		u     Usage
		want  string
	}{
		// 1M in (200k cached), 1M out at gpt-5's priority $2.50 / $0.25 / $20.
		{"gpt-5-2025-08-07", Usage{InputTokens: 1_000_000, CachedInputTokens: 200_000, OutputTokens: 1_000_000, Priority: true}, "22.05"},
		{"gpt-5-2025-08-07", Usage{InputTokens: 1_000_000, CachedInputTokens: 200_000, OutputTokens: 1_000_000}, "11.025"},
		{"gpt-4.1-mini", Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, Priority: true}, "3.50"},
		{"gpt-4o-2024-05-13", Usage{InputTokens: 1_000_000, CachedInputTokens: 1_000_000, OutputTokens: 0, Priority: true}, "8.75"}, // no cached price: input
		// A web search's fee is the base price's: $0.01 a call.
		{"gpt-4o", Usage{InputTokens: 1_000_000, WebSearchCalls: 2, Priority: true}, "4.27"},
	} {
		pr, _, err := p.Lookup("openai", c.model)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ParseUSD(c.want)
		if got := pr.Cost(c.u); got != want {
			t.Errorf("%s %+v: cost %s, want %s", c.model, c.u, got, want)
		}
		if !pr.Exact(c.u) {
			t.Errorf("%s has a priority price; Exact = false", c.model)
		}
	}
	o3, _, _ := p.Lookup("openai", "o3")
	if o3.Priority != nil || o3.Exact(Usage{Priority: true}) || !o3.Exact(Usage{}) {
		t.Errorf("o3: the priority page lists no price for it; got %+v", o3.Priority)
	}
	// A priority ask is reserved at the priority price.
	got, err := p.EstimateAsk("openai", "gpt-4o", Ask{PromptTokens: 1000, MaxOutputTokens: 1000, Priority: true})
	if want, _ := ParseUSD("0.02125"); err != nil || got != want { // 1,000 × $4.25/M + 1,000 × $17/M
		t.Errorf("EstimateAsk priority gpt-4o = %s, %v; want %s", got, err, want)
	}
}

// An override that sets only a priority tier keeps the table's standard
// prices; for a model the table lacks it is an error; a priority tier of
// its own cannot nest.
func TestPriorityOverride(t *testing.T) {
	p, err := NewPricing(PricingOptions{Overrides: map[string]Price{"o3": {Priority: &Price{Input: Dollars(3), Output: Dollars(12)}}}})
	if err != nil {
		t.Fatal(err)
	}
	pr, _, _ := p.Lookup("openai", "o3")
	if pr.Input != Dollars(2) || pr.Priority == nil || pr.Priority.Output != Dollars(12) {
		t.Errorf("o3 after a priority-only override: %+v, priority %+v; want the table's $2 input and the override's $12 priority output", pr, pr.Priority)
	}
	if _, err := NewPricing(PricingOptions{Overrides: map[string]Price{"ft:custom": {Priority: &Price{Input: Dollars(3)}}}}); !errors.Is(err, errFeesOnly) {
		t.Errorf("priority-only override of an unknown model: %v; want errFeesOnly", err)
	}
	if _, err := NewPricing(PricingOptions{Overrides: map[string]Price{"x": {Input: Dollars(1), Priority: &Price{Input: Dollars(2), Priority: &Price{}}}}}); err == nil {
		t.Error("a nested priority tier was accepted")
	}
	if _, err := NewPricing(PricingOptions{Overrides: map[string]Price{"x": {Input: Dollars(1), Priority: &Price{Input: -1}}}}); err == nil {
		t.Error("a negative priority price was accepted")
	}
}
