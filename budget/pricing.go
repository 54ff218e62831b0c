package budget

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrUnknownModel is returned by Pricing for a model that has no price and
// no default price is configured. The run layer then charges the step's
// reserved estimate and marks the cost estimated; it never charges $0.
var ErrUnknownModel = errors.New("budget: no price for model")

// Price is what a model costs, in USD per million tokens.
//
// Cost prices every part of a Usage once:
//
//	(input − cached − cacheWrite)·Input + cached·CachedInput +
//	(cacheWrite − cacheWrite1h)·CacheWrite + cacheWrite1h·CacheWrite1h +
//	output·Output
//
// Reasoning tokens are part of the output and are billed at Output, as
// OpenAI, Anthropic and Google bill them; when Reasoning is set (non-zero)
// they are billed at Reasoning instead and the rest of the output at Output.
// A zero CachedInput or CacheWrite means the provider has no such discount
// or surcharge: those tokens are billed at Input. A zero CacheWrite1h bills
// 1-hour cache writes as other cache writes. (Pricing.Lookup fills the zero
// cache prices of a Claude model, one whose name starts with "claude",
// from its Input: see anthropicCache.) Anthropic bills a 5-minute
// cache write at 1.25× base input and a 1-hour one at 2× (Anthropic docs,
// "Prompt caching", pricing).
//
// LongPrompt, when set, applies to a request whose prompt (InputTokens) is
// above LongPromptTokens: every token of that request is priced at
// LongPrompt instead (Gemini 2.5 Pro above 200,000 prompt tokens).
type Price struct {
	Input        USD
	Output       USD
	CachedInput  USD
	CacheWrite   USD
	CacheWrite1h USD
	Reasoning    USD
	// WebSearchCall and FileSearchCall are per call, not per million
	// tokens: the fee of one call of the provider's built-in web search or
	// file search (Usage.WebSearchCalls, Usage.FileSearchCalls), billed on
	// top of the tokens the call adds to the prompt. A LongPrompt tier
	// charges the base price's fees.
	WebSearchCall  USD
	FileSearchCall USD

	LongPromptTokens int64
	LongPrompt       *Price

	// Priority, when set, is the price of a call that OpenAI served with
	// priority processing (an answer's service_tier "priority", or "fast",
	// its name since 2026-07-30): input, cached input and output per
	// million tokens, from https://openai.com/api-priority-processing/
	// (which excludes long-context requests; no entry with a LongPrompt
	// tier has one). Cost uses it for a Usage with Priority set; when it
	// is nil such a Usage is priced at the standard price, which is below
	// what the provider bills (Exact reports it).
	Priority *Price
}

// Exact reports whether Cost prices u at the price the provider bills
// for it: false for a priority call (Usage.Priority) of a price without
// a Priority tier.
func (p Price) Exact(u Usage) bool { return !u.Priority || p.Priority != nil }

// Cost returns the cost of u at p, rounded to the picodollar per part; a
// negative tool call count counts as none.
func (p Price) Cost(u Usage) USD {
	if u.Priority && p.Priority != nil {
		// The tier's token prices, the base price's per-call fees.
		t := *p.Priority
		t.WebSearchCall, t.FileSearchCall = p.WebSearchCall, p.FileSearchCall
		p = t
	}
	fees := p.WebSearchCall.Times(max(u.WebSearchCalls, 0)).Add(p.FileSearchCall.Times(max(u.FileSearchCalls, 0)))
	if p.LongPrompt != nil && u.InputTokens > p.LongPromptTokens {
		return p.LongPrompt.tokenCost(u).Add(fees)
	}
	return p.tokenCost(u).Add(fees)
}

