package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/sim"
)

const (
	chatPath     = "/v1/chat/completions"
	messagesPath = "/v1/messages"
)

func chatBody(prompt string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "gpt-4o", "stream": stream, "stream_options": map[string]any{"include_usage": true},
		"messages": []any{map[string]any{"role": "user", "content": prompt}},
	})
	if !stream {
		b, _ = json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user", "content": prompt}}})
	}
	return string(b)
}

func messagesBody(prompt string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "claude-sonnet-5-5", "max_tokens": 256, "stream": stream,
		"messages": []any{map[string]any{"role": "user", "content": prompt}},
	})
	return string(b)
}

func post(t *testing.T, url, body string, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func TestFaultResponses(t *testing.T) {
	_, ts := startSim(t, sim.Config{Profile: sim.Profile{MaxRetryAfter: 1500_000_000}})
	cases := []struct {
		fault, path, body string
		status            int
		contentType       string
		headers           map[string]string // "" value: must be present
		bodyHas           []string
	}{
		{"rate_limit", chatPath, chatBody("x", false), 429, "application/json",
			map[string]string{"retry-after-ms": "", "retry-after": "", "x-request-id": ""},
			[]string{`"type":"requests"`, `"code":"rate_limit_exceeded"`, `"param":null`}},
		{"rate_limit", messagesPath, messagesBody("x", false), 429, "application/json",
			map[string]string{"retry-after": "", "request-id": ""},
			[]string{`{"type":"error","error":{"type":"rate_limit_error"`, `"request_id":"req_`}},
		{"overloaded", chatPath, chatBody("x", false), 503, "application/json", nil,
			[]string{`"type":"server_error"`, `overloaded`}},
		{"overloaded", messagesPath, messagesBody("x", false), 529, "application/json",
			map[string]string{"x-should-retry": "true"}, []string{`"type":"overloaded_error","message":"Overloaded"`}},
		{"server_error", chatPath, chatBody("x", false), 500, "application/json", nil, []string{`"type":"server_error"`, `"code":null`}},
		{"server_error", messagesPath, messagesBody("x", false), 500, "application/json", nil, []string{`"type":"api_error"`}},
		{"bad_gateway_html", chatPath, chatBody("x", false), 502, "text/html; charset=UTF-8",
			map[string]string{"server": "cloudflare"}, []string{"<html>", "502: Bad gateway"}},
		{"error_in_200", chatPath, chatBody("x", false), 200, "application/json", nil, []string{`{"error":{"message":"Upstream provider returned an error","code":502`}},
		{"error_in_200", messagesPath, messagesBody("x", false), 200, "application/json", nil, []string{`"type":"error"`, `"api_error"`}},
		{"quota_exhausted", chatPath, chatBody("x", false), 429, "application/json", nil, []string{`"type":"insufficient_quota"`, `"code":"insufficient_quota"`}},
		{"quota_exhausted", messagesPath, messagesBody("x", false), 402, "application/json", nil, []string{`"type":"billing_error"`}},
		{"auth_error", chatPath, chatBody("x", false), 401, "application/json", nil, []string{`"code":"invalid_api_key"`}},
		{"context_length", chatPath, chatBody("x", false), 400, "application/json", nil, []string{`"code":"context_length_exceeded"`}},
		{"context_length", messagesPath, messagesBody("x", false), 400, "application/json", nil, []string{`prompt is too long`}},
		{"unavailable", messagesPath, messagesBody("x", false), 503, "application/json", nil, []string{`"type":"api_error"`}},
	}
	for _, c := range cases {
		t.Run(c.fault+c.path, func(t *testing.T) {
			resp, body, err := post(t, ts.URL+c.path, c.body, "X-Sim-Fault", c.fault)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.contentType {
				t.Fatalf("status %d %q, want %d %q; body %s", resp.StatusCode, resp.Header.Get("Content-Type"), c.status, c.contentType, body)
			}
			for k, v := range c.headers {
				got := resp.Header.Get(k)
				if got == "" || (v != "" && got != v) {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			for _, s := range c.bodyHas {
				if !bytes.Contains(body, []byte(s)) {
					t.Errorf("body %s lacks %s", body, s)
				}
			}
		})
	}
}

func TestRateLimitRetryAfterBounds(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 9})
	for i := range 30 {
		resp, _, err := post(t, ts.URL+chatPath, chatBody("q"+strconv.Itoa(i), false), "X-Sim-Fault", "rate_limit")
		if err != nil {
			t.Fatal(err)
		}
		ms, _ := strconv.Atoi(resp.Header.Get("Retry-After-Ms"))
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if ms < 100 || ms > 2000 || secs != (ms+999)/1000 {
			t.Fatalf("retry-after-ms %d, retry-after %d", ms, secs)
		}
	}
}

func readEvents(t *testing.T, body []byte) ([]sse.Event, error) {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(body))
	var evs []sse.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestStreamFaults(t *testing.T) {
	_, ts := startSim(t, sim.Config{})
	long := "Please explain in detail how retries with exponential backoff and jitter work in practice."
	t.Run("openai ok ends with usage and DONE", func(t *testing.T) {
		_, body, _ := post(t, ts.URL+chatPath, chatBody(long, true))
		evs, err := readEvents(t, body)
		if err != nil || string(evs[len(evs)-1].Data) != "[DONE]" || !bytes.Contains(evs[len(evs)-2].Data, []byte(`"choices":[],"usage":{"prompt_tokens"`)) {
			t.Fatalf("events %q, err %v", evs, err)
		}
	})
	t.Run("openai stream_error", func(t *testing.T) {
		resp, body, _ := post(t, ts.URL+chatPath, chatBody(long, true), "X-Sim-Fault", "stream_error")
		evs, _ := readEvents(t, body)
		last := evs[len(evs)-1]
		if resp.StatusCode != 200 || !bytes.HasPrefix(last.Data, []byte(`{"error":{"message":`)) || !bytes.Contains(evs[1].Data, []byte(`"content":"`)) {
			t.Fatalf("events %q", evs)
		}
	})
	t.Run("openai stream_cut", func(t *testing.T) {
		_, body, err := post(t, ts.URL+chatPath, chatBody(long, true), "X-Sim-Fault", "stream_cut")
		evs, _ := readEvents(t, body)
		if err != nil || len(evs) != 2 || bytes.Contains(body, []byte("[DONE]")) {
			t.Fatalf("events %q, err %v", evs, err)
		}
	})
	t.Run("anthropic stream_error", func(t *testing.T) {
		_, body, _ := post(t, ts.URL+messagesPath, messagesBody(long, true), "X-Sim-Fault", "stream_error")
		evs, _ := readEvents(t, body)
		names := []string{}
		for _, e := range evs {
			names = append(names, e.Name)
		}
		want := "message_start content_block_start ping content_block_delta error"
		if strings.Join(names, " ") != want || !bytes.Contains(evs[4].Data, []byte(`"overloaded_error"`)) {
			t.Fatalf("events %v", names)
		}
	})
	t.Run("anthropic stream_cut", func(t *testing.T) {
		_, body, _ := post(t, ts.URL+messagesPath, messagesBody(long, true), "X-Sim-Fault", "stream_cut")
		if bytes.Contains(body, []byte("message_stop")) || !bytes.Contains(body, []byte("text_delta")) {
			t.Fatalf("body %s", body)
		}
	})
	t.Run("non-stream cut body", func(t *testing.T) {
		_, _, err := post(t, ts.URL+chatPath, chatBody(long, false), "X-Sim-Fault", "stream_cut")
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want unexpected EOF", err)
		}
	})
}

