package trace

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func payloadSpan() Span {
	return Span{
		SpanID: "a1", Kind: KindTool, Name: "execute_tool send_email",
		Attrs: map[string]any{
			AttrToolName:      "send_email",
			AttrToolArguments: `{"to":"bob@example.com","body":"hi"}`,
			AttrToolResult:    "sent",
			AttrInputMessages: []any{map[string]any{"role": "user", "content": "card 4111111111111111"}},
			"app.note":        "call me at ann@example.com",
		},
		Events: []Event{{Name: "approval", Time: time.Unix(1, 0), Attrs: map[string]any{
			"reason": "approved by lead@example.com", AttrToolArguments: "x",
		}}},
	}
}

func TestPayloadPolicyOff(t *testing.T) {
	in := payloadSpan()
	got := PayloadPolicy{Extra: []string{"app.note"}}.Apply(in)
	want := map[string]any{AttrToolName: "send_email"}
	if !reflect.DeepEqual(got.Attrs, want) {
		t.Errorf("attrs = %v, want %v", got.Attrs, want)
	}
	if ev := got.Events[0].Attrs; !reflect.DeepEqual(ev, map[string]any{"reason": "approved by lead@example.com"}) {
		t.Errorf("event attrs = %v", ev)
	}
	if len(in.Attrs) != 5 || len(in.Events[0].Attrs) != 2 {
		t.Errorf("Apply modified its input: %v", in)
	}
}

func TestPayloadPolicyRedacted(t *testing.T) {
	in := payloadSpan()
	got := PayloadPolicy{Capture: CaptureRedacted}.Apply(in)
	want := map[string]any{
		AttrToolName:      "send_email",
		AttrToolArguments: `{"to":"[REDACTED:email]","body":"hi"}`,
		AttrToolResult:    "sent",
		AttrInputMessages: []any{map[string]any{"role": "user", "content": "card [REDACTED:card_number]"}},
		"app.note":        "call me at ann@example.com", // not a payload attribute
	}
	if !reflect.DeepEqual(got.Attrs, want) {
		t.Errorf("attrs =\n%v\nwant\n%v", got.Attrs, want)
	}
	if r := got.Events[0].Attrs["reason"]; r != "approved by [REDACTED:email]" {
		t.Errorf("event reason = %v", r)
	}
	if in.Attrs[AttrToolArguments] != `{"to":"bob@example.com","body":"hi"}` || in.Events[0].Attrs["reason"] != "approved by lead@example.com" {
		t.Errorf("Apply modified its input")
	}
}

func TestPayloadPolicyFull(t *testing.T) {
	in := payloadSpan()
	got := PayloadPolicy{Capture: CaptureFull}.Apply(in)
	if !reflect.DeepEqual(got, in) {
		t.Errorf("full changed the span: %v", got)
	}
}

func TestParseCapture(t *testing.T) {
	for in, want := range map[string]Capture{"": CaptureOff, "off": CaptureOff, "redacted": CaptureRedacted, "full": CaptureFull} {
		if got, err := ParseCapture(in); err != nil || got != want {
			t.Errorf("ParseCapture(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseCapture("some"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ParseCapture(some) err = %v", err)
	}
}

func TestConfigPolicy(t *testing.T) {
	const doc = `
capture: redacted
redact: [email, card_number]
redact_patterns:
  - {name: order_id, regexp: 'ORD-\d{6}'}
payload_attrs: [app.note]
otlp: {endpoint: "http://127.0.0.1:4318"}
`
	var c Config
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if c.OTLP == nil || c.OTLP.Endpoint != "http://127.0.0.1:4318" {
		t.Errorf("otlp = %+v", c.OTLP)
	}
	s := p.Apply(Span{Attrs: map[string]any{
		"app.note":        "ORD-123456 for a@b.io, key sk-proj-abcdefghijklmnopqrstuv",
		AttrToolArguments: "4111111111111111",
	}})
	want := map[string]any{
		"app.note":        "[REDACTED:order_id] for [REDACTED:email], key sk-proj-abcdefghijklmnopqrstuv",
		AttrToolArguments: "[REDACTED:card_number]",
	}
	if !reflect.DeepEqual(s.Attrs, want) {
		t.Errorf("attrs = %v, want %v", s.Attrs, want)
	}
	for _, bad := range []Config{{Capture: "some"}, {Redact: []string{"ssn"}}, {Patterns: []Pattern{{Regexp: "("}}}} {
		if _, err := bad.Policy(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Policy(%+v) err = %v", bad, err)
		}
	}
}
