package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// Tool names.
const (
	ToolLookupOrder = "lookup_order"
	ToolIssueRefund = "issue_refund" // irreversible
	ToolSendEmail   = "send_email"   // irreversible
)

var toolDefs = []openai.ChatCompletionToolUnionParam{
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        ToolLookupOrder,
		Description: openai.String("Look up an order by its id."),
		Parameters: shared.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"order_id": map[string]any{"type": "string"}},
			"required":   []string{"order_id"},
		},
	}),
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        ToolIssueRefund,
		Description: openai.String("Refund an amount in USD on an order. Irreversible."),
		Parameters: shared.FunctionParameters{
			"type": "object",
			"properties": map[string]any{
				"order_id":   map[string]any{"type": "string"},
				"amount_usd": map[string]any{"type": "number"},
			},
			"required": []string{"order_id", "amount_usd"},
		},
	}),
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        ToolSendEmail,
		Description: openai.String("Send an email to a customer. Irreversible."),
		Parameters: shared.FunctionParameters{
			"type": "object",
			"properties": map[string]any{
				"to":      map[string]any{"type": "string"},
				"subject": map[string]any{"type": "string"},
				"body":    map[string]any{"type": "string"},
			},
			"required": []string{"to", "subject", "body"},
		},
	}),
}

// tool returns the implementation of the named tool bound to args.
func (a *Agent) tool(name string, args json.RawMessage) (ToolFunc, bool) {
	switch name {
	case ToolLookupOrder:
		return func(ctx context.Context, _ string) (json.RawMessage, error) {
			var in struct {
				OrderID string `json:"order_id"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, fmt.Errorf("lookup_order: bad arguments: %w", err)
			}
			o, err := a.World.LookupOrder(in.OrderID)
			if err != nil {
				return nil, err
			}
			return json.Marshal(o)
		}, true
	case ToolIssueRefund:
		return func(ctx context.Context, key string) (json.RawMessage, error) {
			var in struct {
				OrderID   string `json:"order_id"`
				AmountUSD amount `json:"amount_usd"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, fmt.Errorf("issue_refund: bad arguments: %w", err)
			}
			r, err := a.World.IssueRefund(in.OrderID, float64(in.AmountUSD), key)
			if err != nil {
				return nil, err
			}
			// What the model sees: the refund, not the payments system's
			// bookkeeping (its idempotency key).
			return json.Marshal(map[string]any{"refund_id": r.ID, "order_id": r.OrderID, "amount_usd": r.AmountUSD})
		}, true
	case ToolSendEmail:
		return func(ctx context.Context, _ string) (json.RawMessage, error) {
			var e Email
			if err := json.Unmarshal(args, &e); err != nil {
				return nil, fmt.Errorf("send_email: bad arguments: %w", err)
			}
			a.World.SendEmail(e)
			return json.RawMessage(`{"sent":true}`), nil
		}, true
	}
	return nil, false
}

// amount is a dollar amount that models send as a JSON number or, now and
// then, as a string ("42.50"); both are accepted.
type amount float64

func (a *amount) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("amount_usd: %s is not a number", b)
	}
	*a = amount(f)
	return nil
}