func TestTruncatedToolArgs(t *testing.T) {
	_, ts := startSim(t, sim.Config{Script: mustScript(t, refundScript)})
	resp, body, err := post(t, ts.URL+chatPath, chatBody("refund order A-1001", false), "X-Sim-Fault", "truncated_tool_args")
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(err)
	}
	var c struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	args := c.Choices[0].Message.ToolCalls[0].Function.Arguments
	if c.Choices[0].FinishReason != "length" || json.Valid([]byte(args)) || !strings.HasPrefix(`{"order_id":"A-1001"}`, args) {
		t.Fatalf("finish %q args %q", c.Choices[0].FinishReason, args)
	}
	_, body, _ = post(t, ts.URL+messagesPath, messagesBody("refund order A-1001", false), "X-Sim-Fault", "truncated_tool_args")
	if !bytes.Contains(body, []byte(`"stop_reason":"max_tokens"`)) {
		t.Fatalf("anthropic body %s", body)
	}
}

func TestReset(t *testing.T) {
	_, ts := startSim(t, sim.Config{})
	resp, _, err := post(t, ts.URL+"/d/unreachable"+chatPath, chatBody("hi", false))
	if err == nil {
		t.Fatalf("got response %d, want a connection error", resp.StatusCode)
	}
}

func TestDeployments(t *testing.T) {
	s, ts := startSim(t, sim.Config{Deployments: map[string]sim.Profile{"primary": {}}})
	for _, tc := range []struct {
		path   string
		status int
	}{{"/d/primary", 200}, {"/d/down", 503}, {"", 200}, {"/d/unknown-name", 200}} {
		resp, _, err := post(t, ts.URL+tc.path+chatPath, chatBody("hi", false))
		if err != nil || resp.StatusCode != tc.status {
			t.Fatalf("%s: %v %v, want %d", tc.path, resp, err, tc.status)
		}
	}
	down, _ := sim.LookupProfile("down")
	s.SetProfile("primary", down)
	resp, _, _ := post(t, ts.URL+"/d/primary"+messagesPath, messagesBody("hi", false))
	if resp.StatusCode != 503 {
		t.Fatalf("after SetProfile: %d", resp.StatusCode)
	}
	st := s.Stats()
	if st.Requests != 5 || st.Deployments["primary"].Requests != 2 || st.Deployments["primary"].Faults["unavailable"] != 1 || st.Faults["unavailable"] != 2 {
		t.Fatalf("stats %+v", st)
	}
	r, _ := http.Get(ts.URL + "/sim/stats")
	var got sim.Stats
	_ = json.NewDecoder(r.Body).Decode(&got)
	r.Body.Close()
	if got.Requests != 5 || got.Faults["unavailable"] != 2 {
		t.Fatalf("/sim/stats %+v", got)
	}
}

