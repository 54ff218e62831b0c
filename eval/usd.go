package eval

import (
	"errors"

	"github.com/belay-run/belay/budget"
)

// parseUSD reads an amount of money in a suite: a decimal number of US
// dollars, ≥ 0 (a limit or a ceiling below zero would fail every run).
func parseUSD(s string) (budget.USD, error) {
	v, err := budget.ParseUSD(s)
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, errors.New("must be ≥ 0")
	}
	return v, nil
}
