package trace

// Config is the tracing section of belay's configuration:
//
//	capture: redacted                  # off (default) | redacted | full
//	redact: [email, card_number, api_key, bearer]
//	redact_patterns:
//	  - {name: order_id, regexp: 'ORD-\d{6}'}
//	otlp: {endpoint: "http://127.0.0.1:4318"}
type Config struct {
	Capture Capture `yaml:"capture"`
	// Redact names the built-in redactions used in redacted mode; empty
	// means all of them.
	Redact []string `yaml:"redact"`
	// Patterns are the user's own redactions, applied after the built-ins.
	Patterns []Pattern `yaml:"redact_patterns"`
	// PayloadAttrs names further attributes to treat as payload.
	PayloadAttrs []string `yaml:"payload_attrs"`
	// OTLP, when set, exports spans to an OpenTelemetry collector.
	OTLP *OTLPConfig `yaml:"otlp"`
}

// Policy validates c and returns its payload policy. An unknown capture
// mode or redaction name, or a pattern that does not compile, is an error
// wrapping ErrInvalidConfig that names the field and the allowed values.
func (c Config) Policy() (PayloadPolicy, error) {
	mode, err := ParseCapture(string(c.Capture))
	if err != nil {
		return PayloadPolicy{}, err
	}
	names := c.Redact
	if len(names) == 0 {
		names = BuiltinRedactions
	}
	r, err := NewRedactor(names, c.Patterns...)
	if err != nil {
		return PayloadPolicy{}, err
	}
	return PayloadPolicy{Capture: mode, Redactor: r, Extra: c.PayloadAttrs}, nil
}
