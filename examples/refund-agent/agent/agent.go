// Package agent is a small, real tool-using customer-support agent: it looks
// up orders, issues refunds and sends emails, on the official openai-go
// client. It knows nothing of belay except through two seams: the HTTP
// client its OpenAI client uses (point it at `belay serve`, or give it
// belay's transport), and the ToolRunner that executes its tools (belay's
// run, which adds approval, idempotency and the kill switch).
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/belay-run/belay/failure"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// SystemPrompt is the agent's instructions.
const SystemPrompt = "You are a customer-support agent for a small shop. Use lookup_order before any refund. " +
	"Refund only delivered, refundable orders, at most the order amount. After a refund, email the customer."

// ToolFunc performs one tool's effect. key is the idempotency key belay
// assigned to the call (empty when none), to pass to external systems.
type ToolFunc func(ctx context.Context, key string) (json.RawMessage, error)

// ToolRunner executes a tool call: it may refuse it (approval denied, tool
// disabled), answer it from a stored result (idempotency), or run fn.
type ToolRunner interface {
	RunTool(ctx context.Context, name, callID string, args json.RawMessage, fn ToolFunc) (json.RawMessage, error)
}

// DirectRunner runs every tool at once with no key: the agent without belay.
type DirectRunner struct{}

// RunTool runs fn.
func (DirectRunner) RunTool(ctx context.Context, _, _ string, _ json.RawMessage, fn ToolFunc) (json.RawMessage, error) {
	return fn(ctx, "")
}

// Agent answers one customer request with a tool loop.
type Agent struct {
	Client openai.Client
	Model  string
	World  *World
	Tools  ToolRunner
	// MaxSteps is the agent's own loop guard (default 50); belay's turn cap
	// is expected to stop a looping agent long before it.
	MaxSteps int
}

// Result is what a finished request produced.
type Result struct {
	Answer    string
	Turns     int
	ToolCalls []string
}

// ErrModel wraps a failed model call (belay refused it or gave up on it).
var ErrModel = errors.New("model call failed")

// Handle runs the tool loop on one user message until the model answers
// with text. A failed model call ends it with an error wrapping ErrModel; a
// failed tool call is reported to the model as the tool's result, so the
// model can explain it to the customer.
func (a *Agent) Handle(ctx context.Context, userMessage string) (Result, error) {
	maxSteps := a.MaxSteps
	if maxSteps == 0 {
		maxSteps = 50
	}
	var res Result
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage(SystemPrompt),
		openai.UserMessage(userMessage),
	}
	for step := 0; step < maxSteps; step++ {
		comp, err := a.Client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:               shared.ChatModel(a.Model),
			Messages:            msgs,
			Tools:               toolDefs,
			MaxCompletionTokens: openai.Int(512),
		})
		res.Turns++
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrModel, err)
		}
		if len(comp.Choices) == 0 {
			return res, fmt.Errorf("%w: no choices in the response", ErrModel)
		}
		msg := comp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			res.Answer = msg.Content
			return res, nil
		}
		msgs = append(msgs, msg.ToParam())
		for _, tc := range msg.ToolCalls {
			fn := tc.AsFunction()
			res.ToolCalls = append(res.ToolCalls, fn.Function.Name)
			out := a.callTool(ctx, fn.ID, fn.Function.Name, json.RawMessage(fn.Function.Arguments))
			msgs = append(msgs, openai.ToolMessage(string(out), fn.ID))
		}
	}
	return res, fmt.Errorf("agent: no answer after %d steps", maxSteps)
}

// callTool runs one tool and returns the JSON the model sees.
func (a *Agent) callTool(ctx context.Context, id, name string, args json.RawMessage) json.RawMessage {
	impl, ok := a.tool(name, args)
	var out json.RawMessage
	var err error
	if !ok {
		err = fmt.Errorf("unknown tool %q", name)
	} else {
		runner := a.Tools
		if runner == nil {
			runner = DirectRunner{}
		}
		out, err = runner.RunTool(ctx, name, id, args, impl)
	}
	if err != nil {
		b, _ := json.Marshal(map[string]string{"error": modelError(err)})
		return b
	}
	return out
}

// modelError is what the model is told of a tool's failure: the error's
// text, except for an approval belay's policy did not give, told by its
// reason alone. The text names the approval's id, which means nothing to
// the model and differs from run to run: in a seeded suite it made the
// conversations, and so the simulator's draws and the token counts, differ
// between two runs of the same seed.
func modelError(err error) string {
	if fe := failure.As(err); fe != nil && fe.Reason == failure.ApprovalDenied {
		return string(failure.ApprovalDenied) + ": the call was not approved"
	}
	return err.Error()
}
