package budget

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func mustUSD(t *testing.T, s string) USD {
	t.Helper()
	v, err := ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMillionAdditionsAreExact(t *testing.T) {
	step := mustUSD(t, "0.0000375")
	var sum USD
	for range 1_000_000 {
		sum = sum.Add(step)
	}
	if want := mustUSD(t, "37.50"); sum != want {
		t.Fatalf("sum = %s, want %s", sum, want)
	}
}

func TestPricingCostKnownValues(t *testing.T) {
	p := DefaultPricing()
	cases := []struct {
		name, provider, model string
		u                     Usage
		want                  string
	}{
		// (600·2.50 + 400·1.25 + 500·10.00) / 1e6
		{"openai cached", "openai", "gpt-4o", UsageFromOpenAI(1000, 500, 400, 0), "0.007"},
		{"dated snapshot", "openai", "gpt-4o-2024-08-06", UsageFromOpenAI(1_000_000, 0, 0, 0), "2.50"},
		{"mini is not gpt-4o", "openai", "gpt-4o-mini-2024-07-18", UsageFromOpenAI(1_000_000, 1_000_000, 0, 0), "0.75"},
		{"nano", "openai", "gpt-4.1-nano-2025-04-14", UsageFromOpenAI(2_000_000, 0, 0, 0), "0.20"},
		// reasoning is billed as output: 1000 completion tokens incl. 800 reasoning
		{"o4-mini reasoning", "openai", "o4-mini", UsageFromOpenAI(0, 1000, 0, 800), "0.0044"},
		{"gpt-5-nano cached", "openai", "gpt-5-nano", UsageFromOpenAI(1_000_000, 0, 1_000_000, 0), "0.005"},
		{"azure is openai", "azure.ai.openai", "gpt-4.1", UsageFromOpenAI(1_000_000, 1_000_000, 0, 0), "10.00"},
		// 100·3 + 1000·0.30 + 2000·3.75 + 50·15 = 8850 µ$
		{"anthropic cache", "anthropic", "claude-sonnet-4-5-20250929", UsageFromAnthropic(100, 50, 1000, 2000), "0.00885"},
		// 100·2 + 1000·0.20 + 2000·2.50 + 50·10 = 5900 µ$
		{"sonnet 5.5 cache", "anthropic", "claude-sonnet-5-5", UsageFromAnthropic(100, 50, 1000, 2000), "0.0059"},
		{"sonnet 5", "anthropic", "claude-sonnet-5", UsageFromAnthropic(1_000_000, 1_000_000, 0, 0), "12.00"},
		{"sonnet 4.6 by the 4 prefix", "anthropic", "claude-sonnet-4-6", UsageFromAnthropic(100_000, 0, 0, 0), "0.30"},
		// Above 200,000 prompt tokens (cache reads count) every token is at
		// the long-context rates, $6 / $22.50, the cache multipliers on them.
		{"sonnet 4.5 at 200,000", "anthropic", "claude-sonnet-4-5", UsageFromAnthropic(200_000, 10_000, 0, 0), "0.75"},
		{"sonnet 4.5 long context", "anthropic", "claude-sonnet-4-5", UsageFromAnthropic(500_000, 10_000, 0, 0), "3.225"},
		{"sonnet 4 long context by its cache reads", "anthropic", "claude-sonnet-4-20250514", UsageFromAnthropic(100_000, 0, 150_000, 0), "0.69"},
		{"opus 4.1 old tier", "anthropic", "claude-opus-4-1-20250805", UsageFromAnthropic(1_000_000, 0, 0, 0), "15.00"},
		{"opus 4.5 new tier", "anthropic", "claude-opus-4-5-20251101", UsageFromAnthropic(1_000_000, 0, 0, 0), "5.00"},
		{"opus 4 dated", "anthropic", "claude-opus-4-20250514", UsageFromAnthropic(0, 1_000_000, 0, 0), "75.00"},
		{"haiku 3.5", "anthropic", "claude-3-5-haiku-20241022", UsageFromAnthropic(1_000_000, 1_000_000, 0, 0), "4.80"},
		{"haiku 4.5", "anthropic", "claude-haiku-4-5", UsageFromAnthropic(0, 0, 1_000_000, 1_000_000), "1.35"},
		{"gemini pro short", "gemini", "gemini-2.5-pro", UsageFromGemini(100_000, 40_000, 0, 10_000), "0.625"},
		// above 200k prompt tokens every token is at the long price: 300k·2.50
		{"gemini pro long", "gemini", "gemini-2.5-pro", UsageFromGemini(300_000, 0, 0, 0), "0.75"},
		{"flash-lite preview", "gcp.gemini", "gemini-2.5-flash-lite-preview-06-17", UsageFromGemini(1_000_000, 1_000_000, 0, 0), "0.50"},
		{"flash cached", "gemini", "gemini-2.5-flash", UsageFromGemini(1_000_000, 0, 1_000_000, 0), "0.03"},
		{"no provider", "", "gpt-5-mini", UsageFromOpenAI(1_000_000, 1_000_000, 0, 0), "2.25"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := p.Cost(c.provider, c.model, c.u)
			if err != nil {
				t.Fatal(err)
			}
			if want := mustUSD(t, c.want); got != want {
				t.Fatalf("Cost(%s, %s, %+v) = %s, want %s", c.provider, c.model, c.u, got, want)
			}
		})
	}
}

