package gate

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestAdversary13MissingScenarioFailsGate: a scenario of the baseline that
// the candidate lacks fails the gate unless Config.AllowMissing; a new
// scenario of the candidate is reported and does not (adversary finding
// 13: renaming a scenario whose pass rate fell to 0/20 passed the gate).
func TestAdversary13MissingScenarioFailsGate(t *testing.T) {
	base := []Group{{Name: "a", Runs: 20, Passes: 20}, {Name: "b", Runs: 20, Passes: 20}}
	cand := []Group{{Name: "a-renamed", Runs: 20, Passes: 0}, {Name: "b", Runs: 20, Passes: 20}}
	res, err := Compare(base, cand, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Regressed() {
		t.Fatalf("the gate passed with scenario a missing from the candidate: %v", res)
	}
	a := rowByName(t, res, "a")
	if a.Presence != BaselineOnly || !slices.Equal(a.Flags, []Flag{FlagMissing}) {
		t.Errorf("a: presence %v flags %v, want baseline only, flagged %s", a.Presence, a.Flags, FlagMissing)
	}
	if !strings.Contains(a.Why, "can hide a regression") {
		t.Errorf("a: why %q does not say why a missing scenario fails", a.Why)
	}
	if r := rowByName(t, res, "a-renamed"); r.Regressed() || r.Presence != CandidateOnly {
		t.Errorf("a-renamed: presence %v flags %v, want candidate only and not flagged", r.Presence, r.Flags)
	}
	if got := res.Missing(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Missing() = %v, want [a]", got)
	}
	if got := res.Flagged(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Flagged() = %v, want [a]", got)
	}
	if s := res.String(); !strings.Contains(s, "a (missing in the candidate)") {
		t.Errorf("verdict %q does not name the missing scenario", s)
	}

	var buf bytes.Buffer
	if err := res.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REGRESSED: a (missing in the candidate)", "MISSING", "a: in the baseline but not in the candidate: a removed or renamed scenario can hide a regression"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, buf.String())
		}
	}

	res, err = Compare(base, cand, Config{AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Regressed() || !res.Config.AllowMissing {
		t.Errorf("with AllowMissing: regressed %v (%v)", res.Regressed(), res)
	}
	if got := res.Missing(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("with AllowMissing, Missing() = %v, want [a]", got)
	}
}

// TestAdversary13BadSamples: a sample with a negative, NaN or infinite cost
// or latency is invalid input; an empty sample list means no samples (the
// cost and latency checks are skipped), a non-empty one must match the
// runs (adversary finding 13).
func TestAdversary13BadSamples(t *testing.T) {
	good := []Group{{Name: "a", Runs: 20, Passes: 18, Samples: samples(20, 18, 0.01, 100)}}
	bad := func(edit func(*Sample)) []Group {
		s := samples(20, 18, 0.01, 100)
		edit(&s[3])
		return []Group{{Name: "a", Runs: 20, Passes: 18, Samples: s}}
	}
	cases := map[string][]Group{
		"negative cost":    bad(func(s *Sample) { s.CostUSD = -0.5 }),
		"NaN cost":         bad(func(s *Sample) { s.CostUSD = math.NaN() }),
		"infinite cost":    bad(func(s *Sample) { s.CostUSD = math.Inf(1) }),
		"negative latency": bad(func(s *Sample) { s.LatencyMS = -1 }),
		"NaN latency":      bad(func(s *Sample) { s.LatencyMS = math.NaN() }),
		"fewer samples":    {{Name: "a", Runs: 20, Passes: 18, Samples: samples(19, 18, 0.01, 100)}},
	}
	for name, groups := range cases {
		if _, err := Compare(good, groups, Config{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s in the candidate: err = %v, want ErrInvalid", name, err)
		}
		if _, err := Compare(groups, good, Config{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s in the baseline: err = %v, want ErrInvalid", name, err)
		}
	}
	none := []Group{{Name: "a", Runs: 20, Passes: 18, Samples: []Sample{}}}
	res, err := Compare(good, none, Config{})
	if err != nil {
		t.Fatalf("empty samples: %v", err)
	}
	if row := rowByName(t, res, "a"); row.Cost.Checked || row.Latency.Checked {
		t.Errorf("empty samples: cost or latency checked: %+v %+v", row.Cost, row.Latency)
	}
}

// A scenario the candidate has but ran 0 times, where the baseline ran it,
// fails the gate as a missing one does unless Config.AllowMissing (helper
// finding: it passed as "no runs on one side: not compared").
func TestScenarioNotRunInCandidateFailsGate(t *testing.T) {
	base := []Group{{Name: "a", Runs: 20, Passes: 20}, {Name: "b", Runs: 20, Passes: 20}}
	cand := []Group{{Name: "a", Runs: 0, Passes: 0}, {Name: "b", Runs: 20, Passes: 20}}
	res, err := Compare(base, cand, Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := rowByName(t, res, "a")
	if !res.Regressed() || !slices.Equal(a.Flags, []Flag{FlagMissing}) || res.String() != "REGRESSED: a (not run in the candidate)" {
		t.Errorf("regressed %v, a's flags %v, verdict %q; want a flagged missing, not run", res.Regressed(), a.Flags, res.String())
	}
	if want := "ran 20 times in the baseline but not at all in the candidate: a scenario that did not run can hide a regression"; !strings.HasPrefix(a.Why, want) {
		t.Errorf("a: why %q, want it to start %q", a.Why, want)
	}
	if res, err = Compare(base, cand, Config{AllowMissing: true}); err != nil || res.Regressed() {
		t.Errorf("with AllowMissing: regressed %v, error %v", res.Regressed(), err)
	}
}
