package trace

import (
	"fmt"
	"maps"
	"slices"
)

// Capture says how much of the payloads (prompts, completions, tool
// arguments and results) a trace keeps.
type Capture string

const (
	// CaptureOff removes payload attributes before anything is stored or
	// exported. It is the zero value: payloads are often personal data, so
	// keeping them is opt-in.
	CaptureOff Capture = "off"
	// CaptureRedacted keeps payloads with secrets and personal data replaced
	// by the Redactor.
	CaptureRedacted Capture = "redacted"
	// CaptureFull keeps payloads as recorded.
	CaptureFull Capture = "full"
)

// ParseCapture parses a config value: "off", "redacted" or "full"; the empty
// string is "off". Anything else is an error wrapping ErrInvalidConfig.
func ParseCapture(s string) (Capture, error) {
	switch c := Capture(s); c {
	case "", CaptureOff:
		return CaptureOff, nil
	case CaptureRedacted, CaptureFull:
		return c, nil
	}
	return "", fmt.Errorf("%w: unknown capture %q (allowed: off, redacted, full)", ErrInvalidConfig, s)
}

// PayloadAttrs are the attribute names that hold payloads (OpenTelemetry
// GenAI semantic conventions): messages in and out, tool arguments and
// results.
var PayloadAttrs = []string{AttrInputMessages, AttrOutputMessages, AttrToolArguments, AttrToolResult}

// PayloadPolicy applies a Capture mode to spans. The zero value removes
// payloads (CaptureOff). Safe for concurrent use once built.
type PayloadPolicy struct {
	// Capture is the mode; "" means CaptureOff.
	Capture Capture
	// Redactor is used in CaptureRedacted mode; nil means DefaultRedactor().
	Redactor *Redactor
	// Extra names further attributes to treat as payload, besides
	// PayloadAttrs.
	Extra []string
}

// Apply returns s as the policy allows it to be stored or exported:
//   - off: payload attributes are removed from the span and its events;
//   - redacted: payload attributes and every event attribute go through the
//     Redactor (strings inside JSON-shaped values too);
//   - full: s unchanged.
//
// s is never modified: Attrs and Events are copied when anything changes.
func (p PayloadPolicy) Apply(s Span) Span {
	switch p.Capture {
	case CaptureFull:
		return s
	case CaptureRedacted:
		r := p.Redactor
		if r == nil {
			r = defaultRedactor
		}
		s.Attrs = p.redactAttrs(s.Attrs, r, false)
		if len(s.Events) > 0 {
			s.Events = slices.Clone(s.Events)
			for i := range s.Events {
				s.Events[i].Attrs = p.redactAttrs(s.Events[i].Attrs, r, true)
			}
		}
		return s
	default:
		s.Attrs = p.strip(s.Attrs)
		if slices.ContainsFunc(s.Events, func(e Event) bool { return p.hasPayload(e.Attrs) }) {
			s.Events = slices.Clone(s.Events)
			for i := range s.Events {
				s.Events[i].Attrs = p.strip(s.Events[i].Attrs)
			}
		}
		return s
	}
}

var defaultRedactor = DefaultRedactor()

func (p PayloadPolicy) isPayload(k string) bool {
	return slices.Contains(PayloadAttrs, k) || slices.Contains(p.Extra, k)
}

// hasPayload reports whether attrs holds a payload key: a lookup per
// payload name, not a scan of the names per attribute.
func (p PayloadPolicy) hasPayload(attrs map[string]any) bool {
	for _, names := range [][]string{PayloadAttrs, p.Extra} {
		for _, k := range names {
			if _, ok := attrs[k]; ok {
				return true
			}
		}
	}
	return false
}

// strip returns attrs without payload keys, copying only when needed.
func (p PayloadPolicy) strip(attrs map[string]any) map[string]any {
	if !p.hasPayload(attrs) {
		return attrs
	}
	out := make(map[string]any, len(attrs))
	for k, v := range attrs {
		if !p.isPayload(k) {
			out[k] = v
		}
	}
	return out
}

// redactAttrs returns a copy of attrs with payload values (all values when
// all is set) redacted.
func (p PayloadPolicy) redactAttrs(attrs map[string]any, r *Redactor, all bool) map[string]any {
	if len(attrs) == 0 || (!all && !p.hasPayload(attrs)) {
		return attrs
	}
	out := maps.Clone(attrs)
	if all {
		for k, v := range attrs {
			out[k] = r.Value(v)
		}
		return out
	}
	for _, names := range [][]string{PayloadAttrs, p.Extra} {
		for _, k := range names {
			if v, ok := attrs[k]; ok {
				out[k] = r.Value(v)
			}
		}
	}
	return out
}
