// Package decimal recognizes the plain decimal numbers belay reads as
// text: the dollar amounts and the seconds of its request headers
// (X-Belay-Max-Cost-Usd, X-Belay-Deadline), its config and its suites.
//
// A plain decimal is an optional sign, then digits with at most one
// decimal point and at least one digit: "90", "1.50", "0.0000375", ".5",
// "-2". Go's and YAML's other spellings of a number are not: an exponent
// ("1e3"), digit separators ("1_000"), base prefixes ("0x10", "0b1",
// "0o7"), "Inf" and "NaN". A limit written so is more likely a mistake
// than meant, and each parser that took one took a different set of them.
package decimal

// Plain reports whether s is a plain decimal (see the package doc). It
// does not trim spaces.
func Plain(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	digits, points := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return false
		}
	}
	return digits > 0 && points <= 1
}
