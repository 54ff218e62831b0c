package gateway_test

// Session 19 review: duplicate and empty X-Belay-* headers, the base_url
// hint of an upstream 404, and the admin API's "missing admin key".

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/gateway"
)

// s19Raw sends the raw HTTP/1.1 request head (lines without their CRLF,
// the Host, Content-Length and Connection lines added) and body to addr,
// and returns the response and its body.
func s19Raw(t *testing.T, addr, method, path string, lines []string, body string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, addr, len(body))
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(rb)
}

func s19Addr(t *testing.T, url string) string {
	t.Helper()
	return strings.TrimPrefix(url, "http://")
}

// s19ErrMessage returns the error's type and message in either dialect's
// shape, and which shape it was.
func s19ErrMessage(t *testing.T, body string) (shape, typ, msg string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	shape = "openai"
	if e.Type == "error" {
		shape = "anthropic"
	}
	return shape, e.Error.Type, e.Error.Message
}

const (
	s19Chat      = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	s19Responses = `{"model":"gpt-4o-mini","input":"hi"}`
	s19Messages  = `{"model":"claude-sonnet-5-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
)

// Sound: every way HTTP/1.1 sends a header twice (two lines, two lines
// in different case) is refused with 400 in the endpoint's dialect, with
// x-should-retry: false, for each header belay reads; a header of only
// blanks (spaces, tabs, a no-break space) is refused as empty for the
// limit headers; count_tokens, which reads none of them, still counts.
func TestS19_DuplicateAndEmptyHeadersRefusedInEachDialect(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	addr := s19Addr(t, h.gw.URL)
	endpoints := []struct{ path, body, shape string }{
		{"/v1/chat/completions", s19Chat, "openai"},
		{"/v1/responses", s19Responses, "openai"},
		{"/v1/messages", s19Messages, "anthropic"},
	}
	values := map[string][2]string{
		gateway.HeaderRunID: {"run-a", "run-b"}, gateway.HeaderAgent: {"a", "b"},
		gateway.HeaderMaxTurns: {"3", "5"}, gateway.HeaderMaxTokens: {"100", "200"},
		gateway.HeaderDeadline: {"30s", "60"}, gateway.HeaderMaxCostUSD: {"0.25", "1"},
	}
	for _, ep := range endpoints {
		for name, v := range values {
			for _, lines := range [][]string{
				{name + ": " + v[0], name + ": " + v[1]},
				{strings.ToLower(name) + ": " + v[0], strings.ToUpper(name) + ": " + v[1]},
				{name + ": " + v[0], name + ": " + v[0]}, // the same value twice
			} {
				resp, b := s19Raw(t, addr, "POST", ep.path, lines, ep.body)
				shape, typ, msg := s19ErrMessage(t, b)
				if resp.StatusCode != 400 || shape != ep.shape || typ != "invalid_request_error" ||
					msg != name+": sent 2 times; send it once" || resp.Header.Get("X-Should-Retry") != "false" {
					t.Errorf("%s %q: %d %s x-should-retry=%q", ep.path, lines, resp.StatusCode, b, resp.Header.Get("X-Should-Retry"))
				}
			}
		}
		for _, name := range []string{gateway.HeaderMaxTurns, gateway.HeaderMaxTokens, gateway.HeaderDeadline, gateway.HeaderMaxCostUSD} {
			for _, blank := range []string{"", " ", "\t", " \t ", "\u00a0"} {
				resp, b := s19Raw(t, addr, "POST", ep.path, []string{name + ":" + blank}, ep.body)
				_, _, msg := s19ErrMessage(t, b)
				if resp.StatusCode != 400 || !strings.HasPrefix(msg, name+": empty;") || resp.Header.Get("X-Should-Retry") != "false" {
					t.Errorf("%s %s:%q: %d %s", ep.path, name, blank, resp.StatusCode, b)
				}
			}
		}
	}
	// count_tokens reads none of the run headers: it is in no run.
	resp, b := s19Raw(t, addr, "POST", gateway.CountTokensPath,
		[]string{"X-Belay-Max-Turns: 1", "X-Belay-Max-Turns: 2", "X-Belay-Run-Id: a", "X-Belay-Run-Id: b"},
		`{"model":"claude-sonnet-5-5","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Errorf("count_tokens with duplicate run headers: %d %s", resp.StatusCode, b)
	}
}

