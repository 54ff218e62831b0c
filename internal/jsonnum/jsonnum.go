// Package jsonnum writes JSON numbers one way for their value, exactly:
// for idempotency keys (run) and canonical traces (trace), where two
// spellings of one value must compare equal and two values never may.
package jsonnum

import (
	"strconv"
	"strings"
)

// Canonical writes the JSON number n (valid JSON number syntax) one
// way for its exact value: without a sign for zero, without leading or
// trailing zeros, as an integer or a decimal fraction when that takes at
// most 40 digits ("40", "0.25", "-1.5"), else in E notation ("1e100",
// "25e-60"). Two numbers of one value, however written, give the same
// text; different values never do (no rounding). An exponent too large to
// read leaves n as it is.
func Canonical(n string) string {
	neg := strings.HasPrefix(n, "-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(strings.TrimPrefix(n, "-")), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expText, "+"))
		if err != nil || e > 1e9 || e < -1e9 {
			return n
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	if digits == "" {
		return "0"
	}
	sign := ""
	if neg {
		sign = "-"
	}
	switch {
	case exp >= 0 && len(digits)+exp <= 40:
		return sign + digits + strings.Repeat("0", exp)
	case exp < 0 && -exp <= 40:
		if point := len(digits) + exp; point > 0 {
			return sign + digits[:point] + "." + digits[point:]
		}
		return sign + "0." + strings.Repeat("0", -exp-len(digits)) + digits
	}
	return sign + digits + "e" + strconv.FormatInt(int64(exp), 10)
}
