package gate

import (
	"encoding/json"
	"strings"
	"testing"
)

// Regression test: a Result with an untested row (NaN p-value and rate) or
// a side where nothing passed (cost per success +Inf) made json.Marshal fail.
func TestResultEncodesToJSON(t *testing.T) {
	base := []Group{
		{Name: "checkout", Runs: 200, Passes: 177},
		{Name: "broke", Runs: 10, Passes: 10, Samples: samples(10, 10, 0.01, 100)},
		{Name: "old", Runs: 5, Passes: 5},
	}
	cand := []Group{
		{Name: "checkout", Runs: 200, Passes: 148},
		{Name: "broke", Runs: 10, Passes: 0, Samples: samples(10, 0, 0.01, 100)},
		{Name: "empty", Runs: 0},
	}
	res, err := Compare(base, cand, Config{BootstrapIters: 50})
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	var got struct {
		Config    map[string]any   `json:"config"`
		Scenarios []map[string]any `json:"scenarios"`
		Overall   map[string]any   `json:"overall"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("Unmarshal %s: %v", out, err)
	}
	rows := map[string]map[string]any{}
	for _, r := range got.Scenarios {
		rows[r["name"].(string)] = r
	}
	old := rows["old"]
	if old["presence"] != "baseline only" || old["p_value"] != nil || old["cand"].(map[string]any)["rate"] != nil {
		t.Errorf("old row: %v", old)
	}
	co := rows["checkout"]
	if co["presence"] != "both" || co["test"] != "z" || co["flags"].([]any)[0] != "pass_rate" || co["p_value"].(float64) <= 0 {
		t.Errorf("checkout row: %v", co)
	}
	if cost := rows["broke"]["cost"].(map[string]any); cost["cand"] != nil || cost["base"].(float64) <= 0 {
		t.Errorf("broke cost (nothing passed in the candidate): %v", cost)
	}
	if got.Config["overall_weight"] != 0.8 || got.Overall["name"] != OverallName {
		t.Errorf("config %v, overall name %v", got.Config, got.Overall["name"])
	}
	if s := string(out); !strings.Contains(s, `"adjusted_p":null`) {
		t.Errorf("no null adjusted_p in %s", s)
	}
	var p Presence
	if err := p.UnmarshalText([]byte("candidate only")); err != nil || p != CandidateOnly {
		t.Errorf("UnmarshalText: %v, %v", p, err)
	}
}
