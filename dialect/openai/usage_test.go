package openai

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/belay-run/belay/dialect"
)

// usageByJSON is what ResponseUsage must equal: encoding/json's reading.
func usageByJSON(body []byte) (Usage, bool) {
	var p *Usage
	if dialect.DecodeMember(body, "usage", &p) != nil || p == nil {
		return Usage{}, false
	}
	return *p, true
}

func sameUsage(a, b Usage) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// ResponseUsage reads what encoding/json reads, on the usual bodies (read
// without reflection) and the unusual ones alike.
func TestResponseUsageMatchesEncodingJSON(t *testing.T) {
	bodies := []string{
		`{"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`,
		`{"usage":{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":192,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		`{"usage":null}`, `{"id":"x"}`, `{"usage":5}`, `{"usage":"12"}`, `{"usage":[]}`, `[]`, `null`, `not json`, ``,
		`{"usage":{"prompt_tokens":12.0}}`, `{"usage":{"prompt_tokens":1e2}}`, `{"usage":{"prompt_tokens":"12"}}`,
		`{"usage":{"prompt_tokens":-3,"completion_tokens":-0}}`, `{"usage":{"prompt_tokens":null,"completion_tokens":4}}`,
		`{"usage":{"prompt_tokens":99999999999999999999}}`, `{"usage":{"prompt_tokens":999999999999999999}}`,
		`{"usage":{"prompt_tokens":9223372036854775807}}`, `{"usage":{"prompt_tokens":true}}`,
		`{"usage":{"Prompt_Tokens":5,"completion_tokens":1}}`, `{"Usage":{"prompt_tokens":5}}`,
		`{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`, `{"usage":{"prompt_tokens":1},"usage":null}`,
		`{"usage":{"prompt_tokens_details":null,"prompt_tokens":3}}`, `{"usage":{"prompt_tokens_details":7}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":{"audio_tokens":1}}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":null}}`,
		`{"usage":{"prompt_tokens_details":{"Cached_Tokens":2}}}`, `{"usage":{"completion_tokens_details":{"reasoning_tokens":"x"}}}`,
		`{"usage":{"other":{"deep":[1,2,{"prompt_tokens":"no"}]},"prompt_tokens":8}}`, ` {"usage" : { "prompt_tokens" : 8 } } `,
		`{"usage":{"prompt_tok\u0065ns":8}}`, `{"usage":{"prompt_tokens":8,}}`, `{"usage":{"prompt_tokens":08}}`,
	}
	for _, dir := range []string{filepath.Join("..", "..", "..", "shared", "cases", "wire"), os.Getenv("BELAY_WIRE_CASES")} {
		if dir == "" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Body   string `json:"body"`
				Stream bool   `json:"stream"`
			}
			if json.Unmarshal(b, &c) == nil && !c.Stream {
				bodies = append(bodies, c.Body)
			}
		}
	}
	quick := 0
	for _, b := range bodies {
		got, ok := ResponseUsage([]byte(b))
		want, wantOK := usageByJSON([]byte(b))
		if ok != wantOK || !sameUsage(got, want) {
			t.Errorf("ResponseUsage(%s) = %+v, %v; encoding/json reads %+v, %v", b, got, ok, want, wantOK)
		}
		if _, _, sure := usageQuick([]byte(b), dialect.EachMember); sure {
			quick++
		}
	}
	if quick < len(bodies)/2 {
		t.Errorf("only %d of %d bodies were read without reflection", quick, len(bodies))
	}
}

// FuzzResponseUsage checks ResponseUsage against encoding/json on any
// body (go test -fuzz FuzzResponseUsage ./dialect/openai).
func FuzzResponseUsage(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":3}}}`))
	f.Add([]byte(`{"usage":{"completion_tokens_details":{"reasoning_tokens":-1}},"x":[1,{"usage":2}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ResponseUsage(b)
		want, wantOK := usageByJSON(b)
		if ok != wantOK || !sameUsage(got, want) {
			t.Errorf("ResponseUsage(%q) = %+v, %v; encoding/json reads %+v, %v", b, got, ok, want, wantOK)
		}
	})
}
