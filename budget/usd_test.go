package budget

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
)

// mulTokensExact is MulTokens computed with unbounded integers: the
// product, divided by a million, rounded half away from zero, saturated
// to the USD range.
func mulTokensExact(price USD, n int64) USD {
	p := new(big.Int).Mul(big.NewInt(int64(price)), big.NewInt(n))
	q, m := new(big.Int).QuoRem(p, big.NewInt(1_000_000), new(big.Int))
	if m.CmpAbs(big.NewInt(500_000)) >= 0 {
		q.Add(q, big.NewInt(int64(p.Sign())))
	}
	switch {
	case q.IsInt64():
		return USD(q.Int64())
	case q.Sign() > 0:
		return MaxUSD
	}
	return USD(math.MinInt64)
}

func TestMulTokensMatchesExactArithmetic(t *testing.T) {
	edges := []int64{0, 1, -1, 499_999, 500_000, 500_001, 999_999, 1_000_000, 1_500_000, -1_500_000,
		math.MaxInt64, math.MinInt64, math.MaxInt64 / 1_000_000, math.MinInt64 / 3, 1 << 40, -(1 << 40)}
	for _, p := range edges {
		for _, n := range edges {
			if got, want := USD(p).MulTokens(n), mulTokensExact(USD(p), n); got != want {
				t.Errorf("USD(%d).MulTokens(%d) = %d, want %d", p, n, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for range 200_000 {
		// Magnitudes spread over the whole range, so that products fall
		// on both sides of the 64-bit quotient's limit.
		p := rng.Int64() >> rng.IntN(63)
		n := rng.Int64() >> rng.IntN(63)
		if rng.IntN(2) == 0 {
			p = -p
		}
		if rng.IntN(2) == 0 {
			n = -n
		}
		if got, want := USD(p).MulTokens(n), mulTokensExact(USD(p), n); got != want {
			t.Fatalf("USD(%d).MulTokens(%d) = %d, want %d", p, n, got, want)
		}
	}
}

// ParseUSD reads plain decimals only (adversary finding: it took 0x10, 0b1
// and 1_000 through big.Rat, but not 1e3).
func TestParseUSDPlainDecimal(t *testing.T) {
	for s, want := range map[string]USD{"16": Dollars(16), "$0.0000375": Micros(37) + 500_000, " 1.50 ": Micros(1_500_000),
		".5": Micros(500_000), "-2": Dollars(-2), "007": Dollars(7)} {
		if got, err := ParseUSD(s); err != nil || got != want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"0x10", "0b1", "0o7", "1_000", "1e3", "1E-2", "0x1p4", "1/2", "Inf", "NaN", "", "$", "1,000", "$ 1"} {
		if got, err := ParseUSD(s); !errors.Is(err, ErrMoneyFormat) || err.Error() != "budget: not a dollar amount: "+strconv.Quote(s) {
			t.Errorf("ParseUSD(%q) = %d, %v; want ErrMoneyFormat", s, got, err)
		}
	}
}

func TestDecimal(t *testing.T) {
	for _, c := range []struct {
		a    USD
		want string
	}{
		{0, "0.00"},
		{Dollars(1), "1.00"},
		{Micros(37_500), "0.0375"},
		{1, "0.000000000001"},
		{-1, "-0.000000000001"},
		{Dollars(-12), "-12.00"},
		{USD(1_234_567_890_123_456), "1234.567890123456"},
		{USD(10), "0.00000000001"},
		{USD(100_000_000_000), "0.10"},
		{MaxUSD, "9223372.036854775807"},
		{USD(math.MinInt64), "-9223372.036854775808"},
	} {
		if got := c.a.Decimal(); got != c.want {
			t.Errorf("USD(%d).Decimal() = %q, want %q", int64(c.a), got, c.want)
		}
		if c.a == USD(math.MinInt64) {
			continue // its magnitude is outside the range ParseUSD reads back
		}
		if back, err := ParseUSD(c.want); err != nil || back != c.a {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", c.want, back, err, int64(c.a))
		}
	}
}

// An amount beyond a USD's range is ErrMoneyRange (and ErrMoneyFormat); a
// malformed one is not ErrMoneyRange.
func TestParseUSDRange(t *testing.T) {
	for _, s := range []string{"10000000", "-10000000", "$99999999999.5"} {
		if _, err := ParseUSD(s); !errors.Is(err, ErrMoneyRange) || !errors.Is(err, ErrMoneyFormat) {
			t.Errorf("ParseUSD(%q) = %v; want ErrMoneyRange and ErrMoneyFormat", s, err)
		}
	}
	for _, s := range []string{"1e9", "abc", "0.0000000000001"} {
		if _, err := ParseUSD(s); err == nil || errors.Is(err, ErrMoneyRange) {
			t.Errorf("ParseUSD(%q) = %v; want an error that is not ErrMoneyRange", s, err)
		}
	}
	if v, err := ParseUSD("9000000"); err != nil || v != Dollars(9_000_000) {
		t.Errorf("ParseUSD(9000000) = %v, %v", v, err)
	}
}
