// Package gate decides whether a candidate build of an agent is worse than
// a baseline, from two summaries of the same scenario suite (`belay gate
// BASELINE CANDIDATE`).
//
// For each scenario present on both sides, and for the suite overall, it
// tests whether the candidate's pass rate is lower: a one-sided pooled
// two-proportion z-test, or Fisher's exact test when an expected cell of
// the 2×2 table is below Config.MinCell. The overall row shows the pooled
// runs of the scenarios run on both sides, and, when there are two or
// more, tests them stratified by scenario (one-sided Cochran–Mantel–
// Haenszel, stats.CMHZ): pooled counts would read a change in how many
// runs each scenario had as a change in pass rate (Simpson's paradox).
//
// The overall row and the scenarios form one family, decided with weighted
// Holm (a sequentially rejective closed test): the overall row is first
// tested at Config.OverallWeight·Alpha (default 0.8·Alpha) and the
// scenarios share the rest equally; each rejection hands its share of Alpha
// on to the hypotheses still standing, so once the overall drop is
// established the scenarios are tested by plain Holm at the full Alpha. The
// chance that the gate raises any false pass-rate alarm (Result.Regressed
// on the pass rate, overall or any scenario) is therefore at most Alpha
// under any dependence between the tests, as far as each test holds its
// level (the z-test is a normal approximation: its exact one-scenario rate
// reaches 5.2–5.6% at some sizes); the seeded simulation in sim_test.go
// measures 2.4–5.0% at Alpha = 0.05 on A/A comparisons.
// Scenarios whose runs all passed, or all failed, on both sides cannot show
// a drop and are left out of the family, as Tarone's rule allows. In a
// one-scenario suite the overall row is the scenario's own table, so the
// two are one hypothesis tested at the full Alpha. The weights trade power:
// with the default, a 10-point drop from 90% over 200 runs a side is caught
// about 89% of the time in a one-scenario suite and 86% when the drop is
// spread over four, while a drop confined to one scenario of four (200 runs
// each) is caught about 62% of the time, against about 71% for Holm over
// the scenarios alone (measured in sim_test.go).
//
// When per-run samples are given, it also checks cost per successful run
// and p95 latency: a seeded percentile bootstrap gives a (1−2·Alpha)
// interval for the ratio candidate/baseline (for the overall row of two
// or more scenarios, both sides standardized to the same mix of
// scenarios, their runs on both sides combined, and the bootstrap
// stratified by scenario: pooled samples would read a change in how many
// runs each scenario had as a change in cost or latency, as for the pass
// rate), and the row is flagged when the
// interval's low bound exceeds 1 + tolerance — a one-sided test at level
// Alpha/m that the candidate is worse by more than the tolerance, where m
// is the number of rows checked (Bonferroni; the overall row counts unless
// it is a one-scenario suite's only scenario again): at Alpha per row,
// identical builds of 7 scenarios of 20 runs failed on cost in about 14% of
// seeded trials, and at Alpha/m in 1–3% (sim_test.go).
//
// A scenario of the baseline that the candidate lacks fails the gate
// (FlagMissing) unless Config.AllowMissing: removing or renaming a scenario
// would otherwise hide its regression, and the overall row pools only the
// scenarios on both sides. A scenario new in the candidate is reported, not
// compared, and does not fail the gate. Compare is a pure function and safe
// for concurrent use.
package gate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ErrInvalid is wrapped by the errors Compare returns for a bad Config or a
// summary whose counts do not add up.
var ErrInvalid = errors.New("gate: invalid input")

// Sample is one run of a scenario.
type Sample struct {
	Passed    bool
	CostUSD   float64 // what the run cost, in US dollars; finite and ≥ 0
	LatencyMS float64 // wall-clock duration of the run, in milliseconds; finite and ≥ 0
}

// Group is one scenario's results on one side of the comparison.
type Group struct {
	Name   string // scenario name; unique and non-empty on each side
	Runs   int    // runs executed, ≥ 0
	Passes int    // runs that passed, in [0, Runs]
	// Samples optionally holds every run; when non-empty it must have Runs
	// entries of which Passes passed, each with a finite, non-negative cost
	// and latency. Nil or empty means no samples: the cost and latency
	// checks are skipped for the scenario.
	Samples []Sample
}

