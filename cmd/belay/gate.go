package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/belay-run/belay/eval"
	"github.com/belay-run/belay/eval/gate"
)

func gateCmd() *cobra.Command {
	var cfg gate.Config
	c := &cobra.Command{
		Use:   "gate BASELINE CANDIDATE",
		Short: "Fail when the candidate's pass rate, cost or latency regressed from the baseline (exit 0 pass, 1 regression, 2 bad input)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := eval.ReadReport(args[0])
			if err != nil {
				return badInput(err)
			}
			cand, err := eval.ReadReport(args[1])
			if err != nil {
				return badInput(err)
			}
			res, err := gate.Compare(base.GateGroups(), cand.GateGroups(), cfg)
			if err != nil {
				return badInput(err)
			}
			if err := res.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if res.Regressed() {
				return exit(1, fmt.Errorf("regression: %v", res.Flagged()))
			}
			return nil
		},
	}
	f := c.Flags()
	f.Float64Var(&cfg.Alpha, "alpha", 0.05, "one-sided significance level")
	f.Float64Var(&cfg.CostTolerance, "cost-tolerance", 0.10, "allowed rise in cost per successful run (0.10 = +10%)")
	f.Float64Var(&cfg.LatencyTolerance, "latency-tolerance", 0.10, "allowed rise in p95 latency")
	f.IntVar(&cfg.BootstrapIters, "bootstrap", 2000, "bootstrap rounds for the cost and latency checks (negative: off)")
	f.Int64Var(&cfg.Seed, "seed", 1, "bootstrap seed")
	return c
}