func TestRequestErrors(t *testing.T) {
	_, ts := startSim(t, sim.Config{APIKey: "k1", MaxBodyBytes: 4096})
	resp, body, _ := post(t, ts.URL+chatPath, chatBody("hi", false))
	if resp.StatusCode != 401 || !bytes.Contains(body, []byte("invalid_api_key")) {
		t.Fatalf("no key: %d %s", resp.StatusCode, body)
	}
	resp, body, _ = post(t, ts.URL+messagesPath, `{"model":"m","messages":[]}`, "x-api-key", "k1")
	if resp.StatusCode != 400 || !bytes.Contains(body, []byte(`"message":"max_tokens: is required"`)) {
		t.Fatalf("invalid: %d %s", resp.StatusCode, body)
	}
	resp, body, _ = post(t, ts.URL+chatPath, `{"model":"m","messages":[]}`, "Authorization", "Bearer k1")
	if resp.StatusCode != 400 || !bytes.Contains(body, []byte(`"param":"messages"`)) {
		t.Fatalf("invalid: %d %s", resp.StatusCode, body)
	}
	resp, body, _ = post(t, ts.URL+messagesPath, messagesBody(strings.Repeat("x", 5000), false), "x-api-key", "k1")
	if resp.StatusCode != 413 || !bytes.Contains(body, []byte(`"type":"request_too_large"`)) {
		t.Fatalf("too large: %d %s", resp.StatusCode, body)
	}
	resp, body, _ = post(t, ts.URL+chatPath, chatBody("hi", false), "Authorization", "Bearer k1", "X-Sim-Fault", "bogus")
	if resp.StatusCode != 400 || !bytes.Contains(body, []byte("X-Sim-Fault")) {
		t.Fatalf("bad header: %d %s", resp.StatusCode, body)
	}
}

func TestModels(t *testing.T) {
	_, ts := startSim(t, sim.Config{Models: []string{"m1", "m2"}})
	r, _ := http.Get(ts.URL + "/v1/models")
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !bytes.Contains(b, []byte(`"object":"list"`)) || !bytes.Contains(b, []byte(`"id":"m2","object":"model"`)) {
		t.Fatalf("models %s", b)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/v1/models", nil)
	req.Header.Set("anthropic-version", "2023-06-01")
	r, _ = http.DefaultClient.Do(req)
	b, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if !bytes.Contains(b, []byte(`"type":"model","id":"m1"`)) || !bytes.Contains(b, []byte(`"last_id":"m2"`)) {
		t.Fatalf("anthropic models %s", b)
	}
}

func TestServeUntilContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Serve(ctx, ln, sim.Config{}) }()
	// A hung request must not keep the server from stopping.
	hung := make(chan error, 1)
	go func() {
		_, _, err := post(t, "http://"+ln.Addr().String()+chatPath, chatBody("hi", false), "X-Sim-Fault", "hang")
		hung <- err
	}()
	resp, _, err := post(t, "http://"+ln.Addr().String()+chatPath, chatBody("hi", false))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if err := <-hung; err == nil {
		t.Fatal("the hung request got an answer")
	}
}