func TestPricingMatching(t *testing.T) {
	p := DefaultPricing()
	for model, want := range map[string]string{
		"gpt-4o":                      "gpt-4o",
		"GPT-4o-2024-11-20":           "gpt-4o",
		"gpt-4.1-mini-2025-04-14":     "gpt-4.1-mini",
		"o3-mini-2025-01-31":          "o3-mini",
		"o3-2025-04-16":               "o3",
		"gemini-2.5-flash-preview-09": "gemini-2.5-flash",
	} {
		_, m, err := p.Lookup("", model)
		if err != nil || m.Model != want || m.Default {
			t.Errorf("Lookup(%q) = %+v, %v; want entry %q", model, m, err, want)
		}
	}
	for _, model := range []string{"o3x", "gpt-4", "gpt-4oo", "llama-3"} {
		if _, _, err := p.Lookup("openai", model); !errors.Is(err, ErrUnknownModel) {
			t.Errorf("Lookup(%q) err = %v, want ErrUnknownModel", model, err)
		}
	}
	if _, _, err := p.Lookup("anthropic", "gpt-4o"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("gpt-4o under anthropic: err = %v, want ErrUnknownModel", err)
	}
}

func TestPricingOverridesAndDefault(t *testing.T) {
	def := Price{Input: Dollars(1), Output: Dollars(2)}
	p, err := NewPricing(PricingOptions{
		Overrides: map[string]Price{
			"gpt-4o":         {Input: Dollars(1), Output: Dollars(1)},
			"acme/house":     {Input: Dollars(3), Output: Dollars(3)},
			"local-llama":    {Input: Micros(10), Output: Micros(20)},
			"openai/o4-mini": {Input: Dollars(1), Output: Dollars(1), Reasoning: Dollars(5)},
		},
		Default: &def,
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(prov, model string, u Usage, want USD, wantDefault bool) {
		t.Helper()
		pr, m, err := p.Lookup(prov, model)
		if err != nil {
			t.Fatal(err)
		}
		if got := pr.Cost(u); got != want || m.Default != wantDefault {
			t.Errorf("%s/%s: cost %s default %v, want %s %v", prov, model, got, m.Default, want, wantDefault)
		}
	}
	million := Usage{InputTokens: 1_000_000}
	check("openai", "gpt-4o-2024-08-06", million, Dollars(1), false)
	check("acme", "house", million, Dollars(3), false)
	check("whatever", "local-llama-3", million, Micros(10), false)
	check("openai", "unknown-model", million, Dollars(1), true)
	// 1M output of which 400k reasoning: 600k·$1 + 400k·$5
	check("openai", "o4-mini", Usage{OutputTokens: 1_000_000, ReasoningTokens: 400_000}, Micros(2_600_000), false)

	if _, err := NewPricing(PricingOptions{Overrides: map[string]Price{"x": {Input: -1}}}); err == nil {
		t.Error("negative price accepted")
	}
	if _, err := NewPricing(PricingOptions{Overrides: map[string]Price{"openai/": {}}}); err == nil {
		t.Error("empty model accepted")
	}
}

func TestEstimate(t *testing.T) {
	p := DefaultPricing()
	// 1000·0.15 + 500·0.60 = 450 µ$
	got, err := p.Estimate("openai", "gpt-4o-mini", 1000, 500)
	if err != nil || got != Micros(450) {
		t.Fatalf("Estimate = %s, %v; want $0.00045", got, err)
	}
	if _, err := p.Estimate("openai", "nope", 1, 1); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("unknown model: err = %v", err)
	}
}

func TestUsageNormalisation(t *testing.T) {
	a := UsageFromAnthropic(10, 20, 30, 40)
	if a.InputTokens != 80 || a.UncachedInputTokens() != 10 || a.TotalTokens() != 100 {
		t.Fatalf("anthropic usage %+v", a)
	}
	g := UsageFromGemini(100, 20, 30, 5)
	if g.OutputTokens != 25 || g.UncachedInputTokens() != 70 {
		t.Fatalf("gemini usage %+v", g)
	}
	if s := a.Add(g); s.InputTokens != 180 || s.ReasoningTokens != 5 {
		t.Fatalf("sum %+v", s)
	}
}

// Lookup's cache gives what the table gives, before and after it fills,
// for found and unknown names alike.
func TestLookupCacheAgreesWithTheTable(t *testing.T) {
	p := DefaultPricing()
	names := []string{"gpt-4o", "GPT-4o-2024-11-20", "o3-mini-2025-01-31", "claude-sonnet-4-5", "llama-3", "gpt-4oo"}
	for i := range maxFound + 10 { // past the cache's bound
		names = append(names, fmt.Sprintf("gpt-4o-mini-%d", i))
	}
	for round := range 2 {
		for _, prov := range []string{"", "openai", "anthropic"} {
			for _, model := range names {
				pr, m, err := p.Lookup(prov, model)
				wpr, wm, werr := p.lookup(prov, model)
				if !reflect.DeepEqual(pr, wpr) || m != wm || (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
					t.Fatalf("round %d: Lookup(%q, %q) = %+v %+v %v; the table gives %+v %+v %v", round, prov, model, pr, m, err, wpr, wm, werr)
				}
			}
		}
	}
	if n := p.nFound.Load(); n != maxFound {
		t.Errorf("%d lookups cached, want the bound, %d", n, maxFound)
	}
}

// A 1-hour cache write is priced at CacheWrite1h (Anthropic's table: 2×
// input), the rest of the writes at CacheWrite; a 1-hour count above the
// whole write counts as the whole write, and a price without CacheWrite1h
// prices it as any write.
func TestOneHourCacheWrites(t *testing.T) {
	p := DefaultPricing()
	pr, _, err := p.Lookup("anthropic", "claude-opus-4-5")
	if err != nil {
		t.Fatal(err)
	}
	if pr.CacheWrite1h != Dollars(10) || pr.CacheWrite != usd("6.25") {
		t.Fatalf("claude-opus-4-5 cache writes %s (5 min), %s (1 h); want $6.25 and $10 (2× $5 input)", pr.CacheWrite, pr.CacheWrite1h)
	}
	u := Usage{InputTokens: 1_000_000, CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 250_000}
	if got, want := pr.Cost(u), usd("7.1875"); got != want { // 750k·6.25 + 250k·10
		t.Errorf("cost %s, want %s", got, want)
	}
	u.CacheWrite1hTokens = 2_000_000
	if got, want := pr.Cost(u), Dollars(10); got != want {
		t.Errorf("1-hour part above the write: cost %s, want %s", got, want)
	}
	plain := Price{Input: Dollars(1), CacheWrite: Dollars(2)}
	if got, want := plain.Cost(Usage{InputTokens: 1_000_000, CacheWriteTokens: 1_000_000, CacheWrite1hTokens: 500_000}), Dollars(2); got != want {
		t.Errorf("without a 1-hour price: cost %s, want %s", got, want)
	}
}

// A Claude price that leaves the cache prices out gets Anthropic's
// multipliers of its input price (read 0.1×, 5-minute write 1.25×, 1-hour
// write 2×), whether it overrides a built-in entry or names a new Claude
// model, and so does its long-prompt tier; another model, even one served
// over Anthropic's API, keeps its zero cache prices (billed at input).
func TestAnthropicCachePricesFollowInput(t *testing.T) {
	p, err := NewPricing(PricingOptions{Overrides: map[string]Price{
		"claude-sonnet-5-5":       {Input: Dollars(3), Output: Dollars(15)},
		"anthropic/claude-custom": {Input: Dollars(4), Output: Dollars(20), CacheWrite: Dollars(6)},
		"anthropic/kimi-k2":       {Input: Dollars(1), Output: Dollars(2)},
		"claude-long": {Input: Dollars(3), Output: Dollars(15), LongPromptTokens: 200_000,
			LongPrompt: &Price{Input: Dollars(6), Output: Dollars(22)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		provider, model        string
		cached, write, write1h USD
	}{
		{"anthropic", "claude-sonnet-5-5", usd("0.30"), usd("3.75"), Dollars(6)},
		{"anthropic", "claude-custom", usd("0.40"), Dollars(6), Dollars(8)},
		{"anthropic", "kimi-k2", 0, 0, 0},
		{"openai", "gpt-4o", usd("1.25"), 0, 0},
	} {
		pr, _, err := p.Lookup(c.provider, c.model)
		if err != nil {
			t.Fatal(err)
		}
		if pr.CachedInput != c.cached || pr.CacheWrite != c.write || pr.CacheWrite1h != c.write1h {
			t.Errorf("%s/%s: cache read %s, write %s, 1-hour write %s; want %s, %s, %s",
				c.provider, c.model, pr.CachedInput, pr.CacheWrite, pr.CacheWrite1h, c.cached, c.write, c.write1h)
		}
	}
	pr, _, _ := p.Lookup("anthropic", "claude-long")
	long := Usage{InputTokens: 300_000, CacheWriteTokens: 300_000, CacheWrite1hTokens: 300_000}
	if got := pr.Cost(long); got != usd("3.60") { // 300K at the long tier's 2× $6
		t.Errorf("300K 1-hour cache writes above the long-prompt threshold cost %s, want $3.60", got)
	}
}

// EstimateWrites prices the prompt at the dearest way it may be billed:
// as written into the cache the request names, never below uncached input.
func TestEstimateWrites(t *testing.T) {
	p := DefaultPricing() // claude-sonnet-5-5: $2 input, $2.50 5-minute write, $4 1-hour write, $10 output
	for w, want := range map[CacheWrites]USD{
		NoCacheWrites: usd("0.0021"), // 1,000·2 + 10·10, per million
		CacheWrites5m: usd("0.0026"),
		CacheWrites1h: usd("0.0041"),
	} {
		got, err := p.EstimateWrites("anthropic", "claude-sonnet-5-5", 1000, 10, w)
		if err != nil || got != want {
			t.Errorf("writes %d: estimate %s (%v), want %s", w, got, err, want)
		}
	}
	// OpenAI bills no cache write: a request that asks for one costs input.
	if got, _ := p.EstimateWrites("openai", "gpt-4o", 1000, 10, CacheWrites1h); got != usd("0.0026") {
		t.Errorf("gpt-4o with writes: %s, want $0.0026 (1,000·2.50 + 10·10)", got)
	}
}

// A table entry prices a model's snapshots and versions (dates, minor
// versions, "latest", "preview", "exp", vN), not other products whose
// names start with it, nor its point releases: gpt-5-pro is priced by
// its own entry, and o4-mini-deep-research, gpt-4o-audio-preview or
// gpt-5.2 by none.
func TestLookupMatchesSnapshotsOnly(t *testing.T) {
	p := DefaultPricing()
	for _, c := range []struct{ model, entry string }{
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"gpt-4o-mini-v2", "gpt-4o-mini"},
		{"gpt-5-pro", "gpt-5-pro"},
		{"gpt-5-pro-2025-10-06", "gpt-5-pro"},
		{"o3-pro", "o3-pro"},
		{"claude-sonnet-4@20250514", "claude-sonnet-4"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4"},
		{"claude-3-5-haiku-latest", "claude-3-5-haiku"},
		{"gemini-2.5-pro-exp-03-25", "gemini-2.5-pro"},
		{"gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"},
		{"o4-mini-deep-research", ""},
		{"gpt-4o-audio-preview", ""},
		{"gpt-4o-realtime-preview-2024-12-17", ""},
		{"o3-deep-research", ""},
		{"gpt-5-chat-latest", "gpt-5-chat-latest"},
		{"gpt-4o-2024-05-13", "gpt-4o-2024-05-13"},
		{"claude-sonnet-4-6@20260217", "claude-sonnet-4-6"},
		{"gpt-5.2", ""},
		{"gpt-5.1-2025-11-13", ""},
		{"gpt-4oo", ""},
		{"gpt-4o-ü", ""},
	} {
		_, m, err := p.Lookup("", c.model)
		if c.entry == "" {
			if err == nil {
				t.Errorf("%s: priced as %s; want it unpriced", c.model, m.Model)
			}
			continue
		}
		if err != nil || m.Model != c.entry {
			t.Errorf("%s: priced as %q (%v); want %q", c.model, m.Model, err, c.entry)
		}
	}
}
