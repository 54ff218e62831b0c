package failure

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// wireCase is one file of shared/cases/wire (see shared/cases/README.md).
type wireCase struct {
	ID      string            `json:"id"`
	About   string            `json:"about"`
	Dialect string            `json:"dialect"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Stream  bool              `json:"stream"`
	Body    string            `json:"body"`
	Now     string            `json:"now"`
	Expect  struct {
		Kind          string   `json:"kind"`
		Reason        string   `json:"reason"`
		RetryAfterMS  *float64 `json:"retry_after_ms"`
		OutputStarted *bool    `json:"output_started"`
		InputTokens   *int64   `json:"input_tokens"`
		OutputTokens  *int64   `json:"output_tokens"`
	} `json:"expect"`
}

// findWireCases walks up from the working directory looking for
// shared/cases/wire, which sits inside the repository or beside it.
func findWireCases() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		candidate := filepath.Join(dir, "shared", "cases", "wire")
		if st, err := os.Stat(candidate); err == nil && st.IsDir() {
			return candidate, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// wireCaseDirs returns the folders of wire cases to run: shared/cases/wire
// when found, and the folder named by BELAY_WIRE_CASES, which must exist when
// set.
func wireCaseDirs() ([]string, error) {
	var dirs []string
	if dir, ok := findWireCases(); ok {
		dirs = append(dirs, dir)
	}
	if extra := os.Getenv("BELAY_WIRE_CASES"); extra != "" {
		st, err := os.Stat(extra)
		if err != nil {
			return nil, fmt.Errorf("BELAY_WIRE_CASES=%q: %w", extra, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("BELAY_WIRE_CASES=%q is not a folder", extra)
		}
		dirs = append(dirs, extra)
	}
	return dirs, nil
}

func TestWireCases(t *testing.T) {
	dirs, err := wireCaseDirs()
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Skip("no shared/cases/wire folder found in or above the working directory, and BELAY_WIRE_CASES is unset")
	}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("%s holds no *.json case files", dir)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c wireCase
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if c.ID == "" {
				c.ID = strings.TrimSuffix(filepath.Base(f), ".json")
			}
			t.Run(c.ID, func(t *testing.T) { checkWireCase(t, c) })
		}
	}
}

func checkWireCase(t *testing.T, c wireCase) {
	h := http.Header{}
	for k, v := range c.Headers {
		h.Add(k, v)
	}
	now := time.Now()
	if c.Now != "" {
		var err error
		if now, err = time.Parse(time.RFC3339Nano, c.Now); err != nil {
			t.Fatalf("now: %v", err)
		}
	}
	d := Dialect(c.Dialect)
	body := []byte(c.Body)
	success := c.Status >= 200 && c.Status < 300

	var got *Error
	var usage StreamUsage
	var haveUsage bool
	if c.Stream && success {
		got = classifyStreamResponse(now, d, c.Status, h, body)
		_, usage = ClassifyStream(d, body)
		haveUsage = true
	} else {
		got = ClassifyResponseAt(now, d, c.Status, h, body)
		usage, haveUsage = ParseUsage(body)
	}
	t.Logf("%s: got %v", c.About, got)

	if want := c.Expect.Kind; want != "" {
		gotKind := OK
		if got != nil {
			gotKind = got.Kind
		}
		if gotKind.String() != want {
			t.Errorf("kind = %s, want %s (error: %v)", gotKind, want, got)
		}
	}
	if want := c.Expect.Reason; want != "" {
		if got == nil || string(got.Reason) != want {
			t.Errorf("reason = %v, want %s", got, want)
		}
	}
	if want := c.Expect.RetryAfterMS; want != nil {
		switch {
		case got == nil || !got.HasRetryAfter:
			t.Errorf("no retry-after, want %gms", *want)
		case math.Abs(float64(got.RetryAfter)/float64(time.Millisecond)-*want) > 0.5:
			t.Errorf("retry-after = %v, want %gms", got.RetryAfter, *want)
		}
	}
	if want := c.Expect.OutputStarted; want != nil {
		if got == nil || got.OutputStarted != *want {
			t.Errorf("output started: error %+v, want OutputStarted=%v", got, *want)
		}
	}
	if want := c.Expect.InputTokens; want != nil && (!haveUsage || usage.InputTokens != *want) {
		t.Errorf("input tokens = %d (reported: %v), want %d", usage.InputTokens, haveUsage, *want)
	}
	if want := c.Expect.OutputTokens; want != nil && (!haveUsage || usage.OutputTokens != *want) {
		t.Errorf("output tokens = %d (reported: %v), want %d", usage.OutputTokens, haveUsage, *want)
	}
}

func TestWireCaseDirsMissingEnvFolderIsAnError(t *testing.T) {
	t.Setenv("BELAY_WIRE_CASES", filepath.Join(t.TempDir(), "absent"))
	if _, err := wireCaseDirs(); err == nil {
		t.Fatal("a missing BELAY_WIRE_CASES folder was accepted")
	}
}

// TestWireCasesEnvFolder runs extra case files through BELAY_WIRE_CASES,
// among them one that needs the injected now.
func TestWireCasesEnvFolder(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"http-date.json": `{"id": "env-http-date", "dialect": "openai", "status": 503,
			"headers": {"retry-after": "Sun, 29 Nov 2026 10:00:30 GMT"}, "body": "",
			"now": "2026-11-29T10:00:00Z",
			"expect": {"kind": "transient", "reason": "overloaded", "retry_after_ms": 30000}}`,
		"gemini-stream.json": `{"id": "env-gemini-stream", "dialect": "gemini", "status": 200, "stream": true,
			"headers": {"content-type": "text/event-stream"},
			"body": "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}], \"role\": \"model\"}, \"finishReason\": \"STOP\"}], \"usageMetadata\": {\"promptTokenCount\": 9, \"candidatesTokenCount\": 2}}\r\n\r\n",
			"expect": {"kind": "ok", "input_tokens": 9, "output_tokens": 2}}`,
	}
	for name, body := range cases {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("BELAY_WIRE_CASES", dir)
	TestWireCases(t)
}