// Sound: the official SDKs never send a belay header twice by
// themselves: a client-wide WithHeader and a per-request one replace each
// other (Header.Set), so the per-request value applies.
func TestS19_SDKsSendEachHeaderOnce(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	var oresp *http.Response
	oc := h.openai(ooption.WithHeader("X-Belay-Run-Id", "sdk-a"), ooption.WithHeader("x-belay-max-turns", "7"))
	if _, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")},
		ooption.WithHeader("X-Belay-Run-Id", "sdk-b"), ooption.WithHeader("X-BELAY-MAX-TURNS", "6"), ooption.WithResponseInto(&oresp)); err != nil {
		t.Fatal(err)
	}
	if got := oresp.Header.Get(gateway.HeaderRunID); got != "sdk-b" {
		t.Errorf("openai-go: run %q, want sdk-b", got)
	}
	var aresp *http.Response
	ac := h.anthropic(aoption.WithHeader("X-Belay-Run-Id", "sdk-c"))
	if _, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 10, Messages: anthropicMsg("hi")},
		aoption.WithHeader("x-belay-run-id", "sdk-d"), aoption.WithResponseInto(&aresp)); err != nil {
		t.Fatal(err)
	}
	if got := aresp.Header.Get(gateway.HeaderRunID); got != "sdk-d" {
		t.Errorf("anthropic-sdk-go: run %q, want sdk-d", got)
	}
}

// Found by the review, fixed: an X-Belay-Run-Id sent empty (or of blanks) is taken as no
// header: each call becomes a run of its own, so the run's limits never
// add up across the agent's calls. The limit headers sent empty are now
// refused for just this reason ("no limit would apply, silently"); the
// run id is the header that makes them apply at all. The Anthropic SDK
// sends it empty by itself from ANTHROPIC_CUSTOM_HEADERS
// ("X-Belay-Run-Id: $RUN_ID" with RUN_ID unset).
func TestS19_EmptyRunIDIsRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	addr := s19Addr(t, h.gw.URL)
	for _, blank := range []string{"", " ", "\t", "\u00a0"} {
		var runs []string
		for range 2 {
			resp, b := s19Raw(t, addr, "POST", "/v1/chat/completions",
				[]string{"X-Belay-Run-Id:" + blank, "X-Belay-Max-Turns: 1"}, s19Chat)
			runs = append(runs, fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get(gateway.HeaderRunID)))
			if resp.StatusCode == 400 {
				break
			}
			_ = b
		}
		if !strings.HasPrefix(runs[0], "400") {
			t.Errorf("X-Belay-Run-Id:%q with X-Belay-Max-Turns: 1: two calls answered %q; want the empty run id refused (400), as an empty limit header is", blank, runs)
		}
	}

	// The same through the Anthropic SDK's ANTHROPIC_CUSTOM_HEADERS.
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Belay-Run-Id: \nX-Belay-Max-Turns: 1")
	c := anthropic.NewClient(aoption.WithBaseURL(h.gw.URL), aoption.WithAPIKey("sk-client"), aoption.WithMaxRetries(0))
	var ids []string
	for range 2 {
		var resp *http.Response
		_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 10, Messages: anthropicMsg("hi")},
			aoption.WithResponseInto(&resp))
		if err != nil {
			ids = append(ids, "error: "+err.Error())
			break
		}
		ids = append(ids, resp.Header.Get(gateway.HeaderRunID))
	}
	if len(ids) == 2 && !strings.HasPrefix(ids[1], "error") {
		t.Errorf("ANTHROPIC_CUSTOM_HEADERS with an empty X-Belay-Run-Id and X-Belay-Max-Turns: 1: both calls served, as runs %q (max-turns never reached)", ids)
	}
}

// Found by the review, fixed: "a number too large to hold says so" holds for max-turns,
// max-tokens and a deadline in seconds, but not for X-Belay-Max-Cost-Usd
// (budget.ParseUSD's range error is worded as a malformed amount: "10000000
// is not a plain decimal") nor for a deadline in hours (time.ParseDuration
// overflows to "invalid duration").
func TestS19_TooLargeLimitSaysSo(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	addr := s19Addr(t, h.gw.URL)
	for _, c := range []struct{ name, value string }{
		{gateway.HeaderMaxTurns, "99999999999999999999"},
		{gateway.HeaderMaxTokens, "99999999999999999999"},
		{gateway.HeaderDeadline, "99999999999"},
		{gateway.HeaderDeadline, "3000000h"},
		{gateway.HeaderMaxCostUSD, "10000000"},
	} {
		resp, b := s19Raw(t, addr, "POST", "/v1/chat/completions", []string{c.name + ": " + c.value}, s19Chat)
		_, _, msg := s19ErrMessage(t, b)
		if resp.StatusCode != 400 || !strings.Contains(msg, "too large to hold") {
			t.Errorf("%s: %s: %d %q; want it to say the value is too large to hold", c.name, c.value, resp.StatusCode, msg)
		}
	}
}