// tokenCost is Cost without the per-call fees.
func (p Price) tokenCost(u Usage) USD {
	cached, write := p.CachedInput, p.CacheWrite
	if cached == 0 {
		cached = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	write1h := p.CacheWrite1h
	if write1h == 0 {
		write1h = write
	}
	// A 1-hour part above the whole write (a provider's bug) counts as the
	// whole write.
	long := min(max(u.CacheWrite1hTokens, 0), u.CacheWriteTokens)
	out := p.Output.MulTokens(u.OutputTokens)
	if p.Reasoning != 0 && u.ReasoningTokens > 0 {
		r := min(u.ReasoningTokens, u.OutputTokens)
		out = p.Output.MulTokens(u.OutputTokens - r).Add(p.Reasoning.MulTokens(r))
	}
	return p.Input.MulTokens(u.UncachedInputTokens()).
		Add(cached.MulTokens(u.CachedInputTokens)).
		Add(write.MulTokens(u.CacheWriteTokens - long)).
		Add(write1h.MulTokens(long)).
		Add(out)
}

func (p Price) validate() error {
	for _, v := range []USD{p.Input, p.Output, p.CachedInput, p.CacheWrite, p.CacheWrite1h, p.Reasoning, p.WebSearchCall, p.FileSearchCall} {
		if v < 0 {
			return fmt.Errorf("budget: price %s is negative", v)
		}
	}
	if p.Priority != nil {
		if p.Priority.LongPrompt != nil || p.Priority.Priority != nil {
			return errors.New("budget: a priority price cannot have its own long_prompt or priority tier")
		}
		if err := p.Priority.validate(); err != nil {
			return err
		}
	}
	if p.LongPrompt != nil {
		if p.LongPromptTokens <= 0 {
			return errors.New("budget: long_prompt needs long_prompt_tokens above 0")
		}
		if p.LongPrompt.LongPrompt != nil || p.LongPrompt.Priority != nil {
			return errors.New("budget: long_prompt cannot nest")
		}
		return p.LongPrompt.validate()
	}
	return nil
}

// Match says how Pricing.Lookup found a price.
type Match struct {
	// Provider and Model are the table entry that matched (Model is the
	// entry's name, a prefix of the requested model for a dated snapshot).
	Provider, Model string
	// Default is true when no entry matched and the configured default
	// price was used: the cost is then an estimate.
	Default bool
}

// Pricing is a price table keyed by provider and model. Build one with
// NewPricing; DefaultPricing returns the shipped list prices. A Pricing is
// immutable and safe for concurrent use.
//
// Provider names are OpenTelemetry gen_ai.provider.name values or short
// forms: "openai" (also "azure", "azure.ai.openai"), "anthropic", "gemini"
// (also "gcp.gemini", "gcp.vertex_ai", "google", "vertex"). An empty provider
// matches every provider.
//
// Model names match exactly, else by the longest table entry that is a
// prefix of the name followed by a non-alphanumeric character, so dated
// snapshots find their family: "gpt-4o-2024-08-06" → "gpt-4o",
// "claude-sonnet-4-5-20250929" → "claude-sonnet-4-5". Matching is
// case-insensitive.
type Pricing struct {
	prices map[string]map[string]Price // provider → model → price
	def    *Price
	// found caches Lookup's results by provider and model as given, up to
	// maxFound of them (the table does not change after NewPricing).
	found  sync.Map // lookupKey → lookupResult
	nFound atomic.Int64
}

// maxFound bounds Pricing's lookup cache: the names a process prices are
// its deployments' few; past that many, lookups are not cached.
const maxFound = 1024

type lookupKey struct{ provider, model string }

type lookupResult struct {
	price Price
	match Match
	err   error
}

// PricingOptions configures NewPricing. The zero value gives the shipped
// defaults with no default price for unknown models.
type PricingOptions struct {
	// Overrides replace or add prices. A key is "model" (the model under
	// every provider that lists it, or under provider "" when none does) or
	// "provider/model". An override that sets only per-call fees
	// (WebSearchCall, FileSearchCall) or a Priority tier keeps the table's
	// token prices of the model; for a model the table lacks it is an
	// error.
	Overrides map[string]Price
	// Default, when set, is the price of a model the table does not know;
	// Lookup reports Match.Default. When nil, such a model is
	// ErrUnknownModel.
	Default *Price
	// NoBuiltin starts from an empty table instead of the shipped prices.
	NoBuiltin bool
}

// NewPricing builds a table from the shipped prices and o. It returns an
// error naming the first negative or malformed price.
func NewPricing(o PricingOptions) (*Pricing, error) {
	p := &Pricing{prices: map[string]map[string]Price{}}
	if !o.NoBuiltin {
		for prov, models := range builtinPrices {
			for m, pr := range models {
				p.set(prov, m, pr)
			}
		}
	}
	for key, pr := range o.Overrides {
		if err := pr.validate(); err != nil {
			return nil, fmt.Errorf("%w (pricing %q)", err, key)
		}
		prov, model, ok := strings.Cut(key, "/")
		if !ok {
			prov, model = "", key
		}
		if model == "" {
			return nil, fmt.Errorf("budget: pricing key %q names no model", key)
		}
		feesOnly := pr.feesOnly()
		if prov != "" {
			prov = normProvider(prov)
			if feesOnly {
				old, ok := p.prices[prov][strings.ToLower(model)]
				if !ok {
					return nil, fmt.Errorf("%w (pricing %q)", errFeesOnly, key)
				}
				pr = old.withFees(pr)
			}
			p.set(prov, model, pr)
			continue
		}
		found := false
		for prov, models := range p.prices {
			if old, ok := models[strings.ToLower(model)]; ok && prov != "" {
				if feesOnly {
					models[strings.ToLower(model)] = old.withFees(pr)
				} else {
					models[strings.ToLower(model)] = pr
				}
				found = true
			}
		}
		if !found {
			if feesOnly {
				return nil, fmt.Errorf("%w (pricing %q)", errFeesOnly, key)
			}
			p.set("", model, pr)
		}
	}
	if o.Default != nil {
		if err := o.Default.validate(); err != nil {
			return nil, fmt.Errorf("%w (default price)", err)
		}
		d := *o.Default
		p.def = &d
	}
	return p, nil
}

// errFeesOnly refuses an override that sets only per-call fees for a
// model the table has no token prices for: its tokens would be free.
var errFeesOnly = errors.New("budget: a price that sets only web_search_call, file_search_call or priority needs a model the built-in table prices; give its input and output prices too")

// feesOnly reports whether p sets per-call fees or a priority tier and
// no standard token price: an override of a table entry's fees or
// priority tier, which keeps the entry's token prices (see NewPricing).
func (p Price) feesOnly() bool {
	return (p.WebSearchCall != 0 || p.FileSearchCall != 0 || p.Priority != nil) && p.Input == 0 && p.Output == 0 &&
		p.CachedInput == 0 && p.CacheWrite == 0 && p.CacheWrite1h == 0 && p.Reasoning == 0 && p.LongPrompt == nil
}

// withFees returns p with the per-call fees and the priority tier fees
// sets.
func (p Price) withFees(fees Price) Price {
	if fees.Priority != nil {
		p.Priority = fees.Priority
	}
	if fees.WebSearchCall != 0 {
		p.WebSearchCall = fees.WebSearchCall
	}
	if fees.FileSearchCall != 0 {
		p.FileSearchCall = fees.FileSearchCall
	}
	return p
}

// DefaultPricing returns the shipped list prices with no default price.
func DefaultPricing() *Pricing {
	p, err := NewPricing(PricingOptions{})
	if err != nil {
		panic(err) // the shipped table is valid; a test checks it
	}
	return p
}

func (p *Pricing) set(provider, model string, pr Price) {
	m := p.prices[provider]
	if m == nil {
		m = map[string]Price{}
		p.prices[provider] = m
	}
	m[strings.ToLower(model)] = pr
}

// Lookup returns the price of model under provider: an exact entry, else
// the longest prefix entry (see Pricing), else the default price. Entries
// under provider "" (overrides without a provider) match any provider. It
// returns an error wrapping ErrUnknownModel when nothing matches. Results
// are cached (for the first 1024 provider and model names asked); safe for
// concurrent use.
func (p *Pricing) Lookup(provider, model string) (Price, Match, error) {
	k := lookupKey{provider, model}
	if v, ok := p.found.Load(k); ok {
		r := v.(*lookupResult)
		return r.price, r.match, r.err
	}
	price, match, err := p.lookup(provider, model)
	if p.nFound.Load() < maxFound {
		if _, loaded := p.found.LoadOrStore(k, &lookupResult{price, match, err}); !loaded {
			p.nFound.Add(1)
		}
	}
	return price, match, err
}

func (p *Pricing) lookup(provider, model string) (Price, Match, error) {
	provider, model = normProvider(provider), strings.ToLower(strings.TrimSpace(model))
	var provs []string
	if provider == "" {
		for k := range p.prices {
			provs = append(provs, k)
		}
	} else {
		provs = []string{provider, ""}
	}
	best, bestLen := Match{}, -1
	var price Price
	for _, prov := range provs {
		for name, pr := range p.prices[prov] {
			if !matches(model, name) {
				continue
			}
			// Longest name wins; on a tie the provider's own entry wins,
			// then the lexically smaller provider, so the result is stable.
			if len(name) > bestLen || (len(name) == bestLen && tieBreak(prov, best.Provider, provider)) {
				best, bestLen, price = Match{Provider: prov, Model: name}, len(name), pr
			}
		}
	}
	switch {
	case bestLen < 0 && p.def == nil:
		return Price{}, Match{}, fmt.Errorf("%w %q (provider %q)", ErrUnknownModel, model, provider)
	case bestLen < 0:
		price, best = *p.def, Match{Default: true}
	}
	if strings.HasPrefix(model, "claude") {
		// A Claude model's cache prices follow from its input price
		// (anthropicCache), whatever entry gave the price; not those of
		// another model served over Anthropic's API (Kimi, DeepSeek).
		price = anthropicCache(price)
	}
	return toolFees(provider, price), best, nil
}

// toolFees fills the per-call fees p leaves at zero with the provider's
// list fees for its built-in tools, checked 2026-12-01:
//
//   - OpenAI (https://platform.openai.com/docs/pricing, "Built-in tools"):
//     web search $10.00 per 1,000 calls, file search $2.50 per 1,000 calls.
//     The older web_search_preview tool on a non-reasoning model is billed
//     $25.00 per 1,000 calls: set WebSearchCall to 0.025 for such a model.
//   - Anthropic (https://platform.claude.com/docs/en/about-claude/pricing,
//     "Web search tool"): $10 per 1,000 searches.
//
// Other providers' prices are returned as they are.
func toolFees(provider string, p Price) Price {
	switch provider {
	case "openai":
		p.WebSearchCall, p.FileSearchCall = cmp.Or(p.WebSearchCall, listWebSearch), cmp.Or(p.FileSearchCall, listFileSearch)
	case "anthropic":
		p.WebSearchCall = cmp.Or(p.WebSearchCall, listWebSearch)
	}
	return p
}

// The list fees toolFees fills in, parsed once.
var (
	listWebSearch  = usd("0.01")
	listFileSearch = usd("0.0025")
)

func tieBreak(cand, cur, want string) bool {
	if cand == want && cur != want {
		return true
	}
	if cur == want {
		return false
	}
	return cand < cur
}

// matches reports whether entry prices model: equal, or entry followed by
// a snapshot or version of it, whose segments (separated by any byte but
// a lower-case letter or a digit: '-', ':', '@') are each all digits (a
// date, 2024-08-06 or 20250514; a minor version, claude-sonnet-4-5), v
// and digits, "latest", "preview" or "exp". A '.' begins a point release
// (gpt-5.2 of gpt-5), priced apart: no match. Any other segment names another
// product at another price (gpt-5-pro is not gpt-5, o4-mini-deep-research
// is not o4-mini, gpt-4o-audio-preview is not gpt-4o: an adversarial
// review found gpt-5-pro charged a twelfth of its price), so such a model
// is unpriced unless an entry of its own prices it.
func matches(model, entry string) bool {
	if !strings.HasPrefix(model, entry) {
		return false
	}
	rest := model[len(entry):]
	if rest == "" {
		return true
	}
	if alnum(rest[0]) || strings.Contains(rest, ".") { // ".": a point release (gpt-5.2), priced apart
		return false
	}
	for _, seg := range strings.FieldsFunc(rest, func(r rune) bool { return r < 0x80 && !alnum(byte(r)) }) {
		if !snapshotTag(seg) {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// snapshotTag reports whether seg names a snapshot or version of a model:
// all digits, v and digits, "latest", "preview" or "exp".
func snapshotTag(seg string) bool {
	switch seg {
	case "latest", "preview", "exp":
		return true
	}
	digits := strings.TrimPrefix(seg, "v")
	if digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
}

func normProvider(p string) string {
	switch p = strings.ToLower(strings.TrimSpace(p)); p {
	case "azure", "azure.ai.openai", "azure_openai", "azure-openai":
		return "openai"
	case "gcp.gemini", "gcp.vertex_ai", "google", "vertex", "vertex_ai", "vertexai", "google-ai":
		return "gemini"
	}
	return p
}

// Cost returns the cost of usage u for model under provider at the matched
// price (see Lookup). With a default price configured an unknown model is
// priced at it; use Lookup to learn whether that happened. Without one, an
// unknown model is an error wrapping ErrUnknownModel and a zero cost.
func (p *Pricing) Cost(provider, model string, u Usage) (USD, error) {
	pr, _, err := p.Lookup(provider, model)
	if err != nil {
		return 0, err
	}
	return pr.Cost(u), nil
}

// Estimate returns the amount to reserve before a call that writes
// nothing into a prompt cache: promptTokens of uncached input plus
// maxTokens of output at list price, the most such a call can cost (cache
// reads only lower it). maxTokens is the request's max_tokens /
// max_output_tokens; when the request has none, pass the model's output
// limit or a configured default, never 0, or the reservation will not
// cover the output. A call that may write its prompt into a cache costs
// more: use EstimateWrites.
func (p *Pricing) Estimate(provider, model string, promptTokens, maxTokens int64) (USD, error) {
	return p.EstimateWrites(provider, model, promptTokens, maxTokens, NoCacheWrites)
}

// CacheWrites is what a request may write into the provider's prompt cache,
// which is billed above uncached input (Anthropic: a 5-minute write 1.25×
// input, a 1-hour write 2×).
type CacheWrites uint8

const (
	NoCacheWrites CacheWrites = iota // no cache_control: nothing is written
	CacheWrites5m                    // cache_control with the default 5-minute lifetime
	CacheWrites1h                    // some cache_control with "ttl": "1h"
)

// EstimateWrites is Estimate for a request that may write its whole
// prompt into the cache (w): the prompt is priced at the dearer of input
// and the cache write price w names, the most the call can cost.
func (p *Pricing) EstimateWrites(provider, model string, promptTokens, maxTokens int64, w CacheWrites) (USD, error) {
	return p.EstimateAsk(provider, model, Ask{PromptTokens: promptTokens, MaxOutputTokens: maxTokens, Writes: w})
}

// Ask is what a request may cost, as EstimateAsk prices it.
type Ask struct {
	PromptTokens    int64       // the prompt, all of it uncached
	MaxOutputTokens int64       // the output limit (see Estimate)
	Writes          CacheWrites // what the prompt may write into the cache
	// Priority asks for priority processing (OpenAI's service_tier
	// "priority" or "fast"): priced at Price.Priority.
	Priority bool
}

// EstimateAsk returns the most a's call can cost on provider's model:
// its prompt priced at the dearer of input and the cache write price
// a.Writes names, its output limit at the output price, both at the
// priority tier when a.Priority is set. It returns an error wrapping
// ErrUnknownModel for a model without a price; a priority ask of a model
// without a priority price is priced at the standard price (see
// Price.Exact: the caller refuses such a request).
func (p *Pricing) EstimateAsk(provider, model string, a Ask) (USD, error) {
	pr, _, err := p.Lookup(provider, model)
	if err != nil {
		return 0, err
	}
	prompt := max(a.PromptTokens, 0)
	u := Usage{InputTokens: prompt, OutputTokens: max(a.MaxOutputTokens, 0), Priority: a.Priority}
	if a.Writes == NoCacheWrites {
		return pr.Cost(u), nil
	}
	written := u
	written.CacheWriteTokens = prompt
	if a.Writes == CacheWrites1h {
		written.CacheWrite1hTokens = prompt
	}
	return max(pr.Cost(u), pr.Cost(written)), nil
}