// Config tunes the gate. The zero value of each field means its default.
type Config struct {
	// Alpha is the one-sided significance level, in (0, 0.5). Default 0.05.
	Alpha float64 `json:"alpha"`
	// CostTolerance is how much worse cost per successful run may be before
	// it counts: a flag needs the ratio's low bound above 1+CostTolerance.
	// Default 0.10 (+10%). Must be ≥ 0; to flag any increase use a tiny
	// positive value.
	CostTolerance float64 `json:"cost_tolerance"`
	// LatencyTolerance is the same for p95 latency. Default 0.10.
	LatencyTolerance float64 `json:"latency_tolerance"`
	// LatencyFails makes a p95 latency rise beyond LatencyTolerance fail
	// the gate. By default it is a warning (Row.Warnings): wall-clock
	// latency moves with the load of the machine each report was measured
	// on, which the bootstrap over one report's runs does not see (two
	// reports of one build, measured minutes apart on a busy machine, gave
	// a p95 ×2.45). Set it when both sides run on the same quiet machine.
	LatencyFails bool `json:"latency_fails"`
	// BootstrapIters is the number of bootstrap rounds per check, at most
	// MaxBootstrapIters. Default 2000; a negative value turns the cost and
	// latency checks off.
	BootstrapIters int `json:"bootstrap_iters"`
	// Seed seeds the bootstrap. Each check draws from its own PCG stream
	// keyed by Seed and the scenario name, so a row's interval does not
	// change when other scenarios are added.
	Seed int64 `json:"seed"`
	// OverallWeight is the share of Alpha the overall row is first tested
	// at, in (0, 1); the scenarios share the rest equally, and each
	// rejection passes its share on (weighted Holm). Default 0.8: the
	// overall pass rate is the gate's main question, the scenarios tell
	// where a drop is. Ignored for a one-scenario suite, where the overall
	// row and the scenario are one test at the full Alpha.
	OverallWeight float64 `json:"overall_weight"`
	// MinCell is the smallest expected count in the 2×2 table of passes and
	// failures for which the z-test is used; below it, Fisher's exact test.
	// Default 5 (the usual rule for the normal approximation). Must be ≥ 0.
	MinCell int `json:"min_cell"`
	// AllowMissing accepts scenarios of the baseline that the candidate
	// lacks (removed or renamed on purpose). Default false: such a scenario
	// is flagged FlagMissing and fails the gate, since its regression would
	// go unseen.
	AllowMissing bool `json:"allow_missing"`
}

// MaxBootstrapIters is the most bootstrap rounds per check, 500 times the
// default. Each round keeps a float64, so a check holds at most 8 MB of
// them.
const MaxBootstrapIters = 1_000_000

// minBootstrapSamples is the fewest runs per side for a cost or latency
// check; below it a p95 or a cost per success is too unstable to compare.
const minBootstrapSamples = 10

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	if c.Alpha == 0 {
		c.Alpha = 0.05
	}
	if c.CostTolerance == 0 {
		c.CostTolerance = 0.10
	}
	if c.LatencyTolerance == 0 {
		c.LatencyTolerance = 0.10
	}
	if c.BootstrapIters == 0 {
		c.BootstrapIters = 2000
	}
	if c.MinCell == 0 {
		c.MinCell = 5
	}
	if c.OverallWeight == 0 {
		c.OverallWeight = 0.8
	}
	return c
}

// ScenarioAlpha returns the one-sided level at which the gate first tests
// one scenario's pass rate in a suite of scenarios: Alpha when there is
// one (it is the overall row's test), else its share (1−OverallWeight)·
// Alpha/scenarios (weighted Holm). A drop confined to one scenario is
// caught with a given power when the runs are enough at this level; a
// drop that also lowers the overall row can be caught sooner, once the
// overall row rejects and hands its share on. Defaults are applied first.
func (c Config) ScenarioAlpha(scenarios int) float64 {
	c = c.WithDefaults()
	if scenarios <= 1 {
		return c.Alpha
	}
	return (1 - c.OverallWeight) * c.Alpha / float64(scenarios)
}

// Validate reports the first field of c (after defaults) that is out of
// range, as an error wrapping ErrInvalid.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case !(c.Alpha > 0 && c.Alpha < 0.5):
		return fmt.Errorf("%w: alpha %v: must be in (0, 0.5)", ErrInvalid, c.Alpha)
	case !(c.CostTolerance >= 0):
		return fmt.Errorf("%w: cost tolerance %v: must be ≥ 0", ErrInvalid, c.CostTolerance)
	case c.BootstrapIters > MaxBootstrapIters:
		return fmt.Errorf("%w: bootstrap iters %d: must be at most %d (negative: off)", ErrInvalid, c.BootstrapIters, MaxBootstrapIters)
	case !(c.LatencyTolerance >= 0):
		return fmt.Errorf("%w: latency tolerance %v: must be ≥ 0", ErrInvalid, c.LatencyTolerance)
	case !(c.OverallWeight > 0 && c.OverallWeight < 1):
		return fmt.Errorf("%w: overall weight %v: must be in (0, 1)", ErrInvalid, c.OverallWeight)
	case c.MinCell < 0:
		return fmt.Errorf("%w: min cell %d: must be ≥ 0", ErrInvalid, c.MinCell)
	}
	return nil
}

