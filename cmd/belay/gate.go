package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/eval/gate"
)

func gateCmd() *cobra.Command {
	var cfg gate.Config
	c := &cobra.Command{
		Use:   "gate BASELINE CANDIDATE",
		Short: "Fail when the candidate's pass rate, cost or latency regressed from the baseline (exit 0 pass, 1 regression, 2 bad input)",
		Long: `gate compares two JSON reports of 'belay eval' (--json) of the same suite: the pass rate of
each scenario and overall (one-sided tests, Holm-corrected), and cost per success and p95 latency
when the reports carry per-run samples.

A scenario of the baseline that the candidate lacks (removed or renamed) fails the gate, since its
regression would go unseen; --allow-missing accepts it. A scenario new in the candidate is reported
and does not fail the gate. A scenario whose report has no samples ("samples": [] or none) is
compared on its pass rate only.

Exit status: 0 pass, 1 regression or missing scenario, 2 bad input (unreadable report, a report
with no runs, counts or samples that do not add up, a negative cost or latency).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := explicitZeros(cmd); err != nil {
				return badInput(err)
			}
			if n := cfg.BootstrapIters; n > gate.MaxBootstrapIters {
				return badInput(fmt.Errorf("--bootstrap %d: want 1 to %d rounds, or a negative number to turn the cost and latency checks off", n, gate.MaxBootstrapIters))
			}
			base, err := eval.ReadReport(args[0])
			if err != nil {
				return badInput(err)
			}
			cand, err := eval.ReadReport(args[1])
			if err != nil {
				return badInput(err)
			}
			if base.Suite != cand.Suite {
				// Reports of two suites share no scenario: with
				// --allow-missing the gate would pass comparing nothing.
				return badInput(fmt.Errorf("the reports are of different suites: %q (%s) and %q (%s); compare two reports of one suite", base.Suite, args[0], cand.Suite, args[1]))
			}
			res, err := gate.Compare(base.GateGroups(), cand.GateGroups(), cfg)
			if err != nil {
				return badInput(err)
			}
			if err := res.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if res.Regressed() {
				return exit(1, gateFailure(res))
			}
			return nil
		},
	}
	f := c.Flags()
	f.Float64Var(&cfg.Alpha, "alpha", 0.05, "one-sided significance level")
	f.Float64Var(&cfg.CostTolerance, "cost-tolerance", 0.10, "allowed rise in cost per successful run (0.10 = +10%)")
	f.Float64Var(&cfg.LatencyTolerance, "latency-tolerance", 0.10, "allowed rise in p95 latency")
	f.BoolVar(&cfg.LatencyFails, "fail-on-latency", false, "fail on a p95 latency rise (default: a warning; wall-clock latency moves with machine load between the two reports)")
	f.IntVar(&cfg.BootstrapIters, "bootstrap", 2000, fmt.Sprintf("bootstrap rounds for the cost and latency checks, at most %d (negative: off)", gate.MaxBootstrapIters))
	f.Int64Var(&cfg.Seed, "seed", 1, "bootstrap seed")
	f.BoolVar(&cfg.AllowMissing, "allow-missing", false, "accept scenarios of the baseline that the candidate lacks (removed or renamed on purpose)")
	return c
}

// explicitZeros refuses a 0 given on the command line for a flag whose
// zero gate.Config reads as "the default": --cost-tolerance 0 would
// otherwise silently be 0.10.
func explicitZeros(cmd *cobra.Command) error {
	for _, z := range []struct{ flag, want string }{
		{"alpha", "a significance level in (0, 0.5), such as 0.05"},
		{"cost-tolerance", "a rise above 0 (0.10 = +10%); to flag any rise, a tiny one such as 0.001"},
		{"latency-tolerance", "a rise above 0 (0.10 = +10%); to flag any rise, a tiny one such as 0.001"},
		{"bootstrap", "a number of rounds above 0, or a negative one to turn the cost and latency checks off"},
	} {
		f := cmd.Flags().Lookup(z.flag)
		if f.Changed {
			if v, err := strconv.ParseFloat(f.Value.String(), 64); err == nil && v == 0 {
				return fmt.Errorf("--%s 0: want %s", z.flag, z.want)
			}
		}
	}
	return nil
}

// gateFailure says why the gate failed: each missing scenario, then the
// regressed ones.
func gateFailure(res gate.Result) error {
	var lines, regressed []string
	for _, row := range res.Scenarios {
		switch {
		case slices.Contains(row.Flags, gate.FlagMissing) && row.Presence == gate.Both:
			lines = append(lines, fmt.Sprintf("scenario %s has 0 runs in the candidate (the baseline ran it): "+
				"a scenario left unrun can hide a regression; pass --allow-missing to accept", row.Name))
		case slices.Contains(row.Flags, gate.FlagMissing):
			lines = append(lines, fmt.Sprintf("scenario %s is in the baseline but not in the candidate: "+
				"a removed or renamed scenario can hide a regression; pass --allow-missing to accept", row.Name))
		case row.Regressed():
			regressed = append(regressed, row.Name)
		}
	}
	if res.Overall.Regressed() {
		regressed = append(regressed, gate.OverallName)
	}
	if len(regressed) > 0 {
		lines = append(lines, "regression: "+strings.Join(regressed, ", "))
	}
	return errors.New(strings.Join(lines, "\n"))
}
