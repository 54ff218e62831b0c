package budget

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
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
	neg := a < 0
	u := uint64(a)
	if neg {
		u = uint64(-a)
	}
	whole, frac := u/perDollar, u%perDollar
	fs := strings.TrimRight(fmt.Sprintf("%012d", frac), "0")
	for len(fs) < 2 {
		fs += "0"
	}
	s := fmt.Sprintf("%d.%s", whole, fs)
	if neg {
		s = "-" + s
	}
	return s
}

// ErrMoneyFormat is returned by ParseUSD for text that is not an amount.
var ErrMoneyFormat = errors.New("budget: not a dollar amount")

// ParseUSD parses a decimal dollar amount such as "1.00", "$0.0000375" or
// "100". More than 12 decimals, or a value outside the range, is an error
// wrapping ErrMoneyFormat; nothing is rounded silently.
func ParseUSD(s string) (USD, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "$")
	r, ok := new(big.Rat).SetString(t)
	if !ok || strings.ContainsAny(t, "/eE") {
		return 0, fmt.Errorf("%w: %q", ErrMoneyFormat, s)
	}
	r.Mul(r, new(big.Rat).SetInt64(perDollar))
	if !r.IsInt() {
		return 0, fmt.Errorf("%w: %q has more than 12 decimals", ErrMoneyFormat, s)
	}
	n := r.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("%w: %q is out of range", ErrMoneyFormat, s)
	}
	return USD(n.Int64()), nil
}

// MulTokens returns the cost of n tokens at price per million tokens,
// rounded half away from zero to the picodollar.
func (price USD) MulTokens(n int64) USD {
	if n == 0 || price == 0 {
		return 0
	}
	p := new(big.Int).Mul(big.NewInt(int64(price)), big.NewInt(n))
	q, m := new(big.Int).QuoRem(p, big.NewInt(1_000_000), new(big.Int))
	if m.CmpAbs(big.NewInt(500_000)) >= 0 {
		if p.Sign() >= 0 {
			q.Add(q, big.NewInt(1))
		} else {
			q.Sub(q, big.NewInt(1))
		}
	}
	if !q.IsInt64() {
		if q.Sign() > 0 {
			return MaxUSD
		}
		return USD(math.MinInt64)
	}
	return USD(q.Int64())
}
