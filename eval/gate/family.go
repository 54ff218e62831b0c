package gate

import (
	"cmp"
	"slices"

	"github.com/belay-run/belay/eval/stats"
)

// hypothesis is one member of the pass-rate family: the rows it decides
// (two when the overall row and the only scenario are the same table), its
// one-sided p-value, and its share of Alpha.
type hypothesis struct {
	rows   []*Row
	p      float64
	weight float64
}

// testPassRates runs the pass-rate test of every row and decides them as
// one family with weighted Holm (see the package documentation).
func (res *Result) testPassRates(cfg Config) {
	var scen []*Row
	for i := range res.Scenarios {
		row := &res.Scenarios[i]
		row.test(cfg.MinCell)
		switch {
		case row.inFamily():
			scen = append(scen, row)
		case row.Test != TestNone:
			row.AdjustedP = row.PValue // 1: no evidence either way
		}
	}
	ov := &res.Overall
	ov.test(cfg.MinCell)
	ov.stratify(res.Scenarios)
	if !ov.inFamily() && ov.Test != TestNone {
		ov.AdjustedP = ov.PValue
	}
	fam := family(ov, scen, cfg.OverallWeight)
	ps := make([]float64, len(fam))
	ws := make([]float64, len(fam))
	for i, h := range fam {
		ps[i], ws[i] = h.p, h.weight
	}
	for i, adj := range weightedHolm(ps, ws) {
		for _, row := range fam[i].rows {
			row.AdjustedP = adj
			row.holm = len(fam) > 1
			row.decidePassRate(cfg.Alpha)
		}
	}
}

// stratify replaces the overall row's test by the Cochran–Mantel–Haenszel
// test over the scenarios compared (run on both sides) when there are two
// or more: pooled counts compare suites whose scenarios ran in different
// proportions (an edited runs:, a scenario run more in one report) and
// see a drop that is in no scenario (Simpson's paradox; an adversarial
// review's example: easy 95/100 and hard 5/10 against easy 19/20 and hard
// 50/100 read as 90.9% → 57.5%, z 5.73). With one scenario the overall
// row keeps that scenario's own test, so the two agree.
func (ov *Row) stratify(scen []Row) {
	var strata []stats.Stratum
	for _, r := range scen {
		if r.Presence == Both && r.Base.Runs > 0 && r.Cand.Runs > 0 {
			strata = append(strata, stats.Stratum{BaseSucc: r.Base.Passes, BaseN: r.Base.Runs, CandSucc: r.Cand.Passes, CandN: r.Cand.Runs})
		}
	}
	if len(strata) < 2 || ov.Test == TestNone {
		return
	}
	ov.Test = TestCMH
	ov.Z, ov.cmhTested = stats.CMHZ(strata)
	ov.PValue = 1
	if ov.cmhTested {
		ov.PValue = stats.NormalUpperTail(ov.Z)
	}
}

// family builds the hypotheses. The overall row gets weight overallWeight
// and the scenarios share the rest equally. When the only scenario in the
// family is the whole overall table (a one-scenario suite), the two rows
// test the same hypothesis and it gets the whole weight: counting it twice
// would halve its level for nothing.
func family(ov *Row, scen []*Row, overallWeight float64) []hypothesis {
	if !ov.inFamily() {
		// Every scenario is all-pass or all-fail on both sides, so scen
		// is empty; kept general in case that ever changes.
		out := make([]hypothesis, 0, len(scen))
		for _, r := range scen {
			out = append(out, hypothesis{rows: []*Row{r}, p: r.PValue, weight: 1 / float64(len(scen))})
		}
		return out
	}
	if len(scen) == 0 {
		return []hypothesis{{rows: []*Row{ov}, p: ov.PValue, weight: 1}}
	}
	if len(scen) == 1 && sameTable(*scen[0], *ov) {
		return []hypothesis{{rows: []*Row{scen[0], ov}, p: ov.PValue, weight: 1}}
	}
	out := []hypothesis{{rows: []*Row{ov}, p: ov.PValue, weight: overallWeight}}
	each := (1 - overallWeight) / float64(len(scen))
	for _, r := range scen {
		out = append(out, hypothesis{rows: []*Row{r}, p: r.PValue, weight: each})
	}
	return out
}

func sameTable(a, b Row) bool {
	return a.Base.Runs == b.Base.Runs && a.Base.Passes == b.Base.Passes &&
		a.Cand.Runs == b.Cand.Runs && a.Cand.Passes == b.Cand.Passes
}

// weightedHolm returns the adjusted p-values of weighted Holm, in the
// order of ps. Weights are positive and sum to at most 1. The hypothesis
// with the smallest p/w is tested first at level α·w/W, with W the total
// weight of the hypotheses not yet rejected; each rejection hands its
// weight on to the rest in proportion to theirs. The adjusted p-value of
// the k-th in that order is the running maximum of p·W/w, capped at 1, so
// a hypothesis is rejected at level α exactly when its adjusted value is
// ≤ α. With equal weights this is Holm's procedure. It controls the
// family-wise error rate at α under any dependence between the tests: it is
// the closed test of weighted Bonferroni tests.
//
// Sources: S. Holm, "A simple sequentially rejective multiple test
// procedure", Scandinavian Journal of Statistics 6 (1979), which gives the
// weighted form; F. Bretz, W. Maurer, W. Brannath, M. Posch, "A graphical
// approach to sequentially rejective multiple test procedures", Statistics
// in Medicine 28 (2009).
func weightedHolm(ps, ws []float64) []float64 {
	order := make([]int, len(ps))
	remaining := 0.0
	for i := range order {
		order[i] = i
		remaining += ws[i]
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(ps[a]/ws[a], ps[b]/ws[b])
	})
	out := make([]float64, len(ps))
	running := 0.0
	for _, i := range order {
		running = max(running, min(1, ps[i]*remaining/ws[i]))
		out[i] = running
		remaining -= ws[i]
	}
	return out
}
