package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ErrInvalidConfig is wrapped by every configuration error of this package
// (an unknown redaction name, a bad pattern, an unknown capture mode).
var ErrInvalidConfig = errors.New("trace: invalid config")

// Names of the built-in redactions, as written in config (`redact: [...]`).
const (
	RedactEmail      = "email"
	RedactCardNumber = "card_number"
	RedactAPIKey     = "api_key"
	RedactBearer     = "bearer"
)

// BuiltinRedactions lists the built-in redaction names in the order they are
// applied.
var BuiltinRedactions = []string{RedactBearer, RedactAPIKey, RedactEmail, RedactCardNumber}

// Pattern is a user redaction: every match of Regexp (Go RE2 syntax) is
// replaced by "[REDACTED:Name]". An empty Name means "custom".
type Pattern struct {
	Name   string `yaml:"name" json:"name"`
	Regexp string `yaml:"regexp" json:"regexp"`
}

// rule is one compiled redaction. hint, when set, is a substring every match
// contains (checked case-insensitively when fold is set) so that most strings
// skip the regular expression entirely.
type rule struct {
	name    string
	re      *regexp.Regexp
	repl    string // template for ReplaceAllString; "" means use fn
	fn      func(string) string
	hints   []string
	fold    bool
	digits  bool // needs a run of 13+ digits
	minimum int  // minimum string length
}

// Redactor replaces secrets and personal data in strings and in JSON-shaped
// values with "[REDACTED:name]". Built from NewRedactor; safe for concurrent
// use. The zero value and a nil *Redactor redact nothing.
type Redactor struct {
	rules []rule
}

// NewRedactor builds a Redactor from built-in names (see BuiltinRedactions:
// email, card_number, api_key, bearer) and user patterns. An unknown name or
// a pattern that does not compile is an error wrapping ErrInvalidConfig that
// names the allowed values. Built-ins run first, in BuiltinRedactions order,
// then patterns in the order given.
func NewRedactor(builtins []string, patterns ...Pattern) (*Redactor, error) {
	r := &Redactor{}
	for _, name := range builtins {
		if !slices.Contains(BuiltinRedactions, name) {
			return nil, fmt.Errorf("%w: unknown redaction %q (allowed: %s)",
				ErrInvalidConfig, name, strings.Join(BuiltinRedactions, ", "))
		}
	}
	for _, name := range BuiltinRedactions {
		if slices.Contains(builtins, name) {
			r.rules = append(r.rules, builtinRules[name]...)
		}
	}
	for i, p := range patterns {
		re, err := regexp.Compile(p.Regexp)
		if err != nil {
			return nil, fmt.Errorf("%w: redact pattern %d (%q): %w", ErrInvalidConfig, i, p.Name, err)
		}
		name := p.Name
		if name == "" {
			name = "custom"
		}
		r.rules = append(r.rules, rule{name: name, re: re, repl: "[REDACTED:" + name + "]"})
	}
	return r, nil
}

// DefaultRedactor returns a Redactor with every built-in redaction.
func DefaultRedactor() *Redactor {
	r, _ := NewRedactor(BuiltinRedactions) // the built-in names are valid
	return r
}

// String returns s with every match replaced.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	lower, digits := "", -1 // computed once, on first need, and after a change
	for i := range r.rules {
		ru := &r.rules[i]
		if len(s) < ru.minimum {
			continue
		}
		if ru.digits {
			if digits < 0 {
				digits = boolInt(hasDigitRun(s, 13))
			}
			if digits == 0 {
				continue
			}
		}
		if len(ru.hints) > 0 {
			text := s
			if ru.fold {
				if lower == "" {
					lower = strings.ToLower(s)
				}
				text = lower
			}
			if !containsAny(text, ru.hints) {
				continue
			}
		}
		if out := ru.replace(s); out != s {
			s, lower, digits = out, "", -1
		}
	}
	return s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Value returns v with every string inside it redacted: a string, []byte or
// json.RawMessage (as text), []string, []any and map[string]any, recursively.
// Other values (numbers, bools, nil) are returned as they are. v is never
// modified; containers are copied when something inside them changes.
func (r *Redactor) Value(v any) any {
	if r == nil || len(r.rules) == 0 {
		return v
	}
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []byte:
		return []byte(r.String(string(x)))
	case json.RawMessage:
		return json.RawMessage(r.String(string(x)))
	case []string:
		out := make([]string, len(x))
		for i, s := range x {
			out[i] = r.String(s)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.Value(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = r.Value(e)
		}
		return out
	}
	return v
}

