package budget

import (
	"math"
	"testing"
)

func TestTimes(t *testing.T) {
	for _, c := range []struct {
		price USD
		n     int64
		want  USD
	}{
		{usd("0.01"), 3, usd("0.03")},
		{usd("0.0025"), 1000, usd("2.5")},
		{usd("0.01"), 0, 0},
		{usd("-0.01"), 2, usd("-0.02")},
		{USD(math.MaxInt64 / 2), 3, USD(math.MaxInt64)},  // saturated
		{USD(math.MaxInt64 / 2), -3, USD(math.MinInt64)}, // saturated
	} {
		if got := c.price.Times(c.n); got != c.want {
			t.Errorf("%s × %d = %s, want %s", c.price, c.n, got, c.want)
		}
	}
}

// Each built-in tool call adds its per-call fee to the tokens' cost; a
// long prompt's tier charges the base price's fees.
func TestCostWithToolCalls(t *testing.T) {
	p := Price{Input: usd("2"), Output: usd("10"), WebSearchCall: usd("0.01"), FileSearchCall: usd("0.0025")}
	u := Usage{InputTokens: 1000, OutputTokens: 100, WebSearchCalls: 2, FileSearchCalls: 4}
	// 1000 × $2/M + 100 × $10/M = $0.003; + 2 × $0.01 + 4 × $0.0025 = $0.033
	if got, want := p.Cost(u), usd("0.033"); got != want {
		t.Errorf("cost %s, want %s", got, want)
	}
	long := Price{Input: usd("4"), Output: usd("20")}
	p.LongPromptTokens, p.LongPrompt = 500, &long
	// 1000 × $4/M + 100 × $20/M = $0.006; + $0.03 of fees
	if got, want := p.Cost(u), usd("0.036"); got != want {
		t.Errorf("long-prompt cost %s, want %s", got, want)
	}
}

// The shipped table prices OpenAI's and Anthropic's built-in tools at
// their list fees; an override's own fee is kept; another provider's
// models have none.
func TestLookupToolFees(t *testing.T) {
	p, err := NewPricing(PricingOptions{Overrides: map[string]Price{
		"openai/gpt-4o": {Input: usd("2.5"), Output: usd("10"), WebSearchCall: usd("0.025")},
		"vllm/my-llama": {Input: usd("0.1"), Output: usd("0.1")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		provider, model string
		web, file       USD
	}{
		{"openai", "gpt-4o-mini", usd("0.01"), usd("0.0025")},
		{"azure", "gpt-4o-mini", usd("0.01"), usd("0.0025")},
		{"anthropic", "claude-sonnet-4-5", usd("0.01"), 0},
		{"openai", "gpt-4o", usd("0.025"), usd("0.0025")},
		{"vllm", "my-llama", 0, 0},
	} {
		pr, _, err := p.Lookup(c.provider, c.model)
		if err != nil {
			t.Fatalf("%s/%s: %v", c.provider, c.model, err)
		}
		if pr.WebSearchCall != c.web || pr.FileSearchCall != c.file {
			t.Errorf("%s/%s: web search %s, file search %s per call; want %s, %s", c.provider, c.model,
				pr.WebSearchCall, pr.FileSearchCall, c.web, c.file)
		}
	}
	if _, err := NewPricing(PricingOptions{Overrides: map[string]Price{"x": {WebSearchCall: usd("-0.01")}}}); err == nil {
		t.Error("a negative per-call fee was taken")
	}
}

// An override that sets only a per-call fee keeps the table's token
// prices (an adversarial review found gpt-4o-mini's tokens priced at $0
// after `pricing: {gpt-4o-mini: {web_search_call: 0.025}}`); for a model
// the table lacks, it is refused.
func TestFeesOnlyOverrideKeepsTokenPrices(t *testing.T) {
	for _, key := range []string{"gpt-4o-mini", "openai/gpt-4o-mini"} {
		p, err := NewPricing(PricingOptions{Overrides: map[string]Price{key: {WebSearchCall: usd("0.025")}}})
		if err != nil {
			t.Fatal(err)
		}
		pr, _, err := p.Lookup("openai", "gpt-4o-mini")
		if err != nil {
			t.Fatal(err)
		}
		if pr.Input != usd("0.15") || pr.Output != usd("0.60") || pr.WebSearchCall != usd("0.025") || pr.FileSearchCall != usd("0.0025") {
			t.Errorf("%s: %+v, want the table's $0.15/$0.60 with a $0.025 web search", key, pr)
		}
	}
	for _, key := range []string{"my-model", "vllm/my-model"} {
		if _, err := NewPricing(PricingOptions{Overrides: map[string]Price{key: {WebSearchCall: usd("0.01")}}}); err == nil {
			t.Errorf("%s: fees only for a model without token prices was taken", key)
		}
	}
}
