package jsonnum

import (
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestCanonical(t *testing.T) {
	for n, want := range map[string]string{"40": "40", "40.50": "40.5", "-0.0": "0", "0.001": "0.001", "1e41": "1e41",
		"123e-45": "123e-45", "1.5e3": "1500", "1e1000000000000": "1e1000000000000", "9007199254740993": "9007199254740993",
		"-15e-1": "-1.5", "4.0E+1": "40", "0e10": "0"} {
		if got := Canonical(n); got != want {
			t.Errorf("Canonical(%s) = %s, want %s", n, got, want)
		}
	}
}

// Spellings of one value give one text, and different values different
// texts, checked against math/big.Rat over seeded random values.
func TestCanonicalIsTheValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 15))
	seen := map[string]string{} // canonical text → the rational it stands for
	for range 5000 {
		mant := rng.Int64N(2_000_001) - 1_000_000
		exp := rng.IntN(21) - 10
		spellings := []string{
			strconv.FormatInt(mant, 10) + "e" + strconv.Itoa(exp),
			strconv.FormatInt(mant, 10) + "0e" + strconv.Itoa(exp-1),
			strconv.FormatInt(mant, 10) + ".000E" + strconv.Itoa(exp),
		}
		var r big.Rat
		r.SetString(spellings[0])
		want := Canonical(spellings[0])
		for _, sp := range spellings[1:] {
			if got := Canonical(sp); got != want {
				t.Fatalf("%s gives %s, %s gives %s", spellings[0], want, sp, got)
			}
		}
		if prev, ok := seen[want]; ok && prev != r.RatString() {
			t.Fatalf("%s stands for %s and for %s", want, prev, r.RatString())
		}
		seen[want] = r.RatString()
	}
}
