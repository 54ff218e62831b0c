package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store/memstore"
)

// hdrOf returns the failure the answer's X-Belay-Failure-* headers name.
func hdrOf(resp *http.Response) (kind, reason string) {
	return resp.Header.Get(failure.HeaderKind), resp.Header.Get(failure.HeaderReason)
}

// Every refusal path of a model call, the models API and the run API
// carries both headers, whose reason matches the refusal (and the OpenAI
// body's code where it has one).
func TestHdrRefusalsCarryFailure(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, oneAlias("max_body_bytes: 2000\n", openAIDep("d", "gpt-4o-mini", up.URL)), nil)
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 3000) + `"}]}`

	// A run that used its one turn; a run the client ended.
	if resp, b := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "t1", "X-Belay-Max-Turns", "1"); resp.StatusCode != 200 {
		t.Fatalf("first turn %d %s", resp.StatusCode, b)
	}
	if resp, b := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "e1"); resp.StatusCode != 200 {
		t.Fatalf("e1 %d %s", resp.StatusCode, b)
	}
	if resp, b := g.do("POST", "/v1/belay/runs/e1/end", `{}`); resp.StatusCode != 200 {
		t.Fatalf("end %d %s", resp.StatusCode, b)
	}
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		kind, reason             string
	}{
		{"malformed body", "POST", "/v1/chat/completions", `{`, nil, 400, "permanent", "invalid_request"},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, nil, 404, "permanent", "model_not_found"},
		{"too large", "POST", "/v1/chat/completions", big, nil, 413, "permanent", "request_too_large"},
		{"budget", "POST", "/v1/chat/completions", chat, []string{"X-Belay-Max-Cost-Usd", "0.000000000001"}, 402, "fatal", "budget_exceeded"},
		{"turns", "POST", "/v1/chat/completions", chat, []string{"X-Belay-Run-Id", "t1", "X-Belay-Max-Turns", "1"}, 403, "fatal", "max_turns_exceeded"},
		{"run ended", "POST", "/v1/chat/completions", chat, []string{"X-Belay-Run-Id", "e1"}, 409, "fatal", "run_ended"},
		{"responses unknown model", "POST", "/v1/responses", `{"model":"nope","input":"x"}`, nil, 404, "permanent", "model_not_found"},
		{"anthropic unknown model", "POST", "/v1/messages", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, nil, 404, "permanent", "model_not_found"},
		{"count_tokens unknown model", "POST", "/v1/messages/count_tokens", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, nil, 404, "permanent", "model_not_found"},
		{"models get unknown", "GET", "/v1/models/nope", "", nil, 404, "permanent", "model_not_found"},
		{"run API bad end body", "POST", "/v1/belay/runs/e1/end", `{"status":"meh"}`, nil, 400, "permanent", "invalid_request"},
	}
	for _, c := range cases {
		resp, body := g.do(c.method, c.path, c.body, c.hdr...)
		k, r := hdrOf(resp)
		if resp.StatusCode != c.status || k != c.kind || r != c.reason {
			t.Errorf("%s: %d kind %q reason %q; want %d %s/%s (%s)", c.name, resp.StatusCode, k, r, c.status, c.kind, c.reason, body)
			continue
		}
		if strings.HasPrefix(c.path, "/v1/chat") {
			if _, code, _ := decodeError(t, body); code != "" && code != c.reason {
				t.Errorf("%s: body code %q, header reason %q", c.name, code, r)
			}
		}
		if fe := failure.FromResponse(resp); fe == nil || !errors.Is(fe, failure.Reason(c.reason)) {
			t.Errorf("%s: FromResponse = %v", c.name, fe)
		}
	}

	// Bad key (401), with tenants, on a model call, the models list and the run API.
	gt := newGW(t, oneAlias("tenants: [{name: acme, key: vk-acme}]\n", openAIDep("d", "gpt-4o-mini", up.URL)), nil)
	for _, p := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", chat}, {"GET", "/v1/models", ""}, {"GET", "/v1/belay/runs/x", ""},
		{"POST", "/v1/messages/count_tokens", `{"model":"m"}`},
	} {
		resp, body := gt.do(p.method, p.path, p.body, "Authorization", "Bearer wrong")
		if k, r := hdrOf(resp); resp.StatusCode != 401 || k == "" || r != "authentication" {
			t.Errorf("bad key %s %s: %d %q/%q %s", p.method, p.path, resp.StatusCode, k, r, body)
		}
	}
}

