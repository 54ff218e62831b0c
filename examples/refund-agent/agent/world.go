package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
)

// Order is one order in the shop the agent serves.
type Order struct {
	ID         string  `json:"id"`
	Customer   string  `json:"customer"`
	Email      string  `json:"email"`
	AmountUSD  float64 `json:"amount_usd"`
	Status     string  `json:"status"`
	Refundable bool    `json:"refundable"`
}

// Refund is one refund the payments system actually issued.
type Refund struct {
	ID             string  `json:"id"`
	OrderID        string  `json:"order_id"`
	AmountUSD      float64 `json:"amount_usd"`
	IdempotencyKey string  `json:"idempotency_key,omitempty"`
}

// Email is one email actually sent.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// Faults make the world's external systems misbehave, for scenarios.
type Faults struct {
	// PaymentsTimeoutOnce makes the first refund call apply the refund and
	// then fail with a timeout, as a payments API whose answer was lost.
	PaymentsTimeoutOnce bool `json:"payments_timeout_once,omitempty"`
}

// World is the state the agent acts on: orders, and the refunds and emails
// its tools really caused. The payments system honours idempotency keys, as
// real payment APIs do (the Idempotency-Key header of Stripe and others).
//
// A World is safe for concurrent use.
type World struct {
	mu      sync.Mutex
	Orders  map[string]Order `json:"orders"`
	Refunds []Refund         `json:"refunds"`
	Emails  []Email          `json:"emails"`
	Faults  Faults           `json:"faults"`
	// timedOut records that PaymentsTimeoutOnce has fired.
	TimedOut bool `json:"timed_out,omitempty"`
}

// ErrNotFound is returned by LookupOrder for an unknown order id.
var ErrNotFound = errors.New("order not found")

// ErrPaymentsTimeout is the payments API timing out after it applied the
// refund. It reports Timeout() true, as net/http's timeouts do, so a
// reliability layer classifies it as transient.
var ErrPaymentsTimeout error = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "payments API: timeout awaiting response" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// NewWorld returns the default shop: three orders.
func NewWorld() *World {
	return &World{Orders: map[string]Order{
		"A-1001": {ID: "A-1001", Customer: "Ada", Email: "ada@example.com", AmountUSD: 42.50, Status: "delivered", Refundable: true},
		"A-1002": {ID: "A-1002", Customer: "Grace", Email: "grace@example.com", AmountUSD: 18.00, Status: "delivered", Refundable: true},
		"B-2001": {ID: "B-2001", Customer: "Linus", Email: "linus@example.com", AmountUSD: 899.00, Status: "delivered", Refundable: true},
	}}
}

// LookupOrder returns the order with id, or ErrNotFound.
func (w *World) LookupOrder(id string) (Order, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.Orders[id]
	if !ok {
		return Order{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return o, nil
}

// IssueRefund refunds amount on order id. A call with an idempotency key
// that was already used returns the refund made then, without a new one.
func (w *World) IssueRefund(id string, amount float64, key string) (Refund, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if key != "" {
		for _, r := range w.Refunds {
			if r.IdempotencyKey == key {
				return r, nil
			}
		}
	}
	o, ok := w.Orders[id]
	if !ok {
		return Refund{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if !o.Refundable {
		return Refund{}, fmt.Errorf("order %s is not refundable", id)
	}
	if amount <= 0 || amount > o.AmountUSD {
		return Refund{}, fmt.Errorf("refund of %.2f is outside 0..%.2f for order %s", amount, o.AmountUSD, id)
	}
	r := Refund{ID: fmt.Sprintf("re_%d", len(w.Refunds)+1), OrderID: id, AmountUSD: amount, IdempotencyKey: key}
	w.Refunds = append(w.Refunds, r)
	if w.Faults.PaymentsTimeoutOnce && !w.TimedOut {
		w.TimedOut = true
		return Refund{}, ErrPaymentsTimeout
	}
	return r, nil
}

// SendEmail sends one email.
func (w *World) SendEmail(e Email) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Emails = append(w.Emails, e)
}

// Snapshot returns copies of the refunds and emails so far.
func (w *World) Snapshot() (refunds []Refund, emails []Email) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Refund(nil), w.Refunds...), append([]Email(nil), w.Emails...)
}

// RefundsByOrder counts refunds per order id.
func (w *World) RefundsByOrder() map[string]int {
	refunds, _ := w.Snapshot()
	m := map[string]int{}
	for _, r := range refunds {
		m[r.OrderID]++
	}
	return m
}

// LoadWorld reads a world from path; a missing file gives NewWorld().
func LoadWorld(path string) (*World, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return NewWorld(), nil
	}
	if err != nil {
		return nil, err
	}
	w := &World{}
	if err := json.Unmarshal(b, w); err != nil {
		return nil, fmt.Errorf("world %s: %w", path, err)
	}
	if w.Orders == nil {
		w.Orders = NewWorld().Orders
	}
	return w, nil
}

// Save writes the world to path atomically (temp file, then rename).
func (w *World) Save(path string) error {
	w.mu.Lock()
	b, err := json.MarshalIndent(w, "", "  ")
	w.mu.Unlock()
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// OrderIDs returns the known order ids, sorted.
func (w *World) OrderIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.Orders))
	for id := range w.Orders {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
