package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
)

// Env is what one run of an agent gets from the runner.
type Env struct {
	RunID    string
	Scenario string
	Index    int   // the run's number within its scenario, from 0
	Seed     int64 // the suite seed mixed with scenario and index
	Model    string
	Input    string
	// HTTPClient sends the agent's model calls through belay (in-process
	// transport, with the run id attached). BaseURL is the OpenAI-style base
	// URL to use with it ("…/v1").
	HTTPClient *http.Client
	BaseURL    string
	// Tools runs tool calls under the run: kill switch, approval for
	// irreversible tools, idempotency ledger, trace.
	Tools ToolRunner
	// World is the scenario's world fixture (JSON), WorldPath a file the
	// agent keeps its world state in, for the scenario's check.
	World     json.RawMessage
	WorldPath string
}

// ToolFunc performs a tool's effect; key is the idempotency key belay
// assigned to the call, to pass on to external systems.
type ToolFunc func(ctx context.Context, key string) (json.RawMessage, error)

// ToolRunner executes one tool call under the run.
type ToolRunner interface {
	RunTool(ctx context.Context, name, callID string, args json.RawMessage, fn ToolFunc) (json.RawMessage, error)
}

// Agent is an in-process Go agent. Run handles env.Input and returns the
// process-like exit code and output; an error is a crash of the agent (a
// failed run, not a failure of the runner).
type Agent interface {
	Run(ctx context.Context, env Env) (exitCode int, output string, err error)
}

// Checker is implemented by in-process agents that can inspect their world
// after a run: check is the scenario's `check` text, interpreted by the
// agent; a non-nil error is a failed check and says why.
type Checker interface {
	Check(ctx context.Context, env Env, check string) error
}

// CheckParser is implemented by a Checker that can tell, before any run,
// a check text it cannot read: Run refuses the suite (ErrBadSuite, naming
// the scenario's expect.check) instead of failing every run of the
// scenario with the same error. ParseCheck must not depend on a run.
type CheckParser interface {
	ParseCheck(check string) error
}

var (
	agentsMu sync.Mutex
	agents   = map[string]Agent{}
)

// RegisterAgent makes an in-process Go agent available to suites as
// `agent: {go: NAME}`. It panics on a duplicate name (a programming error).
// Safe for concurrent use.
func RegisterAgent(name string, a Agent) {
	agentsMu.Lock()
	defer agentsMu.Unlock()
	if _, dup := agents[name]; dup {
		panic(fmt.Sprintf("eval: agent %q registered twice", name))
	}
	agents[name] = a
}

// lookupAgent returns a registered agent.
func lookupAgent(name string) (Agent, error) {
	agentsMu.Lock()
	defer agentsMu.Unlock()
	if a, ok := agents[name]; ok {
		return a, nil
	}
	names := make([]string, 0, len(agents))
	for n := range agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("no in-process agent named %q (registered: %v)", name, names)
}