// s19NotFound is an upstream answering every request 404 with body (PATH
// replaced by the request's path) and content type ct.
func s19NotFound(t *testing.T, ct, body string) string {
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, strings.ReplaceAll(body, "PATH", r.URL.Path))
	}).URL
}

// Found by the review, fixed: the base_url hint names the path the upstream was called at,
// which is the deployment's base_url path: a 404 without an error object
// (a router's "404 page not found") is belay's to word, so the hint and
// with it that path reach the client, against pathHint's own comment
// ("the gateway's upstream addresses are its operator's"). Paths carry
// account and gateway ids (Cloudflare AI Gateway:
// /v1/ACCOUNT_ID/GATEWAY_ID/openai; Azure: /openai/deployments/NAME).
func TestS19_PathHintNamesNoPathToClient(t *testing.T) {
	plain := s19NotFound(t, "text/plain; charset=utf-8", "404 page not found")
	g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
models:
  - alias: oa
    deployments: [{name: oa-1, provider: openai, model: gpt-4o-mini, base_url: %q, api_key: sk-upstream-secret}]
`, plain+"/v1/acct-7f3e9c/gw-private/openai"), nil)
	resp, b := g.do("POST", "/v1/chat/completions", `{"model":"oa","messages":[{"role":"user","content":"hi"}]}`)
	if strings.Contains(b, "sk-upstream-secret") || strings.Contains(b, "127.0.0.1") {
		t.Errorf("client sees the upstream's host or key: %s", b)
	}
	if strings.Contains(b, "acct-7f3e9c") {
		t.Errorf("client sees the deployment's base_url path: %d %s", resp.StatusCode, b)
	}
}

// Sound: a 404 about the model is not given the base_url hint, in either
// dialect, whatever the provider's wording, and the hint never names the
// base_url's host or the deployment's key, in the answer or the log.
func TestS19_PathHintNotForModel(t *testing.T) {
	oaModel := s19NotFound(t, "application/json", `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
	anModel := s19NotFound(t, "application/json", `{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}`)
	anURL := s19NotFound(t, "application/json", `{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`)
	logged := make(records, 256)
	g := newGWOpts(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
limits: {max_turns: 50}
models:
  - alias: oa
    deployments: [{name: oa-1, provider: openai, model: gpt-9, base_url: %q, api_key: sk-upstream-secret}]
  - alias: an
    deployments: [{name: an-1, provider: anthropic, model: claude-9, base_url: %q, api_key: sk-upstream-secret}]
  - alias: an-url
    deployments: [{name: an-2, provider: anthropic, model: claude-9, base_url: %q, api_key: sk-upstream-secret}]
`, oaModel+"/v1", anModel, anURL+"/anthropic"), gateway.Options{Logger: slog.New(logged)})
	for _, c := range []struct {
		path, body string
		hint       bool
	}{
		{"/v1/chat/completions", `{"model":"oa","messages":[{"role":"user","content":"hi"}]}`, false},
		{"/v1/messages", `{"model":"an","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, false},
		{"/v1/messages", `{"model":"an-url","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, true},
	} {
		resp, b := g.do("POST", c.path, c.body)
		line := logged.next(t, "model call failed")
		if resp.StatusCode != 404 || strings.Contains(b, "base_url") {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, b)
		}
		if strings.Contains(line, "base_url") != c.hint {
			t.Errorf("%s: logged %s; hint %v", c.body, line, c.hint)
		}
		if strings.Contains(line+b, "sk-upstream-secret") || strings.Contains(line+b, "127.0.0.1") {
			t.Errorf("%s: the key or host leaks: %s / %s", c.body, line, b)
		}
	}
}

// Found by the review, fixed: a 404 with an error object whose message is empty gets the
// base_url hint even when its code says the model is unknown: pathHint
// takes msg == "" as a bare 404 before looking at the code.
func TestS19_PathHintNotOnModelNotFoundWithoutMessage(t *testing.T) {
	up := s19NotFound(t, "application/json", `{"error":{"message":"","type":"invalid_request_error","param":"model","code":"model_not_found"}}`)
	logged := make(records, 256)
	g := newGWOpts(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
limits: {max_turns: 50}
models:
  - alias: oa
    deployments: [{name: oa-1, provider: openai, model: gpt-9, base_url: %q, api_key: k}]
`, up+"/v1"), gateway.Options{Logger: slog.New(logged)})
	g.do("POST", "/v1/chat/completions", `{"model":"oa","messages":[{"role":"user","content":"hi"}]}`)
	if line := logged.next(t, "model call failed"); strings.Contains(line, "base_url") {
		t.Errorf("a model_not_found 404 got the base_url hint: %s", line)
	}
}

// Found by the review, fixed: the hint is given only to non-streamed calls (attemptOnce);
// a streamed call's 404 for an unknown URL (stream.go's ClassifyHTTP) has
// none, in the log or the answer. Claude Code and most agents stream.
func TestS19_PathHintForStreams(t *testing.T) {
	oaURL := s19NotFound(t, "application/json", `{"error":{"message":"Unknown request URL: POST PATH. Please check the URL for typos.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`)
	anURL := s19NotFound(t, "application/json", `{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`)
	logged := make(records, 256)
	g := newGWOpts(t, oaAnConfig(oaURL, anURL+"/anthropic", "", ""), gateway.Options{Logger: slog.New(logged)})
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"oa","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"an","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		resp, b := g.do("POST", c.path, c.body)
		line := logged.next(t, "model call failed")
		if !strings.Contains(line, "base_url") {
			t.Errorf("%s (stream): %d %s\nlogged %s\nwant the base_url hint, as the same call unstreamed gets", c.path, resp.StatusCode, b, line)
		}
	}
}

