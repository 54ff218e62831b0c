package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/internal/decimal"
	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in YAML as a Go duration ("500ms",
// "5m", "1h30m") or as a plain number of seconds (30, 0.5).
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns the Go spelling of d ("5m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML reads a Go duration or a number of seconds. Its errors
// are *Error at the node's line.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Line: n.Line, Msg: "found " + found(n) + "; want " + durationWant}
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return &Error{Line: n.Line, Msg: err.Error()}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the Go spelling.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// ErrDurationRange is wrapped by ParseDuration's error for a value too
// large for a time.Duration (over about 292 years; seconds written as a
// number, over about 146).
var ErrDurationRange = errors.New("too long for a duration")

// durationSyntax is time.ParseDuration's grammar (an optional sign, then
// decimal numbers each with a unit), which a value that overflows matches.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// ParseDuration parses a Go duration ("90s", "5m") or a number of seconds
// written as a plain decimal ("90", "1.5"; package internal/decimal: no
// exponent, digit separators or base prefix), the forms accepted in the
// config file and in the X-Belay-Deadline header. Negative values are an
// error.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if f, err := strconv.ParseFloat(s, 64); err == nil && decimal.Plain(s) {
		if f > float64(1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("%q is %w", s, ErrDurationRange)
		}
		d = time.Duration(f * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		if durationSyntax.MatchString(s) { // well formed: it overflowed
			return 0, fmt.Errorf("%q is %w", s, ErrDurationRange)
		}
		return 0, fmt.Errorf("%q is not a duration; want one such as 500ms, 30s or 5m, or a number of seconds", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative; want a duration of 0 or more", s)
	}
	return d, nil
}

// USD is an exact dollar amount written in YAML as a number (1.50) or a
// string ("$1.50"). The YAML text is parsed exactly (budget.ParseUSD), never
// through a float.
type USD budget.USD

// V returns the amount as a budget.USD.
func (u USD) V() budget.USD { return budget.USD(u) }

// UnmarshalYAML parses the scalar's text exactly. Its errors are *Error at
// the node's line.
func (u *USD) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Line: n.Line, Msg: "found " + found(n) + "; want " + usdWant}
	}
	v, err := budget.ParseUSD(n.Value)
	if err != nil {
		// budget's detail, without its package prefix: `"abc"`, or
		// `"0.0000000000001" is finer than a picodollar (more than 12 decimals)`.
		detail := strings.TrimPrefix(err.Error(), budget.ErrMoneyFormat.Error()+": ")
		if detail == strconv.Quote(n.Value) {
			return &Error{Line: n.Line, Msg: detail + " is not a dollar amount; want one such as 1.50"}
		}
		return &Error{Line: n.Line, Msg: detail + "; want " + usdWant}
	}
	if v < 0 {
		return &Error{Line: n.Line, Msg: n.Value + " is negative; want a dollar amount of 0 or more"}
	}
	*u = USD(v)
	return nil
}

// MarshalYAML writes the plain decimal.
func (u USD) MarshalYAML() (any, error) { return budget.USD(u).Decimal(), nil }

// Secret is a credential written either literally or as "env:NAME", which
// Load replaces by the value of the environment variable NAME (a variable
// that is not set is an error naming it). String and MarshalYAML never
// show the value.
type Secret struct {
	// Ref is the text as written in the file ("env:OPENAI_API_KEY" or the
	// literal); empty when the field was absent.
	Ref string
	// Value is the resolved credential.
	Value string
}

// Literal returns a Secret whose value is s.
func Literal(s string) Secret { return Secret{Ref: s, Value: s} }

// UnmarshalYAML keeps the reference; Load resolves it. Its error is an
// *Error at the node's line.
func (s *Secret) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Line: n.Line, Msg: "found " + found(n) + "; want " + secretWant}
	}
	s.Ref = n.Value
	return nil
}

// MarshalYAML writes the env reference, or "[redacted]" for a literal.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// String returns the env reference, or "[redacted]" for a literal; never
// the value.
func (s Secret) String() string {
	if strings.HasPrefix(s.Ref, "env:") || s.Ref == "" {
		return s.Ref
	}
	return "[redacted]"
}

// IsSet reports whether the secret has a non-empty value.
func (s Secret) IsSet() bool { return s.Value != "" }

// resolve fills Value from Ref using lookup for env: references; a
// reference that does not resolve is an *Error at field.
func (s *Secret) resolve(field string, lookup func(string) (string, bool)) *Error {
	name, isEnv := strings.CutPrefix(s.Ref, "env:")
	if !isEnv {
		s.Value = s.Ref // checked with the others (validateKeys)
		return nil
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return bad(field, "%q names no environment variable; want env:NAME", s.Ref)
	}
	v, ok := lookup(name)
	if !ok {
		return bad(field, "environment variable %s is not set", name)
	}
	if v == "" {
		return bad(field, "environment variable %s is set but empty", name)
	}
	if i := controlByte(v); i >= 0 {
		// The value is a secret: only its position is named.
		return bad(field, "environment variable %s holds a control character (byte %d of %d; a newline at the end, "+
			"as a key read from a file has, is the usual one): an HTTP header cannot carry it", name, i+1, len(v))
	}
	s.Value = v
	return nil
}

// controlByte returns the index of the first byte of v that an HTTP
// header value cannot hold (a control byte other than tab: RFC 9110
// §5.5), or -1. Keys are sent, or compared with what clients send, as
// header values.
func controlByte(v string) int {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < ' ' && b != '\t' || b == 0x7f {
			return i
		}
	}
	return -1
}

// ParseAge reads a Go duration ("720h") or a whole number of days ("30d").
func ParseAge(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange) || n < 0:
			return 0, errors.New("want a duration (720h) or a whole number of days (30d)")
		case err != nil || n > 100*365:
			return 0, errors.New("want at most 36500 days")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("want a duration (720h) or a whole number of days (30d)")
	}
	return d, nil
}
