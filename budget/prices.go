package budget

// usd converts a literal price in dollars ("2.50") to USD; it panics on a
// malformed literal, which a test of the shipped table would catch.
func usd(s string) USD {
	v, err := ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return v
}

func price(in, cached, write, out string) Price {
	p := Price{Input: usd(in), Output: usd(out)}
	if cached != "" {
		p.CachedInput = usd(cached)
	}
	if write != "" {
		p.CacheWrite = usd(write)
	}
	return p
}

// priority returns p with a priority tier of the given input, cached
// input and output prices.
func priority(p Price, in, cached, out string) Price {
	t := price(in, cached, "", out)
	p.Priority = &t
	return p
}

// anthropicCache fills the cache prices p leaves at zero by Anthropic's
// multipliers of the base input price (platform.claude.com, "Prompt
// caching", pricing; the same on every Claude model): a cache read 0.1×, a
// 5-minute cache write 1.25×, a 1-hour write 2×. A price override of a
// Claude model that gives only input and output is then billed for its
// cache writes as Anthropic bills them, not at the input price.
func anthropicCache(p Price) Price {
	if p.CachedInput == 0 {
		p.CachedInput = USD(int64(p.Input) / 10)
	}
	if p.CacheWrite == 0 {
		p.CacheWrite = p.Input.Add(USD(int64(p.Input) / 4))
	}
	if p.CacheWrite1h == 0 {
		p.CacheWrite1h = p.Input.Add(p.Input)
	}
	if p.LongPrompt != nil { // a long prompt's tier has the same multipliers
		long := anthropicCache(*p.LongPrompt)
		p.LongPrompt = &long
	}
	return p
}

// builtinPrices are list prices, standard (non-batch, non-priority) tier,
// in USD per million tokens, checked 2026-11-29 against:
//
//   - OpenAI: https://platform.openai.com/docs/pricing
//     (also served at https://developers.openai.com/api/docs/pricing):
//     columns Input, Cached input, Output. OpenAI has no cache-write charge.
//   - Anthropic: https://platform.claude.com/docs/en/about-claude/pricing,
//     "Model pricing": Base input, 5m cache writes, Cache hits, Output; 1h
//     cache writes are 2× base input (the table's "1h cache writes"
//     column), priced from the usage's cache_creation.ephemeral_1h_input_tokens;
//     Pricing.Lookup fills that price in (anthropicCache).
//   - Google: https://ai.google.dev/gemini-api/docs/pricing, paid tier,
//     text/image/video input, "Context caching" price for cached input;
//     output prices include thinking tokens.
//
// Prices change; override them in configuration (Pricing.Overrides) rather
// than trusting this table for billing.
var builtinPrices = map[string]map[string]Price{
	"openai": {
		// Priority prices (service_tier "priority" or "fast"): input, cached
		// input and output, from https://openai.com/api-priority-processing/
		// (read 2026-12-01). Models it does not list have none: a request
		// asking priority processing of them is refused.
		"gpt-4o": priority(price("2.50", "1.25", "", "10.00"), "4.25", "2.125", "17.00"),
		// gpt-4o's first snapshot kept its launch price.
		"gpt-4o-2024-05-13": priority(price("5.00", "", "", "15.00"), "8.75", "", "26.25"),
		"gpt-4o-mini":       price("0.15", "0.075", "", "0.60"),
		"gpt-4.1":           priority(price("2.00", "0.50", "", "8.00"), "3.50", "0.875", "14.00"),
		"gpt-4.1-mini":      priority(price("0.40", "0.10", "", "1.60"), "0.70", "0.175", "2.80"),
		"gpt-4.1-nano":      priority(price("0.10", "0.025", "", "0.40"), "0.20", "0.05", "0.80"),
		"o3":                price("2.00", "0.50", "", "8.00"),
		"o3-mini":           price("1.10", "0.55", "", "4.40"),
		"o4-mini":           price("1.10", "0.275", "", "4.40"),
		"gpt-5":             priority(price("1.25", "0.125", "", "10.00"), "2.50", "0.25", "20.00"),
		"gpt-5-mini":        priority(price("0.25", "0.025", "", "2.00"), "0.45", "0.045", "3.60"),
		"gpt-5-nano":        price("0.05", "0.005", "", "0.40"),
		// Variants at gpt-5's price, named apart.
		"gpt-5-codex":       priority(price("1.25", "0.125", "", "10.00"), "2.50", "0.25", "20.00"),
		"gpt-5-chat-latest": price("1.25", "0.125", "", "10.00"),
		// The -pro models are priced apart, without a cached-input price
		// (cached tokens are then charged as input).
		"gpt-5-pro": price("15.00", "", "", "120.00"),
		"o3-pro":    price("20.00", "", "", "80.00"),
	},
	"anthropic": {
		// Opus 4 and 4.1 kept the old $15/$75 tier; Opus 4.5 and later
		// cost $5/$25. "claude-opus-4" also catches "claude-opus-4-0" and
		// "claude-opus-4-20250514"; an unlisted later 4.x is priced at the
		// higher tier, which over-reserves rather than under-charges.
		"claude-opus-4":   price("15.00", "1.50", "18.75", "75.00"),
		"claude-opus-4-1": price("15.00", "1.50", "18.75", "75.00"),
		"claude-opus-4-5": price("5.00", "0.50", "6.25", "25.00"),
		"claude-opus-4-6": price("5.00", "0.50", "6.25", "25.00"),
		"claude-opus-4-7": price("5.00", "0.50", "6.25", "25.00"),
		// Sonnet 4 and 4.5 (one entry catches both) bill a request whose
		// prompt is above 200,000 tokens (the 1M-token context window) at
		// $6 in and $22.50 out for all its tokens, the cache multipliers
		// applying on top; Sonnet 4.6 bills its whole 1M window at the
		// standard price (platform.claude.com pricing, "Long context
		// pricing").
		"claude-sonnet-4": {
			Input: usd("3.00"), CachedInput: usd("0.30"), CacheWrite: usd("3.75"), Output: usd("15.00"),
			LongPromptTokens: 200_000,
			LongPrompt:       &Price{Input: usd("6.00"), Output: usd("22.50")},
		},
		"claude-sonnet-4-6": price("3.00", "0.30", "3.75", "15.00"),
		// Sonnet 5 and 5.5: $2 in, $10 out, cache read $0.20, 5-minute
		// cache write $2.50 (platform.claude.com, models/sonnet-5 and
		// models/sonnet-5-5 overviews, read 2026-11-30).
		"claude-sonnet-5":   price("2.00", "0.20", "2.50", "10.00"),
		"claude-sonnet-5-5": price("2.00", "0.20", "2.50", "10.00"),
		"claude-haiku-4-5":  price("1.00", "0.10", "1.25", "5.00"),
		"claude-3-5-haiku":  price("0.80", "0.08", "1.00", "4.00"),
		"claude-3-7-sonnet": price("3.00", "0.30", "3.75", "15.00"),
	},
	"gemini": {
		"gemini-2.5-pro": {
			Input: usd("1.25"), CachedInput: usd("0.125"), Output: usd("10.00"),
			LongPromptTokens: 200_000,
			LongPrompt:       &Price{Input: usd("2.50"), CachedInput: usd("0.25"), Output: usd("15.00")},
		},
		"gemini-2.5-flash":      price("0.30", "0.03", "", "2.50"),
		"gemini-2.5-flash-lite": price("0.10", "0.01", "", "0.40"),
	},
}
