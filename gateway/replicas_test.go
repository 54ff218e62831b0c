package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/internal/pgtest"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/postgres"
	"github.com/belay-run/belay/store/sqlite"
)

// sharedStores opens, for each SQL store kind available, a function that
// opens another handle on one fresh database: a SQLite file, and a
// PostgreSQL schema when BELAY_TEST_POSTGRES_URL is set (it is skipped,
// and said so, when not).
func sharedStores(t *testing.T) map[string]func() store.Store {
	out := map[string]func() store.Store{}
	file := filepath.Join(t.TempDir(), "shared.db")
	out["sqlite"] = func() store.Store {
		s, err := sqlite.Open(context.Background(), file)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	base, ok := pgtest.BaseURL()
	if !ok {
		t.Log(pgtest.EnvURL + " not set: two gateways on PostgreSQL not tested")
		return out
	}
	u := pgtest.SchemaURL(t, base, "belay_replicas")
	out["postgres"] = func() store.Store {
		s, err := postgres.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return out
}

// A run's calls sent to two gateways in turn (newcomer and adversarial
// reviews): its token limit holds across them, and its record counts both
// gateways' tokens and turns (it showed the larger of the two gateways'
// counts, and the limit let 13 calls of about 1,050 tokens through 8,000).
func TestReplicasShareARunsTokens(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req, _ := openai.ParseRequest(b)
		fmt.Fprintf(w, okCompletion, openai.EstimatePromptTokens(req), 50)
	})
	y := strings.Replace(aliasRetrying(3, "", openAIDep("d", "gpt-4o", up.URL)), "max_cost_usd: 5}", "max_cost_usd: 5, max_tokens: 8000}", 1)
	body := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 800) + `"}]}`
	for kind, open := range sharedStores(t) {
		t.Run(kind, func(t *testing.T) {
			gws := []*gw{newGW(t, y, open()), newGW(t, y, open())}
			answered, used := 0, int64(0)
			for i := range 12 {
				resp, b := gws[i%2].do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "tok")
				switch resp.StatusCode {
				case http.StatusOK:
					answered++
					var out struct {
						Usage struct {
							Prompt     int64 `json:"prompt_tokens"`
							Completion int64 `json:"completion_tokens"`
						}
					}
					if err := json.Unmarshal([]byte(b), &out); err != nil || out.Usage.Prompt == 0 {
						t.Fatalf("answer %d: %v: %s", i, err, b)
					}
					used += out.Usage.Prompt + out.Usage.Completion
				case http.StatusPaymentRequired:
				default:
					t.Fatalf("call %d: status %d: %s", i, resp.StatusCode, b)
				}
			}
			flushRuns(t, gws[0].stack)
			flushRuns(t, gws[1].stack)
			rec := gws[1].run("tok")
			if used > 8000 || answered < 6 {
				t.Errorf("%d calls answered, %d tokens, under a limit of 8,000; want about 7, within it", answered, used)
			}
			if rec.InputTokens+rec.OutputTokens != used || rec.Turns != answered {
				t.Errorf("record: %d turns, %d+%d tokens; want %d turns and %d tokens (both gateways')", rec.Turns, rec.InputTokens, rec.OutputTokens, answered, used)
			}
			if b, err := gws[0].store.Balance(context.Background(), run.TokenScope("tok")); err != nil || int64(b.Settled) != used || b.Reserved != 0 {
				t.Errorf("token scope %+v (%v); want %d settled, nothing reserved", b, err, used)
			}
		})
	}
}

// Parallel calls of one run on two gateways, half of them failing once
// (charged) and retried: the run's money, turn and token limits hold.
func TestReplicasHoldARunsLimitsInParallel(t *testing.T) {
	var n atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req, _ := openai.ParseRequest(b)
		est := openai.EstimatePromptTokens(req)
		if n.Add(1)%2 == 0 { // 200 without choices: transient, charged its prompt
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","usage":{"prompt_tokens":%d,"completion_tokens":0}}`, est)
			return
		}
		fmt.Fprintf(w, okCompletion, est, 50)
	})
	y := strings.Replace(aliasRetrying(3, "", openAIDep("d", "gpt-4o", up.URL)), "max_cost_usd: 5}", "max_cost_usd: 5, max_tokens: 20000}", 1)
	body := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 800) + `"}]}`
	limit, err := budget.ParseUSD("0.05")
	if err != nil {
		t.Fatal(err)
	}
	for kind, open := range sharedStores(t) {
		t.Run(kind, func(t *testing.T) {
			gws := []*gw{newGW(t, y, open()), newGW(t, y, open())}
			var wg sync.WaitGroup
			for i := range 40 {
				wg.Go(func() {
					gws[i%2].do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "rep",
						"X-Belay-Max-Cost-Usd", limit.Decimal(), "X-Belay-Max-Turns", "12")
				})
			}
			wg.Wait()
			flushRuns(t, gws[0].stack)
			flushRuns(t, gws[1].stack)
			rec := gws[1].run("rep")
			ctx := context.Background()
			cost, _ := gws[0].store.Balance(ctx, budget.RunScope("rep"))
			turns, _ := gws[0].store.Balance(ctx, run.TurnScope("rep"))
			if cost.Settled > limit || rec.Cost > limit || cost.Settled == 0 {
				t.Errorf("cost: ledger %s, record %s; want within %s", cost.Settled, rec.Cost, limit)
			}
			if turns.Settled > 12 || rec.Turns > 12 {
				t.Errorf("turns: ledger %d, record %d; want at most 12", int64(turns.Settled), rec.Turns)
			}
			if tok := rec.InputTokens + rec.OutputTokens; tok > 20000 {
				t.Errorf("tokens %d past the limit of 20,000", tok)
			}
		})
	}
}
