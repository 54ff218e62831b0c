package budget

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"strings"

	"github.com/belay-run/belay/internal/decimal"
)

// USD is an exact amount of money in US dollars, stored as an integer count
// of picodollars (1e-12 USD), so sums never drift: one million additions of
// $0.0000375 are exactly $37.50. The range is about ±$9.2 million; arithmetic
// that would leave it saturates (see Add) rather than wrapping.
//
// The zero value is $0. USD is a value type, safe to copy and compare.
type USD int64

// Picodollars per dollar.
const perDollar = 1_000_000_000_000

// MaxUSD is the largest representable amount.
const MaxUSD = USD(math.MaxInt64)

// Dollars returns an amount of whole dollars.
func Dollars(d int64) USD { return USD(d * perDollar) }

// Micros returns an amount of millionths of a dollar.
func Micros(m int64) USD { return USD(m * 1_000_000) }

// Add returns a+b, saturating at the range's ends instead of overflowing.
func (a USD) Add(b USD) USD {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return MaxUSD
		}
		return USD(math.MinInt64)
	}
	return s
}

// Sub returns a-b, saturating like Add.
func (a USD) Sub(b USD) USD {
	if b == USD(math.MinInt64) {
		return a.Add(MaxUSD).Add(1)
	}
	return a.Add(-b)
}

// Float returns the amount in dollars as a float64, for display and metrics
// only; never compute with it.
func (a USD) Float() float64 { return float64(a) / perDollar }

// String formats the amount with as many decimals as it needs, at least two:
// "$37.50", "$0.0000375", "-$1.00".
func (a USD) String() string { return "$" + a.Decimal() }

// Decimal formats the amount as a plain decimal without the "$" ("37.50").
func (a USD) Decimal() string {
	var buf [40]byte
	b := buf[:0]
	u := uint64(a)
	if a < 0 {
		b = append(b, '-')
		u = -u // two's complement: also right for the most negative value
	}
	whole, frac := u/perDollar, u%perDollar
	b = strconv.AppendUint(b, whole, 10)
	b = append(b, '.')
	var f [12]byte // the picodollars, zero-padded
	for i := len(f) - 1; i >= 0; i-- {
		f[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := len(f)
	for n > 2 && f[n-1] == '0' {
		n--
	}
	return string(append(b, f[:n]...))
}

// ErrMoneyFormat is returned by ParseUSD for text that is not an amount.
var ErrMoneyFormat = errors.New("budget: not a dollar amount")

// ErrMoneyRange is wrapped, with ErrMoneyFormat, by ParseUSD's error for an
// amount a USD cannot hold (beyond about ±$9.2 million).
var ErrMoneyRange = errors.New("out of range")

// ErrMoneyPrecision is wrapped, with ErrMoneyFormat, by ParseUSD's error for
// an amount finer than a USD holds: more than 12 decimals (a picodollar).
var ErrMoneyPrecision = errors.New("finer than a picodollar (more than 12 decimals)")

// ParseUSD parses a decimal dollar amount such as "1.00", "$0.0000375" or
// "100": a plain decimal (package internal/decimal: an optional sign,
// digits, an optional fraction), after an optional "$", with spaces around
// it ignored. Anything else — an exponent (1e3), digit separators (1_000),
// a base prefix (0x10), a fraction (1/2) — is an error wrapping
// ErrMoneyFormat, as are more than 12 decimals and a value outside the
// range; nothing is rounded silently.
func ParseUSD(s string) (USD, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "$")
	if !decimal.Plain(t) {
		return 0, fmt.Errorf("%w: %q", ErrMoneyFormat, s)
	}
	r, ok := new(big.Rat).SetString(t)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrMoneyFormat, s)
	}
	r.Mul(r, new(big.Rat).SetInt64(perDollar))
	if !r.IsInt() {
		return 0, fmt.Errorf("%w: %q is %w", ErrMoneyFormat, s, ErrMoneyPrecision)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("%w: %q is %w", ErrMoneyFormat, s, ErrMoneyRange)
	}
	return USD(n.Int64()), nil
}

// MulTokens returns the cost of n tokens at price per million tokens,
// rounded half away from zero to the picodollar.
func (price USD) MulTokens(n int64) USD {
	if n == 0 || price == 0 {
		return 0
	}
	neg := (price < 0) != (n < 0)
	hi, lo := bits.Mul64(magnitude(int64(price)), magnitude(n)) // exact 128-bit product
	if hi >= perMillion {
		return saturated(neg) // the quotient does not fit 64 bits
	}
	q, r := bits.Div64(hi, lo, perMillion)
	if r >= perMillion/2 { // half away from zero
		if q == math.MaxUint64 {
			return saturated(neg)
		}
		q++
	}
	return signed(q, neg)
}

// signed returns the USD of magnitude q, negative when neg, saturated at
// the range of USD.
func signed(q uint64, neg bool) USD {
	switch {
	case !neg && q <= math.MaxInt64:
		return USD(q)
	case neg && q <= 1<<63:
		return USD(-q) // two's complement: -2^63 included
	}
	return saturated(neg)
}

// Times returns price × n (a per-call price times n calls), saturated
// at the range of USD like MulTokens.
func (price USD) Times(n int64) USD {
	if n == 0 || price == 0 {
		return 0
	}
	neg := (price < 0) != (n < 0)
	hi, lo := bits.Mul64(magnitude(int64(price)), magnitude(n))
	if hi != 0 {
		return saturated(neg)
	}
	return signed(lo, neg)
}

// perMillion is the token count a Price is per.
const perMillion = 1_000_000

// magnitude returns |v| (also for the most negative int64).
func magnitude(v int64) uint64 {
	if v < 0 {
		return -uint64(v)
	}
	return uint64(v)
}

// saturated is the end of the range a result out of it saturates to.
func saturated(neg bool) USD {
	if neg {
		return USD(math.MinInt64)
	}
	return MaxUSD
}