func (ru *rule) replace(s string) string {
	if ru.fn != nil {
		return ru.re.ReplaceAllStringFunc(s, ru.fn)
	}
	return ru.re.ReplaceAllString(s, ru.repl)
}

// hasDigitRun reports whether s holds n digits separated at most by single
// spaces or dashes.
func hasDigitRun(s string, n int) bool {
	count, sep := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			count++
			sep = false
			if count >= n {
				return true
			}
		case (c == ' ' || c == '-') && count > 0 && !sep:
			sep = true
		default:
			count, sep = 0, false
		}
	}
	return false
}

// The built-in rules. Key shapes come from the providers' documentation:
// OpenAI "sk-", "sk-proj-", "sk-svcacct-"; Anthropic "sk-ant-"; Google API
// keys "AIza" + 35 characters; GitHub tokens "ghp_/gho_/ghu_/ghs_/ghr_" and
// "github_pat_"; Slack "xoxb-/xoxp-/xoxa-/xoxr-/xoxs-"; AWS access key ids
// "AKIA"/"ASIA" + 16 upper-case alphanumerics.
var builtinRules = map[string][]rule{
	RedactEmail: {{
		name: RedactEmail, hints: []string{"@"}, minimum: 6,
		re:   regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}`),
		repl: "[REDACTED:email]",
	}},
	RedactCardNumber: {{
		name: RedactCardNumber, digits: true, minimum: 13,
		re: regexp.MustCompile(`\b\d(?:[ \-]?\d){12,}\b`),
		fn: redactCards,
	}},
	RedactAPIKey: {
		{
			name: RedactAPIKey, minimum: 16,
			hints: []string{"sk-", "aiza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "akia", "asia"},
			fold:  true,
			re: regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{16,}|\bAIza[0-9A-Za-z_\-]{35}|\bgh[pousr]_[A-Za-z0-9]{30,}` +
				`|\bgithub_pat_[A-Za-z0-9_]{22,}|\bxox[abprs]-[A-Za-z0-9\-]{10,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`),
			repl: "[REDACTED:api_key]",
		},
		{
			// Generic "api_key=…", "apiKey: …", `"x-api-key": "…"` forms, in
			// query strings, headers, YAML and JSON text. The name and the
			// separator are kept; the value goes.
			name: RedactAPIKey, minimum: 10, fold: true,
			hints: []string{"key", "token", "secret", "password"},
			re: regexp.MustCompile(`(?i)(\b(?:x-)?(?:api[_\-]?key|access[_\-]?token|auth[_\-]?token|client[_\-]?secret|secret[_\-]?key|password)"?\s*[:=]\s*"?)` +
				`[^\s"'&,;}\]]{6,}`),
			repl: "${1}[REDACTED:api_key]",
		},
	},
	RedactBearer: {{
		name: RedactBearer, minimum: 14, fold: true, hints: []string{"bearer"},
		re:   regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/\-]{8,}=*`),
		repl: "${1}[REDACTED:bearer]",
	}},
}

// redactCards replaces payment card numbers inside a run of digit groups:
// 13 to 19 digits passing the Luhn check (ISO/IEC 7812). Digits that fail
// Luhn are kept, and so is every stretch that is not 13–19 digits long.
// Scanning left to right, the longest valid stretch of whole groups starting
// at each group is redacted, so "order 123 4111 1111 1111 1111" keeps "123"
// and two card numbers separated by a space are both redacted.
func redactCards(m string) string {
	groups := splitGroups(m)
	var b strings.Builder
	last := 0
	for i := 0; i < len(groups); i++ {
		end := -1
		for j := i; j < len(groups); j++ {
			d := digitsOf(m[groups[i][0]:groups[j][1]])
			if len(d) > 19 {
				break
			}
			if len(d) >= 13 && luhn(d) {
				end = j
			}
		}
		if end < 0 {
			continue
		}
		b.WriteString(m[last:groups[i][0]])
		b.WriteString("[REDACTED:card_number]")
		last = groups[end][1]
		i = end
	}
	if last == 0 {
		return m
	}
	b.WriteString(m[last:])
	return b.String()
}

// splitGroups returns [start, end) of each digit group of m, groups being
// separated by one space or dash.
func splitGroups(m string) [][2]int {
	var out [][2]int
	start := -1
	for i := 0; i <= len(m); i++ {
		if i < len(m) && m[i] >= '0' && m[i] <= '9' {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, [2]int{start, i})
			start = -1
		}
	}
	return out
}

func digitsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// luhn reports whether the digit string d passes the Luhn (mod 10) check.
func luhn(d string) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}
