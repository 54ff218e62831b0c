package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/eval"
)

// EvalAgent runs the refund agent in-process under `belay eval`
// (`agent: {go: refund-agent}`). Each run gets its own World, built from
// the scenario's world fixture, kept until its check has run.
type EvalAgent struct {
	mu     sync.Mutex
	worlds map[string]*World
}

// NewEvalAgent returns an EvalAgent.
func NewEvalAgent() *EvalAgent { return &EvalAgent{worlds: map[string]*World{}} }

var _ eval.Checker = (*EvalAgent)(nil)

// Run handles env.Input. Exit code 0: the agent answered; 1: a model call
// failed (belay refused or gave up); 2: anything else.
func (e *EvalAgent) Run(ctx context.Context, env eval.Env) (int, string, error) {
	w := NewWorld()
	if len(env.World) > 0 {
		if err := json.Unmarshal(env.World, w); err != nil {
			return 2, "", fmt.Errorf("world fixture: %w", err)
		}
	}
	e.mu.Lock()
	e.worlds[env.RunID] = w
	e.mu.Unlock()
	a := &Agent{
		Client: openai.NewClient(option.WithBaseURL(env.BaseURL), option.WithHTTPClient(env.HTTPClient),
			option.WithAPIKey("belay-eval"), option.WithMaxRetries(0)),
		Model: env.Model,
		World: w,
		Tools: evalTools{env.Tools},
	}
	res, err := a.Handle(ctx, env.Input)
	if errors.Is(err, ErrModel) {
		return 1, res.Answer, nil
	}
	if err != nil {
		return 2, res.Answer, err
	}
	return 0, res.Answer, nil
}

// evalTools adapts belay's tool runner to the agent's.
type evalTools struct{ r eval.ToolRunner }

func (t evalTools) RunTool(ctx context.Context, name, callID string, args json.RawMessage, fn ToolFunc) (json.RawMessage, error) {
	if t.r == nil {
		return fn(ctx, "")
	}
	return t.r.RunTool(ctx, name, callID, args, eval.ToolFunc(fn))
}

// Check inspects the run's world. The check text is a space-separated list
// of conditions: "refunds=N" (refunds in all), "refunds:ORDER=N" (refunds
// of one order), "emails=N" (emails sent). Unknown conditions are errors.
func (e *EvalAgent) Check(ctx context.Context, env eval.Env, check string) error {
	e.mu.Lock()
	w := e.worlds[env.RunID]
	delete(e.worlds, env.RunID)
	e.mu.Unlock()
	if w == nil {
		return fmt.Errorf("no world for run %s", env.RunID)
	}
	return CheckWorld(w, check)
}

// ParseCheck reports a check text Check could not read (eval.CheckParser):
// belay eval refuses the suite before any run.
func (e *EvalAgent) ParseCheck(check string) error {
	_, err := parseCheck(check)
	return err
}

// condition is one NAME=COUNT of a check text.
type condition struct {
	name string
	want int
}

// parseCheck reads a check text (see EvalAgent.Check).
func parseCheck(check string) ([]condition, error) {
	var conds []condition
	for _, cond := range strings.Fields(check) {
		k, v, ok := strings.Cut(cond, "=")
		want, err := strconv.Atoi(v)
		if !ok || err != nil {
			return nil, fmt.Errorf("check %q: want NAME=COUNT", cond)
		}
		if k != "refunds" && k != "emails" && (!strings.HasPrefix(k, "refunds:") || k == "refunds:") {
			return nil, fmt.Errorf("check %q: unknown condition (want refunds, refunds:ORDER or emails)", cond)
		}
		conds = append(conds, condition{k, want})
	}
	return conds, nil
}

// CheckWorld evaluates check (see EvalAgent.Check) against w.
func CheckWorld(w *World, check string) error {
	conds, err := parseCheck(check)
	if err != nil {
		return err
	}
	refunds, emails := w.Snapshot()
	byOrder := w.RefundsByOrder()
	var fails []string
	for _, c := range conds {
		var got int
		switch {
		case c.name == "refunds":
			got = len(refunds)
		case c.name == "emails":
			got = len(emails)
		default:
			got = byOrder[strings.TrimPrefix(c.name, "refunds:")]
		}
		if got != c.want {
			fails = append(fails, fmt.Sprintf("%s is %d, want %d", c.name, got, c.want))
		}
	}
	if len(fails) > 0 {
		return errors.New(strings.Join(fails, "; "))
	}
	return nil
}
