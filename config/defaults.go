package config

import (
	"fmt"
	"time"
)

// Default timeouts.
const (
	DefaultConnect     = 10 * time.Second
	DefaultFirstByte   = 120 * time.Second
	DefaultFirstToken  = 60 * time.Second
	DefaultIdle        = 60 * time.Second
	DefaultHeaderRead  = 10 * time.Second
	DefaultBodyRead    = 60 * time.Second
	DefaultClientIdle  = 120 * time.Second
	DefaultClientWrite = 60 * time.Second
	DefaultShutdown    = 10 * time.Second
)

// Default returns the configuration used when there is no file: listen on
// 127.0.0.1:4000, the embedded store sqlite://belay.db in the working
// directory, the built-in simulator (healthy, seed 1) as upstream, and two
// model aliases, each with a primary and a fallback simulator deployment:
//
//	gpt-4o-mini        openai dialect:    openai/gpt-4o-mini#0, openai/gpt-4o-mini#1
//	claude-sonnet-5-5  anthropic dialect: anthropic/claude-sonnet-5-5#0, anthropic/claude-sonnet-5-5#1
//
// No tenants are configured, so the gateway is open (tenant "default"), and
// runs are limited to 20 turns, 5 minutes and $1.00 (the values of the
// design sketch). Each call returns a new *Config.
func Default() *Config {
	c := &Config{
		Models: defaultModels(),
		Limits: DefaultLimits(),
	}
	c.applyDefaults()
	return c
}

// DefaultLimits are the run limits of Default, and of a config file without
// a limits section: 20 turns, 5 minutes, $1.00 per run (the values of the
// design sketch).
func DefaultLimits() Limits {
	return Limits{MaxTurns: 20, Deadline: Duration(5 * time.Minute), MaxCostUSD: USD(1_000_000_000_000)}
}

func defaultModels() []Model {
	sim := func(provider, model string) Model {
		return Model{Alias: model, Deployments: []Deployment{
			{Provider: provider, Model: model, BaseURL: SimBaseURL},
			{Provider: provider, Model: model, BaseURL: SimBaseURL},
		}}
	}
	return []Model{sim(ProviderOpenAI, "gpt-4o-mini"), sim(ProviderAnthropic, "claude-sonnet-5-5")}
}

// applyDefaults fills every zero field that has a default.
func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Store == "" {
		c.Store = DefaultStore
	}
	if c.Capture == "" {
		c.Capture = DefaultCapture
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxUpstreamBodyBytes == 0 {
		c.MaxUpstreamBodyBytes = DefaultMaxUpstreamBodyBytes
	}
	if len(c.Models) == 0 {
		c.Models, c.ModelsDefaulted = defaultModels(), true
	}
	for i := range c.Models {
		for j := range c.Models[i].Deployments {
			d := &c.Models[i].Deployments[j]
			if d.Name == "" {
				d.Name = fmt.Sprintf("%s/%s#%d", d.Provider, d.Model, j)
			}
			if d.BaseURL == "" {
				switch d.Provider {
				case ProviderOpenAI:
					d.BaseURL = OpenAIBaseURL
				case ProviderAnthropic:
					d.BaseURL = AnthropicBaseURL
				}
			}
		}
	}
	for i := range c.Tenants {
		if c.Tenants[i].Budget.Period == "" {
			c.Tenants[i].Budget.Period = PeriodMonth
		}
	}
	if c.Sim.Seed == 0 {
		c.Sim.Seed = 1
	}
	t := &c.Timeouts
	setDur(&t.Connect, DefaultConnect)
	setDur(&t.FirstByte, DefaultFirstByte)
	setDur(&t.FirstToken, DefaultFirstToken)
	setDur(&t.Idle, DefaultIdle)
	setDur(&t.HeaderRead, DefaultHeaderRead)
	setDur(&t.BodyRead, DefaultBodyRead)
	setDur(&t.ClientIdle, DefaultClientIdle)
	setDur(&t.ClientWrite, DefaultClientWrite)
	setDur(&t.Shutdown, DefaultShutdown)
}

func setDur(d *Duration, def time.Duration) {
	if *d == 0 {
		*d = Duration(def)
	}
}

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)