// Found by the review, fixed: the admin API says "missing admin key" when a key was sent in
// a form it does not read (no Bearer scheme, Basic, Api-Key): the most
// common slip, `curl -H "Authorization: $ADMIN_KEY"`, is told it sent
// nothing. The tenants' check words the same case "API key in an
// unsupported form".
func TestS19_AdminKeyInUnsupportedFormIsNotMissing(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, hdr := range [][2]string{
		{"Authorization", "adm-key"},
		{"Authorization", "Basic YWRtLWtleQ=="},
		{"Authorization", "Token adm-key"},
		{"Api-Key", "adm-key"},
	} {
		req, _ := http.NewRequest("GET", h.gw.URL+"/admin/runs", nil)
		req.Header.Set(hdr[0], hdr[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || strings.Contains(string(b), "missing admin key") {
			t.Errorf("%s: %s: %d %s; want 401 saying the key's form is not supported, not that it is missing", hdr[0], hdr[1], resp.StatusCode, b)
		}
	}
}

// Found by the review, fixed: belay unkill now refuses a flag that is not set,
// so that a typo does not pass for a cleared flag; the admin API's
// DELETE /admin/kill answered 200 "cleared" for one. Now it is 404,
// naming the flags that are set (POST /admin/tools/{name}/enable stays
// idempotent).
func TestS19_AdminUnkillOfAbsentFlagIs404(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	req, _ := http.NewRequest("DELETE", h.gw.URL+"/admin/kill?target=tool&name=issue_refnd", nil)
	req.Header.Set("Authorization", "Bearer adm-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Errorf("DELETE /admin/kill of a flag never set: %d %s; belay unkill refuses the same (exit 2)", resp.StatusCode, b)
	}
}

// Sound (and moot for HTTP/2): the gateway's server does not speak h2c,
// so HTTP/2's ways of repeating a field cannot reach it without TLS; a
// prior-knowledge HTTP/2 client is not answered.
func TestS19_NoH2C(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	g := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", h.simSrv.URL+"/d/oa-1")), nil)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: &p}}
	req, _ := http.NewRequest("POST", g.srv.URL+"/v1/chat/completions", strings.NewReader(chat))
	req.Header.Add("X-Belay-Max-Turns", "3")
	req.Header.Add("X-Belay-Max-Turns", "5")
	resp, err := c.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor == 2 && resp.StatusCode != 400 {
			t.Errorf("h2c: %s %d %s", resp.Proto, resp.StatusCode, b)
		}
		t.Logf("h2c answered: %s %d", resp.Proto, resp.StatusCode)
	} else {
		t.Logf("h2c refused: %v", err)
	}
}

// Comma-joined values (what a proxy that merges a repeated field sends,
// RFC 9110 §5.3): each limit header is refused as malformed, the run id
// too (a comma is not an id character); X-Belay-Agent takes "a, b" as
// one agent's name (harmless: a name, not a limit).
func TestS19_CommaJoinedValues(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	addr := s19Addr(t, h.gw.URL)
	for _, l := range []string{"X-Belay-Max-Turns: 3, 5", "X-Belay-Max-Tokens: 100, 200", "X-Belay-Deadline: 30s, 60",
		"X-Belay-Max-Cost-Usd: 0.25, 1", "X-Belay-Run-Id: a, b", "X-Belay-Max-Turns: 3,"} {
		resp, b := s19Raw(t, addr, "POST", "/v1/chat/completions", []string{l}, s19Chat)
		if resp.StatusCode != 400 || resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: %d %s", l, resp.StatusCode, b)
		}
		_, _, msg := s19ErrMessage(t, b)
		t.Logf("%s -> %d %s", l, resp.StatusCode, msg)
	}
	resp, _ := s19Raw(t, addr, "POST", "/v1/chat/completions", []string{"X-Belay-Agent: a, b", "X-Belay-Run-Id: agent-comma"}, s19Chat)
	if resp.StatusCode != 200 {
		t.Errorf("X-Belay-Agent: a, b: %d", resp.StatusCode)
	}
}

