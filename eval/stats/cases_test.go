package stats

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// statsCases is the shape of shared/cases/stats.json (see
// shared/cases/README.md). Every top-level key must be one of these; a new
// kind of case fails the test until it is checked here.
type statsCases struct {
	About     string  `json:"about"`
	Tolerance float64 `json:"tolerance"`
	Wilson    []struct {
		Successes  int     `json:"successes"`
		Trials     int     `json:"trials"`
		Confidence float64 `json:"confidence"`
		Low        float64 `json:"low"`
		High       float64 `json:"high"`
	} `json:"wilson"`
	TwoProportionZ []struct {
		BaselineSuccesses  int     `json:"baseline_successes"`
		BaselineTrials     int     `json:"baseline_trials"`
		CandidateSuccesses int     `json:"candidate_successes"`
		CandidateTrials    int     `json:"candidate_trials"`
		Z                  float64 `json:"z"`
	} `json:"two_proportion_z"`
	PassHatK []struct {
		Successes int     `json:"successes"`
		Trials    int     `json:"trials"`
		K         int     `json:"k"`
		Value     float64 `json:"value"`
	} `json:"pass_hat_k"`
}

var knownSections = []string{"about", "tolerance", "wilson", "two_proportion_z", "pass_hat_k"}

// findSharedCases walks up from the working directory to the first
// directory holding shared/cases/stats.json (the shared folder is a sibling
// of the repository root).
func findSharedCases() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		p := filepath.Join(dir, "shared", "cases", "stats.json")
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func TestStatsCases(t *testing.T) {
	var files []string
	if p, ok := findSharedCases(); ok {
		files = append(files, p)
	}
	if extra := os.Getenv("BELAY_STATS_CASES"); extra != "" {
		files = append(files, extra) // a missing named file fails in checkCaseFile
	}
	if len(files) == 0 {
		t.Skip("shared/cases/stats.json not found above the working directory and BELAY_STATS_CASES is unset")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { checkCaseFile(t, f) })
	}
}

func checkCaseFile(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stats cases file %s does not exist", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(data, &sections); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for key := range sections {
		if !slices.Contains(knownSections, key) {
			t.Errorf("%s: unknown section %q: add a check for it to TestStatsCases", path, key)
		}
	}
	var c statsCases
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a new field in a case is a new thing to check
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tol := c.Tolerance
	if !(tol > 0) {
		t.Fatalf("%s: tolerance %v: must be positive", path, tol)
	}
	checked := 0
	for _, w := range c.Wilson {
		lo, hi := Wilson(w.Successes, w.Trials, w.Confidence)
		if math.Abs(lo-w.Low) > tol || math.Abs(hi-w.High) > tol {
			t.Errorf("Wilson(%d, %d, %v) = [%.6f, %.6f], want [%.6f, %.6f] ± %v",
				w.Successes, w.Trials, w.Confidence, lo, hi, w.Low, w.High, tol)
		}
		checked++
	}
	for _, z := range c.TwoProportionZ {
		got := TwoProportionZ(z.BaselineSuccesses, z.BaselineTrials, z.CandidateSuccesses, z.CandidateTrials)
		if math.Abs(got-z.Z) > tol {
			t.Errorf("TwoProportionZ(%d/%d vs %d/%d) = %.5f, want %.5f ± %v",
				z.BaselineSuccesses, z.BaselineTrials, z.CandidateSuccesses, z.CandidateTrials, got, z.Z, tol)
		}
		checked++
	}
	for _, p := range c.PassHatK {
		got, ok := PassHatK(p.Successes, p.Trials, p.K)
		if !ok || math.Abs(got-p.Value) > tol {
			t.Errorf("PassHatK(%d, %d, %d) = %.6f, %v; want %.6f ± %v",
				p.Successes, p.Trials, p.K, got, ok, p.Value, tol)
		}
		checked++
	}
	if checked == 0 {
		t.Errorf("%s: no cases", path)
	}
	t.Logf("%s: %d cases checked", path, checked)
}