// A provider's 4xx relayed as it was sent carries belay's classification
// of it, never the provider's own X-Belay-Failure-* (an upstream that is
// itself a belay), and the upstream's headers do not change how the
// gateway classifies and retries.
func TestHdrUpstreamBelayHeadersNotTrusted(t *testing.T) {
	var calls atomic.Int32
	var mode atomic.Value
	mode.Store("")
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n := calls.Add(1)
		w.Header().Set(failure.HeaderKind, "fatal")
		w.Header().Set(failure.HeaderReason, "budget_exceeded")
		switch mode.Load().(string) {
		case "400":
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"budget_exceeded"}}`)
		case "429":
			if n%2 == 1 {
				w.WriteHeader(429)
				io.WriteString(w, `{"error":{"message":"slow","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
				return
			}
			fmt.Fprintf(w, okCompletion, 10, 5)
		default:
			fmt.Fprintf(w, okCompletion, 10, 5)
		}
	})
	g := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", up.URL)), nil)

	resp, body := g.do("POST", "/v1/chat/completions", chat)
	if k, r := hdrOf(resp); resp.StatusCode != 200 || k != "" || r != "" {
		t.Errorf("success from an upstream that sent failure headers: %d %q/%q %s", resp.StatusCode, k, r, body)
	}
	if fe := failure.FromResponse(resp); fe != nil {
		t.Errorf("success: FromResponse = %v", fe)
	}
	// Streamed success.
	stream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	sup := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set(failure.HeaderKind, "fatal")
		w.Header().Set(failure.HeaderReason, "killed")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	gs := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", sup.URL)), nil)
	resp, body = gs.do("POST", "/v1/chat/completions", stream)
	if k, r := hdrOf(resp); resp.StatusCode != 200 || k != "" || r != "" || resp.Trailer.Get(failure.HeaderReason) != "" {
		t.Errorf("streamed success: %d %q/%q trailer %v %s", resp.StatusCode, k, r, resp.Trailer, body)
	}

	// A relayed 400: belay's own words, not the upstream's "fatal budget_exceeded".
	mode.Store("400")
	resp, body = g.do("POST", "/v1/chat/completions", chat)
	if k, r := hdrOf(resp); resp.StatusCode != 400 || k == "fatal" || r == "budget_exceeded" || r == "" {
		t.Errorf("relayed 400: %d %q/%q %s; want belay's classification (permanent/invalid_request)", resp.StatusCode, k, r, body)
	} else {
		t.Logf("relayed 400: %q/%q", k, r)
	}
	// A 429 with "fatal" headers is still retried, and the success has no failure headers.
	calls.Store(0)
	mode.Store("429")
	resp, body = g.do("POST", "/v1/chat/completions", chat)
	if k, r := hdrOf(resp); resp.StatusCode != 200 || calls.Load() != 2 || k != "" || r != "" {
		t.Errorf("429 then 200: %d calls %d %q/%q %s", resp.StatusCode, calls.Load(), k, r, body)
	}
}

