// Package store defines what belay keeps: runs, spans, the budget ledger,
// idempotency records, approvals, kill flags and golden traces. Backends are
// store/sqlite (embedded, the default) and store/postgres (shared by several
// replicas); store/storetest is the conformance suite both pass.
//
// Every method is safe for concurrent use. Every write is atomic: it is
// applied whole or not at all.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/trace"
)

// ErrNotFound is returned for a run, approval or golden trace that does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrConflict is returned when a write loses to a concurrent one (an approval
// decided twice, an idempotency record completed by another owner).
var ErrConflict = errors.New("store: conflict")

// Store is everything belay keeps. Open one with store/open.Open(url).
type Store interface {
	budget.Ledger
	Runs
	Spans
	Idempotency
	Approvals
	Kills
	Goldens
	// Close releases connections. Further calls fail.
	Close() error
}

// RunStatus is a run's state. A run is "running" until it ends
// "succeeded", "failed" or "stopped" (with a StopReason).
type RunStatus string

const (
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunStopped   RunStatus = "stopped"
)

// Limits bound a run. Zero means unlimited for each field.
type Limits struct {
	MaxTurns  int           `json:"max_turns,omitempty"`
	Deadline  time.Duration `json:"deadline,omitempty"`
	MaxTokens int64         `json:"max_tokens,omitempty"`
	MaxCost   budget.USD    `json:"max_cost,omitempty"`
}

