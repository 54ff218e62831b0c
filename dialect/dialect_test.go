package dialect_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/failure"
)

func TestRewriteModel(t *testing.T) {
	for _, tc := range []struct{ in, model, want string }{
		{`{"model":"a","x":1}`, "b", `{"model":"b","x":1}`},
		{"{ \"stream\" : true,\n  \"model\"\t:\n \"gpt-4o\" , \"n\": 1.50e0}", "m/2", "{ \"stream\" : true,\n  \"model\"\t:\n \"m/2\" , \"n\": 1.50e0}"},
		{`{"messages":[{"model":"keep"}],"model":"a","tools":{"model":"keep"}}`, "z", `{"messages":[{"model":"keep"}],"model":"z","tools":{"model":"keep"}}`},
		{`{"model":"a","model":"b"}`, "c", `{"model":"c","model":"c"}`},
		{`{"x":"é\u00e9"}`, "q\"u", `{"model":"q\"u","x":"é\u00e9"}`},
		{` {} `, "m", ` {"model":"m"} `},
		{`{"model":null}`, "m", `{"model":"m"}`},
	} {
		got, err := dialect.RewriteModel([]byte(tc.in), tc.model)
		if err != nil || string(got) != tc.want {
			t.Errorf("RewriteModel(%s, %q) = %s, %v; want %s", tc.in, tc.model, got, err, tc.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"model":`, `{"a":1} {}`, `"s"`} {
		if _, err := dialect.RewriteModel([]byte(bad), "m"); !errors.Is(err, dialect.ErrNotObject) {
			t.Errorf("RewriteModel(%q) err = %v, want ErrNotObject", bad, err)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	for chars, want := range map[int64]int64{-1: 0, 0: 0, 1: 1, 4: 1, 5: 2, 400: 100} {
		if got := dialect.EstimateTokens(chars); got != want {
			t.Errorf("EstimateTokens(%d) = %d, want %d", chars, got, want)
		}
	}
}

func TestUsageSums(t *testing.T) {
	u := dialect.Usage{Input: 10, Output: 5, CachedInput: 3, CacheWrite: 2, CacheWrite1h: 1, Reasoning: 1, WebSearches: 2, FileSearches: 1}
	if u.Prompt() != 15 || u.Total() != 20 || u.Add(u) != (dialect.Usage{20, 10, 6, 4, 2, 2, 4, 2, ""}) {
		t.Fatalf("%+v", u)
	}
	p := dialect.Usage{Tier: "priority"}
	if !p.Empty() || u.Empty() || u.Add(p).Tier != "priority" || p.Add(dialect.Usage{Tier: "default"}).Tier != "priority" {
		t.Fatalf("Empty/Add with Tier: %v %v %+v", p.Empty(), u.Empty(), u.Add(p))
	}
}

func TestDecodeErrorNamesField(t *testing.T) {
	var v struct {
		Model    string `json:"model"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	err := dialect.DecodeError(json.Unmarshal([]byte(`{"messages":[{"role":3}]}`), &v))
	if err.Field != "messages.role" || err.Problem != "must be a string, not number" {
		t.Fatalf("%+v", err)
	}
	if !errors.Is(err, failure.InvalidRequest) || !errors.Is(err, failure.Permanent) {
		t.Fatal("FieldError should match failure.InvalidRequest")
	}
	if e := dialect.DecodeError(json.Unmarshal([]byte(`{"model":`), &v)); e.Field != "body" {
		t.Fatalf("%+v", e)
	}
}
