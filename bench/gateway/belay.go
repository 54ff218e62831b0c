package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// adminKey guards the admin API of the belay processes the bench starts.
const adminKey = "bench-admin-key"

// proxyConfig is belay in front of the zero-latency upstream: one alias,
// one deployment, the embedded SQLite store (set by --store), traces on
// (the default capture, redacted), and the run limits of belay's default
// configuration (20 turns, 5 minutes, $1.00).
const proxyConfig = `admin_key: %q
limits: {max_turns: 20, deadline: 5m, max_cost_usd: 1.00}
models:
  - alias: bench
    deployments:
      - {name: upstream, provider: openai, model: gpt-4o-mini, base_url: %q, api_key: sk-bench}
`

// Sim deployment names: the built-in simulator gives a deployment whose
// name is a built-in profile that profile ("down", "none"); other names
// get sim.profile (storm).
const (
	depStormA  = "storm-a"
	depStormB  = "storm-b"
	depDown    = "down"
	depHealthy = "none"
	// breakerThreshold is the consecutive failures that open a breaker in
	// the reliability config. Not belay's default of 10: a third of
	// storm's counted attempts fail (429s do not count), and among the
	// concurrent calls of a storm run 10 failures in a row come about
	// once per 70,000 attempts (0.34^10 × 0.66), so one storm breaker or
	// both opened now and then although each deployment still served two
	// thirds of its calls; with both open every call failed until they
	// closed. route's TestStormSuccessRate models the run: at 10, 35 of
	// 100 model runs opened a breaker and 7 failed the goal (both open);
	// at 20 (0.34^20 ≈ 4e-10), none of 100 opened one. A deployment that
	// is down still opens its breaker, after 20 failures in a row.
	breakerThreshold = 20
	// stormRetry is the retry setting of the reliability config. 54% of
	// storm's attempts fail, independently, so a call whose n attempts all
	// fail has probability 0.54^n: 6.2e-4 at n = 12 (99.94% success
	// expected, and over 10,000 requests more than 10 failures about one
	// run in twenty: seven runs of 10,000 gave 3 to 40), 5.3e-5 at n = 16
	// (about one failed call in 20,000). So a call gets up to 8 attempts on
	// each of its two deployments. The retry budget allows retries in
	// flight up to half the requests in flight (default: a fifth): storm's
	// hangs hold a retry for the 2s first-byte timeout, and at a fifth, at
	// 64 concurrent calls, the budget refused retries that the chain
	// needed (calls then failed with attempts left).
	stormRetry = "max_attempts: 8, chain_max_attempts: 16, budget_ratio: 0.5"
)

// simConfig is belay over its built-in simulator: alias "storm" with two
// storm deployments, alias "halfdown" with a deployment that is always
// down before a healthy one. Timeouts are short so that the storm's hangs
// (3% of requests) cost 2s, not the default 120s.
const simConfig = `admin_key: %q
sim: {profile: storm, seed: 1}
timeouts: {first_byte: 2s, first_token: 2s, idle: 2s}
breaker: {%s}
retry: {%s}
models:
  - alias: storm
    deployments:
      - {name: ` + depStormA + `, provider: openai, model: gpt-4o-mini, base_url: "sim://"}
      - {name: ` + depStormB + `, provider: openai, model: gpt-4o-mini, base_url: "sim://"}
  - alias: halfdown
    deployments:
      - {name: ` + depDown + `, provider: openai, model: gpt-4o-mini, base_url: "sim://"}
      - {name: ` + depHealthy + `, provider: openai, model: gpt-4o-mini, base_url: "sim://"}
`

// belayProc is one `belay serve` process.
type belayProc struct {
	*child
	base string // http://host:port
}

// startBelay writes cfgText to dir/name.yaml and runs
// `BIN serve --config FILE --listen ADDR --store sqlite://dir/name.db`.
// A non-empty storeURL replaces the SQLite store (a diagnostic: memory://
// shows the request path without the store).
func startBelay(ctx context.Context, bin, dir, name, cfgText, storeURL string) (*belayProc, error) {
	cfgPath := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	store := "sqlite://" + filepath.Join(dir, name+".db")
	if storeURL != "" {
		store = storeURL
	}
	args := []string{"serve", "--config", cfgPath, "--listen", addr, "--store", store}
	if cpuProfileDir != "" {
		args = append(args, "--cpuprofile", filepath.Join(cpuProfileDir, name+".cpu"))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	c, err := startChild(ctx, name, cmd, filepath.Join(dir, name+".log"), false, 0)
	if err != nil {
		return nil, err
	}
	p := &belayProc{child: c, base: "http://" + addr}
	if err := waitHTTP(ctx, p.base+"/healthz", 30*time.Second); err != nil {
		c.stop()
		log, _ := os.ReadFile(filepath.Join(dir, name+".log"))
		return nil, fmt.Errorf("belay serve (%s): %w\n%s", name, err, tail(log, 2000))
	}
	return p, nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// cpuTime reads the user and system CPU time pid has used, from
// /proc/PID/stat (fields 14 and 15, in clock ticks: USER_HZ, 100 per
// second on Linux, see proc(5)).
func cpuTime(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	d, err := statCPU(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return d, nil
}

// statCPU returns utime + stime of a /proc/PID/stat line.
func statCPU(b []byte) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want 13 or more", len(f))
	}
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q, stime %q", f[11], f[12])
	}
	return time.Duration(ut+st) * (time.Second / 100), nil
}

// rssKB reads VmRSS (kB) of pid from /proc.
func rssKB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// metricLine matches a Prometheus text sample: name{labels} value.
var metricLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// sample is one metric sample.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads base/metrics.
func scrape(ctx context.Context, base string) ([]sample, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		m := metricLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, lp := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[lp[1]] = lp[2]
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// sum adds the samples named name whose labels include every pair of want.
func sum(ss []sample, name string, want map[string]string) float64 {
	t := 0.0
next:
	for _, s := range ss {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		t += s.value
	}
	return t
}

// breakers reads GET /admin/breakers: deployment name → state.
func breakers(ctx context.Context, base string) (map[string]string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/admin/breakers", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /admin/breakers: %s: %s", resp.Status, b)
	}
	out := map[string]string{}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// upstreamCounts reads the zero-latency upstream's GET /stats.
func upstreamCounts(ctx context.Context, base string) (requests, permanent int64, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/stats", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var v struct{ Requests, Permanent int64 }
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v.Requests, v.Permanent, err
}