// Run is the stored record of one run, with its counters.
type Run struct {
	ID            string            `json:"id"`
	Tenant        string            `json:"tenant"`
	Agent         string            `json:"agent,omitempty"`
	AgentVersion  string            `json:"agent_version,omitempty"`
	PromptVersion string            `json:"prompt_version,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Limits        Limits            `json:"limits"`
	Status        RunStatus         `json:"status"`
	StopReason    string            `json:"stop_reason,omitempty"`
	Error         string            `json:"error,omitempty"`
	Started       time.Time         `json:"started"`
	Ended         time.Time         `json:"ended,omitzero"`
	Turns         int               `json:"turns"`
	ToolCalls     int               `json:"tool_calls"`
	InputTokens   int64             `json:"input_tokens"`
	OutputTokens  int64             `json:"output_tokens"`
	Cost          budget.USD        `json:"cost"`
	// CostEstimated: some of Cost is an estimate (a stream cut or an
	// attempt lost without the provider's usage, a model without a
	// price); a store keeps it once set.
	CostEstimated bool `json:"cost_estimated,omitempty"`
}

// RunFilter selects runs for ListRuns; zero fields match everything. Runs
// come newest first; Limit 0 means 100.
type RunFilter struct {
	Tenant string
	Agent  string // the run's Agent, exactly
	Status RunStatus
	Since  time.Time // runs started at or after it; zero: no bound
	Before time.Time // runs started before it; zero: no bound
	Limit  int
}

// Runs stores run records.
type Runs interface {
	// CreateRun inserts r; an existing id is ErrConflict.
	CreateRun(ctx context.Context, r Run) error
	// UpdateRun replaces the stored record of r.ID (ErrNotFound if absent).
	UpdateRun(ctx context.Context, r Run) error
	GetRun(ctx context.Context, id string) (Run, error)
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
}

// ErrRunEnded is returned by RunSaver.SaveRun when a running record would
// overwrite a stored one that has ended.
var ErrRunEnded = errors.New("store: the stored run has ended")

// RunSaver is implemented by stores that write a run record and what it is
// checked against in one atomic write (the stores belay ships). Several
// processes serving one run each write its record: the write must neither
// lower the counts the ledger holds for every process nor undo an ending
// another process wrote.
type RunSaver interface {
	// SaveRun replaces the stored record of r.ID by r (except its Tenant
	// and Started, which a run keeps from its creation), with r.Turns
	// raised to Settled+Reserved of the ledger scope turns and r.Cost
	// raised to Settled of the scope cost (a scope with no balance, or
	// "", raises nothing), and r's token counts never below the stored
	// ones (the writer raises them to the ledger's: a process that read
	// the ledger earlier must not lower a later count). When r is running and the stored record has
	// ended, nothing is written and the error wraps ErrRunEnded; an absent
	// record is ErrNotFound.
	SaveRun(ctx context.Context, r Run, turns, cost budget.Scope) error
}

// RunSpender is implemented by stores that create a run record together
// with the spends it made (the stores belay ships): the whole record of a
// run that no other process knew (the gateway's run of one call) in one
// write.
type RunSpender interface {
	// CreateRunSpent creates r and applies spends in one transaction. Each
	// spend is a budget.Reservation with Spend set, checked and added to
	// its scopes as ReserveAll does, and not kept by id (its ID may be
	// empty). The creation makes the write safe to repeat: when r.ID is
	// stored, nothing is written and the error wraps ErrConflict. A spend
	// that does not fit writes nothing either (budget.ErrExceeded).
	CreateRunSpent(ctx context.Context, r Run, spends []budget.Reservation) error
}

// RunPruner is implemented by stores that delete old runs (the stores belay
// ships). A store that serves a gateway for months holds a record, its
// spans and its ledger scopes for every call; `belay runs prune` deletes
// the old ones.
type RunPruner interface {
	// PruneRuns deletes, in one transaction, up to max runs that ended
	// before before, oldest first (a running record is never deleted),
	// with their spans and the ledger scopes scopes(id) names (their
	// balances and alert marks), and returns how many runs it deleted.
	// Tenants' scopes, open reservations, approvals, kill flags,
	// idempotency keys and golden traces (which keep their own copy) are
	// kept. max must be at least 1.
	PruneRuns(ctx context.Context, before time.Time, max int, scopes func(runID string) []budget.Scope) (int, error)
}

// Spans stores trace spans.
type Spans interface {
	// WriteSpans stores a batch in one transaction. A span whose RunID and
	// SpanID are already stored replaces it (a span may be written when it
	// starts and again when it ends). Span ids are random (trace.NewID):
	// one span id under two runs is not supported.
	WriteSpans(ctx context.Context, spans []trace.Span) error
	// RunSpans returns a run's spans ordered by start time, then span id.
	RunSpans(ctx context.Context, runID string) ([]trace.Span, error)
}

// ClaimState is the state of an idempotency key after Claim.
type ClaimState string

const (
	// ClaimNew: the caller now owns the key and must run the effect, then
	// Complete it.
	ClaimNew ClaimState = "new"
	// ClaimCompleted: the effect already ran; Result holds its stored result.
	ClaimCompleted ClaimState = "completed"
	// ClaimInFlight: another live owner holds the key (its lease has not
	// expired).
	ClaimInFlight ClaimState = "in_flight"
	// ClaimExpired: an owner took the key and its lease expired without
	// completing: the effect may or may not have happened (outcome unknown).
	// Claim does not take such a key; TakeOver does.
	ClaimExpired ClaimState = "expired"
)

// Claim is the answer to an idempotency claim.
type Claim struct {
	Key      string
	State    ClaimState
	Owner    string // the owner holding or having completed the key
	Result   []byte // for ClaimCompleted
	IsError  bool   // the stored result is a failure the tool returned
	LeaseEnd time.Time
}

// Idempotency is the ledger of tool side effects.
type Idempotency interface {
	// Claim takes key for owner with a lease until now+lease if it is free,
	// and otherwise reports what holds it.
	Claim(ctx context.Context, key, owner string, lease time.Duration, now time.Time) (Claim, error)
	// Lookup reports key's state at now, as Claim reports a key it does
	// not take, without taking it: ErrNotFound when no record holds it.
	Lookup(ctx context.Context, key string, now time.Time) (Claim, error)
	// TakeOver takes an expired key for owner (for tools declared safe to
	// repeat); it is ErrConflict if the key is not expired.
	TakeOver(ctx context.Context, key, owner string, lease time.Duration, now time.Time) (Claim, error)
	// Complete stores the result of the effect; only the owner may complete
	// (ErrConflict otherwise).
	Complete(ctx context.Context, key, owner string, result []byte, isError bool) error
	// Abandon frees a key whose effect is known not to have happened (the
	// tool failed before any side effect), so a later claim runs it.
	Abandon(ctx context.Context, key, owner string) error
}

// ApprovalState is the state of an approval request.
type ApprovalState string

const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalDenied   ApprovalState = "denied"
	ApprovalExpired  ApprovalState = "expired"
)

// Approval is a request for a human (or a rule) to allow an irreversible
// tool call, stored with the exact arguments.
type Approval struct {
	ID        string        `json:"id"`
	RunID     string        `json:"run_id"`
	Tenant    string        `json:"tenant"`
	Tool      string        `json:"tool"`
	Arguments []byte        `json:"arguments"`
	State     ApprovalState `json:"state"`
	Requested time.Time     `json:"requested"`
	Decided   time.Time     `json:"decided,omitzero"`
	DecidedBy string        `json:"decided_by,omitempty"`
	Note      string        `json:"note,omitempty"`
}

// MarshalJSON writes Arguments as the JSON they hold (tool arguments are a
// JSON object), not as base64; arguments that are not valid JSON are
// written as a string.
func (a Approval) MarshalJSON() ([]byte, error) {
	type plain Approval
	var args any // null when there are none
	switch {
	case json.Valid(a.Arguments):
		args = json.RawMessage(a.Arguments)
	case a.Arguments != nil:
		args = string(a.Arguments)
	}
	return json.Marshal(struct {
		plain
		Arguments any `json:"arguments"`
	}{plain(a), args})
}

// UnmarshalJSON reads what MarshalJSON writes: arguments given as a JSON
// string are that string's text, any other JSON value is kept as written.
func (a *Approval) UnmarshalJSON(b []byte) error {
	type plain Approval
	var v struct {
		plain
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Approval(v.plain)
	var text string
	switch {
	case len(v.Arguments) == 0 || string(v.Arguments) == "null":
		a.Arguments = nil
	case v.Arguments[0] == '"' && json.Unmarshal(v.Arguments, &text) == nil:
		a.Arguments = []byte(text)
	default:
		a.Arguments = []byte(v.Arguments)
	}
	return nil
}

// Approvals is the stored approval queue.
type Approvals interface {
	CreateApproval(ctx context.Context, a Approval) error
	GetApproval(ctx context.Context, id string) (Approval, error)
	// ListApprovals returns approvals in state (all when empty), oldest first.
	ListApprovals(ctx context.Context, state ApprovalState) ([]Approval, error)
	// DecideApproval moves a pending approval to state (approved, denied or
	// expired) once and returns it; deciding a decided approval is
	// ErrConflict, returned with the approval as stored (its state and
	// who decided it).
	DecideApproval(ctx context.Context, id string, state ApprovalState, by, note string, at time.Time) (Approval, error)
}

// KillTarget is what a kill flag applies to.
type KillTarget string

const (
	KillAll        KillTarget = "all"
	KillRun        KillTarget = "run"
	KillTenant     KillTarget = "tenant"
	KillTool       KillTarget = "tool"
	KillModel      KillTarget = "model"      // a model alias or model name
	KillDeployment KillTarget = "deployment" // one deployment
)

// Kill is one kill flag. Name is empty for KillAll.
type Kill struct {
	Target KillTarget `json:"target"`
	Name   string     `json:"name"`
	Reason string     `json:"reason,omitempty"`
	By     string     `json:"by,omitempty"`
	At     time.Time  `json:"at"`
}

// Kills stores kill flags. Backends that can push changes (PostgreSQL
// LISTEN/NOTIFY) also implement KillWatcher.
type Kills interface {
	SetKill(ctx context.Context, k Kill) error
	ClearKill(ctx context.Context, target KillTarget, name string) error
	ListKills(ctx context.Context) ([]Kill, error)
}

// KillWatcher is implemented by stores that push kill flag changes; the
// channel receives a value after any change and is closed when ctx ends.
type KillWatcher interface {
	WatchKills(ctx context.Context) (<-chan struct{}, error)
}

// Goldens stores named golden traces (canonical span lists).
type Goldens interface {
	SaveGolden(ctx context.Context, name string, runID string, canonical []byte) error
	Golden(ctx context.Context, name string) (canonical []byte, runID string, err error)
	// ListGoldens returns every stored golden, by name ascending.
	ListGoldens(ctx context.Context) ([]GoldenInfo, error)
	// DeleteGolden removes golden name; ErrNotFound when there is none.
	DeleteGolden(ctx context.Context, name string) error
}

// GoldenInfo describes a stored golden trace: its name, the run it was
// saved from, and the size of its canonical form in bytes.
type GoldenInfo struct {
	Name  string `json:"name"`
	RunID string `json:"run_id"`
	Bytes int64  `json:"bytes"`
}

type deferrableKey struct{}

// Deferrable marks the writes made with ctx as off any request path (a
// settle or a record write done in the background): a store may hold such
// a write for a moment so that it shares a transaction with others
// (store/sqlite: up to 25 ms, see Hurrier), and lets writes not so marked
// go first. The write still happens before the call returns.
func Deferrable(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferrableKey{}, true)
}

// Hurrier is a store that may hold Deferrable writes (store/sqlite).
// Hurry asks it to run the ones it holds, and those that come before it
// next runs a batch, without waiting further: a caller about to wait for
// such writes (run.Run.Flush) calls it. Safe for concurrent use.
type Hurrier interface{ Hurry() }

// IsDeferrable reports whether ctx was marked by Deferrable.
func IsDeferrable(ctx context.Context) bool {
	v, _ := ctx.Value(deferrableKey{}).(bool)
	return v
}
