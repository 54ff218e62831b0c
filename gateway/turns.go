package gateway

import (
	"context"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/route"
)

// Turns is the run layer as the gateway uses it: admit one model call (a
// turn) of a run, then settle it. Implementations must be safe for
// concurrent use. RunTurns adapts a run.Manager.
type Turns interface {
	// Admit identifies the run (creating it on its first turn), checks the
	// kill switch, the turns left, the deadline and the money left, and
	// reserves the estimated cost of the call. A refusal is a Fatal
	// *failure.Error (budget_exceeded, max_turns_exceeded,
	// deadline_exceeded, killed). Any other error is taken for a store
	// failure: the gateway answers 503 store_unavailable, which the
	// client's SDK may retry.
	//
	// The Turn's context must be canceled with a *failure.Error cause when
	// the run layer ends the call (kill, run stopped, run deadline): the
	// gateway answers with that cause rather than "canceled".
	Admit(ctx context.Context, a Admission) (Turn, error)
}

// Admission describes one model call about to be made.
type Admission struct {
	// RunID names the run; the gateway makes a new one when the client
	// sent no X-Belay-Run-Id (then Named is true).
	RunID string
	Named bool
	// Tenant is the tenant's name ("default" for an open gateway).
	Tenant string
	// Agent is X-Belay-Agent ("" when not sent): the agent of a run the
	// call starts. A run's agent is fixed when it starts (by its first
	// call, or by belay eval for its runs): a later call's is not applied.
	Agent string
	// TenantBudget is the tenant's budget (zero USD: unlimited).
	TenantBudget config.TenantBudget
	// Limits are the run's effective limits: the tenant's, lowered by the
	// request's X-Belay-* headers.
	Limits config.Limits
	// Alias is the model alias the client named; Dialect the client's;
	// API the OpenAI API it called ("chat_completions", "responses"; ""
	// for Anthropic's), for the step's span.
	Alias   string
	Dialect string
	API     string
	// Chain is the alias's deployments in the client's dialect, in order;
	// the reservation is priced on the most expensive of them.
	Chain []route.Deployment
	// PromptTokens is the estimated prompt size; MaxOutputTokens the
	// request's output limit (0 when unset).
	PromptTokens    int64
	MaxOutputTokens int64
	// OutputLimitField names the request member that sets
	// MaxOutputTokens in the client's dialect ("max_tokens",
	// "max_output_tokens"), for a refusal's advice; "" reads as
	// max_tokens.
	OutputLimitField string
	// CacheWrites is what the call may write into the provider's prompt
	// cache (its prompt is then reserved at the write price).
	CacheWrites budget.CacheWrites
	// WebSearches and FileSearches are the calls of the provider's
	// built-in tools the request declares that the reservation holds the
	// per-call fees of (budget.Price.WebSearchCall, FileSearchCall): a
	// Responses request's max_tool_calls, an Anthropic web search tool's
	// max_uses, else one per tool.
	WebSearches, FileSearches int64
	Stream                    bool
	// Priority is true when the request asks for priority processing
	// (OpenAI's service_tier "priority" or "fast"): the reservation is
	// priced at the deployments' priority prices (budget.Price.Priority).
	Priority bool
}

// Turn is one admitted model call.
type Turn interface {
	// Context is the call's context: derived from the one given to Admit,
	// and done also when the run is killed or stopped.
	Context() context.Context
	// Deadline is when the run must end; zero when it has no deadline.
	Deadline() time.Time
	// Limits are the run's limits, fixed by its first request: the
	// Admission's Limits for a run this call started, the run's own for a
	// later call (whatever that call's X-Belay-* headers asked).
	Limits() config.Limits
	// Agent is the run's agent, fixed by its first call ("" for none):
	// the Admission's Agent for a run this call started.
	Agent() string
	// Quote returns the cost Settle(ctx, o) will charge, without charging
	// it, and whether Settle may wait until the client has its answer
	// (later false: the charge must land first, so that the client's next
	// call is admitted against it). From Quote until Settle returns,
	// flushing the runs (as readers of the store do) waits for the
	// settle. The gateway calls it at most once, before Settle: to send
	// the cost with the answer and settle after it, and for a stream as
	// its terminator goes out (the cost goes in the trailer), so that
	// the run's next call waits for the settle.
	Quote(o Outcome) (cost budget.USD, later bool)
	// Cover holds what charges (the attempts so far that used tokens)
	// cost and used, plus one more attempt's estimate (priced as the
	// admission's reservation), before the router retries or falls back:
	// a call's money and token limits hold for every attempt, not only
	// the first. A refusal is a Fatal budget_exceeded *failure.Error, and
	// no further attempt may be made; any other error is the store's.
	Cover(ctx context.Context, charges []Charge) error
	// Settle charges what the call used, releases the rest of the
	// reservation, records the step and its attempts, and returns the cost
	// charged. It must be called exactly once, also when the call failed.
	Settle(ctx context.Context, o Outcome) (budget.USD, error)
}

// Outcome is what one model call did.
type Outcome struct {
	// Charges are the usages to charge, one per attempt that used tokens
	// (the one that served, and any that failed after output started).
	Charges []Charge
	// Result is the router's record of the attempts.
	Result route.Result
	// Err is the final failure; nil when the call succeeded.
	Err error
	// TimeToFirstToken is the stream's time to first output (0 when not
	// a stream or no output).
	TimeToFirstToken time.Duration
	// InputMessages and OutputMessages are the call's payload as JSON, for
	// the trace (set only when capture is not off; the recorder redacts
	// them when capture is redacted).
	InputMessages, OutputMessages string
	// ResponseID, ResponseModel and FinishReasons are what the answer
	// said of itself (its id, its model, each choice's finish reason, a
	// response's status), for the trace; empty when unknown.
	ResponseID, ResponseModel string
	FinishReasons             []string
}

// Charge is one attempt's usage on one deployment.
type Charge struct {
	Deployment route.Deployment
	Usage      dialect.Usage
	// Estimated is true when the usage was estimated from output
	// characters (a cut or canceled stream that reported no usage).
	Estimated bool
}