// Found by the review, fixed: a request without a valid key that sends
// X-Belay-Run-Id or X-Belay-Agent twice is answered 400 (naming the
// header), not 401: runID and agentName run before identify, although
// serve's own rule is "a bad key is 401 whatever else is wrong"
// (unknownHeader's comment), and limit headers sent twice do get 401.
func TestS19_DuplicateRunIDBeforeKey(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	g := newGW(t, oneAlias("tenants: [{name: acme, key: vk-acme}]\n", openAIDep("d", "gpt-4o-mini", h.simSrv.URL+"/d/oa-1")), nil)
	addr := s19Addr(t, g.srv.URL)
	for _, lines := range [][]string{
		{"X-Belay-Max-Turns: 1", "X-Belay-Max-Turns: 2"},
		{"X-Belay-Run-Id: a", "X-Belay-Run-Id: b"},
		{"X-Belay-Agent: a", "X-Belay-Agent: b"},
	} {
		resp, b := s19Raw(t, addr, "POST", "/v1/chat/completions", append(lines, "Authorization: Bearer wrong"), chat)
		if resp.StatusCode != 401 {
			t.Errorf("bad key and %q: %d %s; want 401", lines, resp.StatusCode, b)
		}
	}
}

// Found by the review, fixed: serve marked a run as the gateway's own
// (one call, ended with it) by Header.Get(X-Belay-Run-Id) == "", not by
// what runID returned: a Run-Id of only a no-break space (trimmed to "" by
// runID, not by net/http) got a run that stayed running until its idle
// time. Now a run id that is blank once trimmed is refused, as an empty
// one is, and whether the client named the run comes from runID.
func TestS19_BlankRunIDIsRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	addr := s19Addr(t, h.gw.URL)
	for _, v := range []string{"\u00a0", " \u00a0 "} {
		resp, b := s19Raw(t, addr, "POST", "/v1/chat/completions", []string{"X-Belay-Run-Id: " + v}, s19Chat)
		_, _, msg := s19ErrMessage(t, b)
		if resp.StatusCode != 400 || msg != "X-Belay-Run-Id: empty; send a run id, or leave the header out for a run of its own" {
			t.Errorf("X-Belay-Run-Id: %q: %d %q; want 400, empty", v, resp.StatusCode, msg)
		}
	}
	resp, b := s19Raw(t, addr, "POST", "/v1/chat/completions", nil, s19Chat)
	if resp.StatusCode != 200 {
		t.Fatalf("without the header: %d %s", resp.StatusCode, b)
	}
	h.quiesce()
	if st := h.record(resp.Header.Get(gateway.HeaderRunID)).Status; st != "succeeded" {
		t.Errorf("a gateway-made run after its call: %s, want succeeded (ended with it)", st)
	}
}