func (g Group) validate(side string) error {
	prefix := fmt.Sprintf("%s scenario %q", side, g.Name)
	switch {
	case g.Name == "":
		return fmt.Errorf("%w: %s scenario with an empty name", ErrInvalid, side)
	case g.Runs < 0 || g.Passes < 0 || g.Passes > g.Runs:
		return fmt.Errorf("%w: %s: passes %d, runs %d: need 0 ≤ passes ≤ runs", ErrInvalid, prefix, g.Passes, g.Runs)
	case len(g.Samples) == 0:
		return nil
	case len(g.Samples) != g.Runs:
		return fmt.Errorf("%w: %s: %d samples for %d runs", ErrInvalid, prefix, len(g.Samples), g.Runs)
	}
	passed := 0
	for i, s := range g.Samples {
		if s.Passed {
			passed++
		}
		if !(s.CostUSD >= 0 && s.LatencyMS >= 0) || math.IsInf(s.CostUSD, 0) || math.IsInf(s.LatencyMS, 0) {
			return fmt.Errorf("%w: %s: sample %d: cost %v USD, latency %v ms: need finite values ≥ 0", ErrInvalid, prefix, i, s.CostUSD, s.LatencyMS)
		}
	}
	if passed != g.Passes {
		return fmt.Errorf("%w: %s: %d samples passed, summary says %d", ErrInvalid, prefix, passed, g.Passes)
	}
	return nil
}

// hasRuns refuses a side without a single run: every row would be left
// untested, and the gate would pass on no evidence.
func hasRuns(groups []Group, side string) error {
	if slices.ContainsFunc(groups, func(g Group) bool { return g.Runs > 0 }) {
		return nil
	}
	which := "it has no scenarios"
	if len(groups) > 0 {
		which = fmt.Sprintf("each of its %d scenarios ran 0 times", len(groups))
	}
	return fmt.Errorf("%w: the %s report has no runs (%s): it cannot show whether anything regressed", ErrInvalid, side, which)
}

func index(groups []Group, side string) (map[string]Group, error) {
	m := make(map[string]Group, len(groups))
	for _, g := range groups {
		if err := g.validate(side); err != nil {
			return nil, err
		}
		if _, dup := m[g.Name]; dup {
			return nil, fmt.Errorf("%w: %s scenario %q appears twice", ErrInvalid, side, g.Name)
		}
		m[g.Name] = g
	}
	return m, nil
}