// A failed attempt then a fallback's success: the answer names no failure.
func TestHdrFallbackSuccessHasNoFailureHeaders(t *testing.T) {
	bad := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"message":"down","type":"server_error","param":null,"code":null}}`)
	})
	good := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"stream":true`) {
			fmt.Fprintf(w, okCompletion, 10, 5)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	g := newGW(t, aliasRetrying(1, "", openAIDep("a", "gpt-4o-mini", bad.URL), openAIDep("b", "gpt-4o-mini", good.URL)), nil)
	for _, body := range []string{chat, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`} {
		resp, b := g.do("POST", "/v1/chat/completions", body)
		if k, r := hdrOf(resp); resp.StatusCode != 200 || k != "" || r != "" || resp.Header.Get("X-Belay-Deployment") != "b" {
			t.Errorf("fallback success: %d %q/%q dep %q %.200s", resp.StatusCode, k, r, resp.Header.Get("X-Belay-Deployment"), b)
		}
	}
}

// 503 store_unavailable names its failure, transient server_error (found
// by the review without the headers; fixed).
func TestHdrStoreUnavailable(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	st := &flakyStore{Store: memstore.New()}
	g := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", up.URL)), st)
	st.fail.Store(true)
	resp, body := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "s1")
	k, r := hdrOf(resp)
	if resp.StatusCode != 503 || !strings.Contains(body, "store_unavailable") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if k == "" || r == "" {
		t.Errorf("503 store_unavailable: kind %q reason %q; want belay's failure named (transient/server_error), as every other error answer of a model call", k, r)
	}
}

// count_tokens with no deployment answering: 502 naming the last failure
// (found by the review without the headers; fixed).
func TestHdrCountTokensNoAnswer(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	url := up.URL
	up.Close() // connection refused
	g := newGW(t, oneAlias("", "{name: a, provider: anthropic, model: claude-sonnet-5-5, base_url: \""+url+"\", api_key: k}"), nil)
	resp, body := g.do("POST", "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 502 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if k, r := hdrOf(resp); k == "" || r == "" {
		t.Errorf("count_tokens 502: kind %q reason %q; want connection_error named", k, r)
	}
}

// A call whose run is ended while it is in flight gets 409 run_ended with
// the headers.
func TestHdrEndedInFlight(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	g := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", up.URL)), nil)
	done := make(chan *http.Response, 1)
	go func() {
		resp, _ := g.doCtx(context.Background(), "POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "f1")
		done <- resp
	}()
	<-arrived
	if resp, b := g.do("POST", "/v1/belay/runs/f1/end", `{}`); resp.StatusCode != 200 {
		t.Fatalf("end %d %s", resp.StatusCode, b)
	}
	resp := <-done
	if k, r := hdrOf(resp); resp.StatusCode != 409 || k != "fatal" || r != "run_ended" {
		t.Errorf("ended in flight: %d %q/%q", resp.StatusCode, k, r)
	}
}

// Logs what an upstream's credential refusal and belay's own bad-key
// refusal each name, and a refused stream / Responses call.
func TestHdrMoreValues(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(401)
		io.WriteString(w, `{"error":{"message":"Incorrect API key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
	})
	g := newGW(t, oneAlias("tenants: [{name: acme, key: vk-acme}]\n", openAIDep("d", "gpt-4o-mini", up.URL)), nil)
	resp, _ := g.do("POST", "/v1/chat/completions", chat, "Authorization", "Bearer vk-acme")
	k1, r1 := hdrOf(resp)
	t.Logf("upstream rejected belay's key: %d %s/%s", resp.StatusCode, k1, r1)
	resp, _ = g.do("POST", "/v1/chat/completions", chat, "Authorization", "Bearer wrong")
	k2, r2 := hdrOf(resp)
	t.Logf("client's key to belay wrong:   %d %s/%s", resp.StatusCode, k2, r2)
	if k1 == k2 && r1 == r2 {
		t.Errorf("the two credential refusals are indistinguishable by their headers")
	}
	ok := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g2 := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", ok.URL)), nil)
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"m","input":"hi"}`},
	} {
		resp, body := g2.do("POST", c.path, c.body, "X-Belay-Max-Cost-Usd", "0.000000000001")
		if k, r := hdrOf(resp); resp.StatusCode != 402 || k != "fatal" || r != "budget_exceeded" {
			t.Errorf("%s budget: %d %q/%q %.200s", c.path, resp.StatusCode, k, r, body)
		}
	}
}
