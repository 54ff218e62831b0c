package budget

import (
	"testing"
)

// A point release of a model ("gpt-5.2": "gpt-5" and ".2") is not priced
// as its family's entry: OpenAI prices it apart ($1.75 / $14 per million
// against gpt-5's $1.25 / $10), so it is unpriced unless an entry of its
// own prices it; a dated snapshot of another price has its own entry
// (gpt-4o-2024-05-13: $5 / $15 against gpt-4o's $2.50 / $10). Before, both
// were priced as their family, 29% and 38% under their cost.
func TestAdv22r_PointReleasesNotPricedAsTheirFamily(t *testing.T) {
	p := DefaultPricing()
	u := Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}
	for _, c := range []struct{ model, list string }{
		{"gpt-5.2", "15.75"},            // $1.75 + $14
		{"gpt-5.2-2025-12-11", "15.75"}, // its dated snapshot
		{"gpt-4o-2024-05-13", "20.00"},  // $5 + $15
	} {
		pr, m, err := p.Lookup("openai", c.model)
		if err != nil {
			continue // unpriced: refused where a money limit applies; not under-charged
		}
		if got, want := pr.Cost(u), mustUSD(t, c.list); got < want {
			t.Errorf("%s priced by entry %q: 1M in + 1M out cost %s; its list price is %s (under-charged)", c.model, m.Model, got, want)
		}
	}
}

// Models at their family's price with names of their own (gpt-5-codex,
// gpt-5-chat-latest: $1.25 / $0.125 cached / $10, as gpt-5) have entries
// of their own, so the snapshot-only rule does not leave them unpriced (a
// gateway with a money limit would refuse to start).
func TestAdv22r_SamePricedVariantsStillPriced(t *testing.T) {
	p := DefaultPricing()
	u := Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}
	for _, model := range []string{"gpt-5-codex", "gpt-5-chat-latest"} {
		pr, m, err := p.Lookup("openai", model)
		if err != nil {
			t.Errorf("%s: %v; want it priced as gpt-5 ($1.25 / $10 per million, OpenAI's list price), as it was before the snapshot-only rule", model, err)
			continue
		}
		if got, want := pr.Cost(u), mustUSD(t, "11.25"); got != want {
			t.Errorf("%s priced by %q at %s for 1M+1M; want %s", model, m.Model, got, want)
		}
	}
}

// Claude Sonnet 4.6 bills its whole 1M-token window at the standard
// $3 / $15 (platform.claude.com pricing, "Long context pricing": "Claude
// Opus 4.6 and Sonnet 4.6 include the full 1M token context window at
// standard pricing. For Claude Sonnet 4.5 and Sonnet 4, requests
// exceeding 200k input tokens are charged at premium long context
// rates"): it has an entry of its own, without the $6 / $22.50 tier that
// the "claude-sonnet-4" entry gives 4 and 4.5.
func TestAdv22r_Sonnet46LongContextAtStandardPrice(t *testing.T) {
	p := DefaultPricing()
	u := Usage{InputTokens: 500_000, OutputTokens: 10_000}
	want := mustUSD(t, "1.65") // 500,000 × $3/M + 10,000 × $15/M
	for _, model := range []string{"claude-sonnet-4-6", "claude-sonnet-4-6@20260217"} {
		got, err := p.Cost("anthropic", model, u)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if got != want {
			t.Errorf("%s: 500,000 in + 10,000 out charged %s; want %s (no long-context premium on Sonnet 4.6)", model, got, want)
		}
	}
	// Sonnet 4.5 and 4 keep the premium.
	if got, _ := p.Cost("anthropic", "claude-sonnet-4-5-20250929", u); got != mustUSD(t, "3.225") {
		t.Errorf("claude-sonnet-4-5: %s; want $3.225 at the long-context rates", got)
	}
}