// Compare compares a candidate's scenario summaries with a baseline's (see
// the package documentation for the tests) and returns one row per scenario
// on either side, sorted by name, and an overall row. It returns an error
// wrapping ErrInvalid if cfg is out of range, a side has no runs at all,
// or a summary is inconsistent (passes above runs, samples that do not
// match the counts, a negative or non-finite cost or latency, a duplicate
// or empty name).
func Compare(base, cand []Group, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.WithDefaults()
	bm, err := index(base, "baseline")
	if err != nil {
		return Result{}, err
	}
	cm, err := index(cand, "candidate")
	if err != nil {
		return Result{}, err
	}
	if err := hasRuns(base, "baseline"); err != nil {
		return Result{}, err
	}
	if err := hasRuns(cand, "candidate"); err != nil {
		return Result{}, err
	}
	names := make([]string, 0, len(bm)+len(cm))
	for n := range bm {
		names = append(names, n)
	}
	for n := range cm {
		if _, ok := bm[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)

	res := Result{Config: cfg, Scenarios: make([]Row, 0, len(names))}
	var poolB, poolC Group
	var strataB, strataC [][]Sample // the pooled samples by scenario
	sources := 0                    // scenarios whose samples the overall row pools
	for _, n := range names {
		b, inB := bm[n]
		c, inC := cm[n]
		row := newRow(n, b, c, inB, inC)
		// A scenario the candidate has but never ran hides a regression as
		// a removed one does.
		notRun := row.Presence == Both && b.Runs > 0 && c.Runs == 0
		if (row.Presence == BaselineOnly || notRun) && !cfg.AllowMissing {
			row.Flags = append(row.Flags, FlagMissing)
		}
		if row.Presence == Both && b.Runs > 0 && c.Runs > 0 {
			// A scenario run on one side only is not compared, so it is
			// not in the overall row either (an adversarial review: with
			// --allow-missing, a scenario the candidate ran 0 times added
			// its baseline runs to the overall's baseline side only).
			withSamples := len(b.Samples) > 0 && len(c.Samples) > 0
			poolB, poolC = pool(poolB, b, withSamples), pool(poolC, c, withSamples)
			if withSamples {
				sources++
				strataB, strataC = append(strataB, b.Samples), append(strataC, c.Samples)
			}
			if ratioCheckable(b, c, cfg) {
				res.ratioRows++
			}
		}
		res.Scenarios = append(res.Scenarios, row)
	}
	res.Overall = newRow(OverallName, poolB, poolC, true, true)
	res.testPassRates(cfg)
	// The cost and latency checks share Alpha over the rows they check
	// (Bonferroni): each row at its own α, a suite of 7 scenarios of 20
	// runs with the same costs on both sides failed the gate on cost in
	// about 14% of seeded trials (an adversarial review).
	// The overall row is a check of its own unless its samples are one
	// checked scenario's (a one-scenario suite: the same check twice).
	if ratioCheckable(poolB, poolC, cfg) && !(sources == 1 && res.ratioRows == 1) {
		res.ratioRows++
	}
	each := cfg.Alpha / float64(max(1, res.ratioRows))
	for i := range res.Scenarios {
		row := &res.Scenarios[i]
		if row.Presence == Both {
			row.checkRatios(bm[row.Name], cm[row.Name], cfg, row.Name, each)
		}
		row.explain(cfg, false)
	}
	res.Overall.checkOverallRatios(poolB, poolC, strataB, strataC, cfg, each)
	res.Overall.explain(cfg, true)
	return res, nil
}

// OverallName is the Name of Result.Overall.
const OverallName = "overall"

// pool adds g's counts to acc, and its samples when withSamples: samples
// are pooled only from scenarios that have them on both sides, so the
// overall cost and latency checks compare like with like.
func pool(acc, g Group, withSamples bool) Group {
	acc.Runs += g.Runs
	acc.Passes += g.Passes
	if withSamples {
		acc.Samples = append(acc.Samples, g.Samples...)
	}
	return acc
}

// Result is the outcome of Compare. It encodes to JSON with encoding/json:
// field names are snake_case (p_value, adjusted_p), NaN and ±Inf (a rate
// without runs, the p-value of an untested row, the cost per success of a
// side where nothing passed) encode as null, and Presence as its String.
type Result struct {
	Config    Config `json:"config"`    // the configuration used, defaults filled in
	Scenarios []Row  `json:"scenarios"` // every scenario on either side, sorted by name
	Overall   Row    `json:"overall"`   // pooled over the scenarios present on both sides
	// ratioRows counts the rows whose cost and latency were checked;
	// each was checked at Alpha/ratioRows.
	ratioRows int
}

// Warned reports whether any scenario or the overall row has a warning.
func (r Result) Warned() bool {
	return len(r.Overall.Warnings) > 0 || slices.ContainsFunc(r.Scenarios, func(row Row) bool { return len(row.Warnings) > 0 })
}

// Regressed reports whether any scenario or the overall row is flagged.
func (r Result) Regressed() bool {
	return r.Overall.Regressed() || slices.ContainsFunc(r.Scenarios, Row.Regressed)
}

// Flagged returns the names of the flagged scenarios, in row order.
func (r Result) Flagged() []string {
	var out []string
	for _, row := range r.Scenarios {
		if row.Regressed() {
			out = append(out, row.Name)
		}
	}
	return out
}

// Missing returns the names of the scenarios in the baseline but not in
// the candidate, in row order, whether or not Config.AllowMissing accepted
// them.
func (r Result) Missing() []string {
	var out []string
	for _, row := range r.Scenarios {
		if row.Presence == BaselineOnly {
			out = append(out, row.Name)
		}
	}
	return out
}

// String is a one-line verdict.
func (r Result) String() string {
	if !r.Regressed() {
		if r.Warned() {
			return fmt.Sprintf("OK: no regression in %d scenarios (with warnings; see why)", len(r.Scenarios))
		}
		return fmt.Sprintf("OK: no regression in %d scenarios", len(r.Scenarios))
	}
	var parts []string
	for _, row := range r.Scenarios {
		switch {
		case slices.Contains(row.Flags, FlagMissing) && row.Presence == Both:
			parts = append(parts, row.Name+" (not run in the candidate)")
		case slices.Contains(row.Flags, FlagMissing):
			parts = append(parts, row.Name+" (missing in the candidate)")
		case row.Regressed():
			parts = append(parts, row.Name)
		}
	}
	if r.Overall.Regressed() {
		parts = append(parts, OverallName)
	}
	return "REGRESSED: " + strings.Join(parts, ", ")
}
