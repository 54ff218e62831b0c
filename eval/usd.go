package eval

import "github.com/belay-run/belay/budget"

func parseUSD(s string) (budget.USD, error) { return budget.ParseUSD(s) }
