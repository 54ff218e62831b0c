package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Many calls of one run in flight (streams held upstream) when the run is
// ended, while other goroutines keep sending calls: every held stream ends
// with an error event run_ended, no call is served after the end returned, and the stored record
// counts every admitted call.
func TestAdvEndWithManyCallsInFlight(t *testing.T) {
	const n = 12
	started := make(chan struct{}, 64)
	var upCalls atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		upCalls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, roleChunk+chunk("Hel"))
		w.(http.Flusher).Flush()
		started <- struct{}{}
		<-r.Context().Done()
	})
	for kind, open := range sharedStores(t) {
		t.Run(kind, func(t *testing.T) {
			upCalls.Store(0)
			g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL)), open())
			var wg sync.WaitGroup
			rests := make([]string, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", g.srv.URL+"/v1/chat/completions",
						strings.NewReader(`{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
					req.Header.Set("X-Belay-Run-Id", "many")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					rests[i] = string(b)
				}()
			}
			for range n {
				awaitCh(t, started, "upstream start")
			}
			// Concurrent callers racing the end.
			var after, servedAfter atomic.Int64
			endDone := make(chan struct{})
			stop := make(chan struct{})
			var cw sync.WaitGroup
			for range 4 {
				cw.Add(1)
				go func() {
					defer cw.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						ended := false
						select {
						case <-endDone:
							ended = true
						default:
						}
						req, _ := http.NewRequest("POST", g.srv.URL+"/v1/chat/completions",
							strings.NewReader(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
						req.Header.Set("X-Belay-Run-Id", "many")
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if ended {
							after.Add(1)
							if resp.StatusCode != 409 {
								servedAfter.Add(1)
							}
							if after.Load() > 20 {
								return
							}
						}
					}
				}()
			}
			resp, out := g.do("POST", "/v1/belay/runs/many/end", `{"status":"failed","error":"enough"}`)
			close(endDone)
			if resp.StatusCode != 200 {
				t.Fatalf("end: %d %s", resp.StatusCode, out)
			}
			wg.Wait()
			cw.Wait()
			close(stop)
			for i, r := range rests {
				if strings.Contains(r, "[DONE]") || !strings.Contains(r, `"code":"run_ended"`) {
					t.Errorf("stream %d: %q; want an error event run_ended, no [DONE]", i, r)
				}
			}
			if servedAfter.Load() > 0 {
				t.Errorf("%d of %d calls sent after the end returned were not refused 409", servedAfter.Load(), after.Load())
			}
			e := decodeRun(t, out)
			stored := g.run("many")
			t.Logf("end answered turns %d cost %d; stored turns %d cost %d status %s; upstream calls %d; held-stream bodies e.g. %q",
				e.Run.Turns, e.Run.Cost, stored.Turns, stored.Cost, stored.Status, upCalls.Load(), rests[0])
			if stored.Turns != int(upCalls.Load()) && stored.Turns < n {
				t.Errorf("stored turns %d; upstream calls %d", stored.Turns, upCalls.Load())
			}
			if stored.Status != "failed" || stored.Error != "enough" {
				t.Errorf("stored %s %q", stored.Status, stored.Error)
			}
		})
	}
}
