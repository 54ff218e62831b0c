// Command gateway measures belay's gateway (`belay serve`) against a
// direct call and a bare net/http/httputil.ReverseProxy — and Portkey's
// gateway 1.15.2 when npm can install it — in one run on loopback, and
// prints each goal of the gateway's performance issue as a ratio with
// PASS or FAIL. See README.md for the goals, the command and the figures.
//
// Processes: a zero-latency OpenAI-compatible upstream and the bare proxy
// are this program re-executed (-role upstream, -role proxy); belay runs
// as `BIN serve` with the embedded SQLite store and traces on; the load
// generator is this process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuProfileDir, when set (-cpuprofile), is where belay processes write
// CPU profiles.
var cpuProfileDir string

type options struct {
	belay       string
	full        bool
	warm, n     int
	streams     int
	conc        []int
	tdur        time.Duration
	rssFrom     int64
	rssTo       int64
	stormN      int
	downN       int
	portkey     bool
	portkeyWait time.Duration
	keep        bool
	store       string
	simBreaker  string
	simRetry    string
	seqOnly     bool
	tputRounds  int
	belayB      string
	relay       bool
	order       string
	block       int
}

func main() {
	role := flag.String("role", "", "internal: run as a helper process (upstream or proxy)")
	targetURL := flag.String("target", "", "internal: the proxy's upstream URL")
	var o options
	var concList string
	flag.StringVar(&o.belay, "belay", "", "path of the belay binary (go build -o PATH ./cmd/belay); required")
	flag.BoolVar(&o.full, "full", false, "full mode: RSS at 100,000 and 1,000,000 requests, 10,000 storm requests")
	flag.IntVar(&o.warm, "warm", 200, "warm-up requests per target before the sequential samples")
	flag.IntVar(&o.n, "n", 2000, "sequential samples per target (latency and time to first token)")
	flag.IntVar(&o.streams, "streams", 10000, "streamed requests per target for stream integrity")
	flag.StringVar(&concList, "conc", "32,64", "concurrency levels for throughput at saturation")
	flag.DurationVar(&o.tdur, "tdur", 3*time.Second, "duration of each throughput measurement")
	flag.Int64Var(&o.rssFrom, "rss-from", 30000, "belay requests at the first RSS reading (-full: 100000)")
	flag.Int64Var(&o.rssTo, "rss-to", 100000, "belay requests at the second RSS reading (-full: 1000000)")
	flag.IntVar(&o.stormN, "storm", 2000, "client requests under the storm profile (-full: 10000)")
	flag.IntVar(&o.downN, "down", 2000, "client requests with one deployment down")
	flag.BoolVar(&o.portkey, "portkey", true, "install and measure Portkey's gateway "+portkeyVersion+" if npm can")
	flag.DurationVar(&o.portkeyWait, "portkey-install-timeout", 120*time.Second, "the one npm install attempt's time limit")
	flag.StringVar(&o.store, "store", "", "diagnostic: the store URL of the belay under measurement instead of SQLite (memory://); the goals need the default")
	flag.StringVar(&o.simBreaker, "sim-breaker", "", "diagnostic: the reliability config's breaker settings instead of consecutive_failures: 20, failure_rate: 0.8, as YAML (\"consecutive_failures: 10, failure_rate: 0.9\")")
	flag.StringVar(&o.simRetry, "sim-retry", "", "diagnostic: retry settings for the reliability config, as YAML (\"budget_ratio: 1\"); default \"max_attempts: 8, chain_max_attempts: 16, budget_ratio: 0.5\"")
	flag.StringVar(&cpuProfileDir, "cpuprofile", "", "diagnostic: write each belay process's CPU profile to DIR/NAME.cpu (go tool pprof)")
	flag.BoolVar(&o.seqOnly, "seq-only", false, "diagnostic: measure only the sequential latency and time to first token (direct, proxy, belay) and print them; no goals")
	flag.IntVar(&o.tputRounds, "tput-only", 0, "diagnostic: measure only the throughput of proxy, belay[, belay-b], this many rounds (each target in turn, at the first -conc, for -tdur), and print each belay's median ratio to the proxy; no goals")
	flag.StringVar(&o.belayB, "belay-b", "", "diagnostic, with -seq-only or -tput-only: a second belay binary measured in the same interleaved run (target belay-b, same config and store kind), for A/B comparisons that drift between runs does not blur")
	flag.IntVar(&o.block, "block", 1, "requests each target gets in a row at its turn in the sequential measurements; above 1 the first of each block (which follows another target's request) is not sampled")
	flag.BoolVar(&o.relay, "relay", false, "diagnostic, with -seq-only or -tput-only: also measure a minimal parsing relay (reads the body, decodes its model with encoding/json, relays the answer; no limits, records or retries), the floor of any gateway that routes on the body, and print each target's ratio to the proxy")
	flag.StringVar(&o.order, "order", "shuffled", "order of the targets in each round of the sequential measurements: shuffled (drawn anew each round, seeded) or fixed (direct, proxy, belay[, belay-b], portkey: diagnostic, each target then always follows the same one)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configs, logs, SQLite stores)")
	flag.Parse()

	if *role != "" {
		if err := runRole(*role, *targetURL); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if o.order != "shuffled" && o.order != "fixed" {
		fmt.Fprintf(os.Stderr, "-order: %q is neither shuffled nor fixed\n", o.order)
		os.Exit(2)
	}
	for _, s := range strings.Split(concList, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 {
			fmt.Fprintf(os.Stderr, "-conc: %q is not a positive integer\n", s)
			os.Exit(2)
		}
		o.conc = append(o.conc, c)
	}
	if o.full {
		setIfDefault("rss-from", &o.rssFrom, 100000)
		setIfDefault("rss-to", &o.rssTo, 1000000)
		setIfDefault("storm", &o.stormN, 10000)
	}
	if o.belay == "" {
		fmt.Fprintln(os.Stderr, "-belay PATH is required (run.sh builds it)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// setIfDefault sets *v to full unless the flag name was given.
func setIfDefault[T any](name string, v *T, full T) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	if !given {
		*v = full
	}
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "belay-bench-gateway-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("temporary directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var m measured
	m.started = time.Now()

	up, err := startChild(ctx, "upstream", exec.CommandContext(ctx, self, "-role", "upstream"), filepath.Join(dir, "upstream.log"), true, 10*time.Second)
	if err != nil {
		return err
	}
	defer up.stop()
	upBase := "http://" + up.addr
	px, err := startChild(ctx, "proxy", exec.CommandContext(ctx, self, "-role", "proxy", "-target", upBase), filepath.Join(dir, "proxy.log"), true, 10*time.Second)
	if err != nil {
		return err
	}
	defer px.stop()
	bp, err := startBelay(ctx, o.belay, dir, "belay", fmt.Sprintf(proxyConfig, adminKey, upBase+"/v1"), o.store)
	if o.store != "" {
		fmt.Println("NOTE: belay uses store", o.store, "- a diagnostic run, not the full path the goals ask for")
	}
	if err != nil {
		return err
	}
	defer bp.stop()

	direct := newTarget("direct", upBase+"/v1", "gpt-4o-mini", nil)
	proxy := newTarget("proxy", "http://"+px.addr+"/v1", "gpt-4o-mini", nil)
	bel := newTarget("belay", bp.base+"/v1", "bench", nil)
	proxy.pid, bel.pid = px.cmd.Process.Pid, bp.cmd.Process.Pid
	targets := []*target{direct, proxy, bel}
	if o.portkey {
		pk, pt, err := startPortkey(ctx, dir, upBase, o.portkeyWait)
		if err != nil {
			fmt.Println("portkey: not installed:", firstLine(err.Error()))
		} else {
			defer pk.stop()
			targets = append(targets, pt)
			m.portkey = true
			if pt.noStream != "" {
				fmt.Println("portkey: streaming skipped:", pt.noStream)
				m.portkeyNoStream = pt.noStream
			}
		}
	}
	fmt.Printf("upstream %s, bare proxy %s, belay %s (pid %d)\n", upBase, px.addr, bp.base, bp.cmd.Process.Pid)

	if o.seqOnly || o.tputRounds > 0 {
		if o.belayB != "" {
			bb, err := startBelay(ctx, o.belayB, dir, "belay-b", fmt.Sprintf(proxyConfig, adminKey, upBase+"/v1"), o.store)
			if err != nil {
				return err
			}
			defer bb.stop()
			tb := newTarget("belay-b", bb.base+"/v1", "bench", nil)
			tb.pid = bb.cmd.Process.Pid
			targets = append(targets, tb)
		}
		if o.relay {
			rl, err := startChild(ctx, "relay", exec.CommandContext(ctx, self, "-role", "relay", "-target", upBase), filepath.Join(dir, "relay.log"), true, 10*time.Second)
			if err != nil {
				return err
			}
			defer rl.stop()
			targets = append(targets, newTarget("relay", "http://"+rl.addr+"/v1", "gpt-4o-mini", nil))
		}
		if o.tputRounds > 0 {
			return tputOnly(ctx, o, targets[1:])
		}
		return seqOnly(ctx, o, targets)
	}
	if err := measureSpeed(ctx, o, targets, &m); err != nil {
		return err
	}
	streamTargets := []*target{direct, proxy, bel}
	for _, t := range streamTargets {
		step("stream integrity: %d streams to %s", o.streams, t.name)
		m.integrity = append(m.integrity, namedIntegrity{t.name, streamIntegrity(ctx, t, o.streams, 32)})
	}

	step("permanent failures: 200 requests the upstream refuses with 400 context_length_exceeded")
	if m.permanent, err = permanent(ctx, bel, upBase, 200); err != nil {
		return err
	}

	if err := measureRSS(ctx, o, bel, bp.cmd.Process.Pid, &m); err != nil {
		return err
	}

	retryYAML := o.simRetry
	if retryYAML == "" {
		retryYAML = stormRetry
	}
	sp, err := startBelay(ctx, o.belay, dir, "belay-sim", fmt.Sprintf(simConfig, adminKey, breakerYAML(o.simBreaker), retryYAML), "")
	if err != nil {
		return err
	}
	defer sp.stop()
	step("storm: %d requests to two storm deployments, concurrency 64", o.stormN)
	if m.storm, err = storm(ctx, sp, o.stormN, 64); err != nil {
		return err
	}
	step("storm: %d of %d succeeded, %.0f upstream attempts", m.storm.succeeded, m.storm.requests, m.storm.attempts)
	step("one deployment down: %d requests, concurrency 16", o.downN)
	if m.down, err = halfDown(ctx, sp, o.downN, 16); err != nil {
		return err
	}
	m.elapsed = time.Since(m.started)
	report(os.Stdout, o, &m)
	return nil
}

// seqOnly measures the sequential latency and time to first token alone
// and prints each target's figures and belay's ratios to the proxy.
func seqOnly(ctx context.Context, o options, targets []*target) error {
	step("sequential non-streaming: %d warm-up + %d samples per target, interleaved", o.warm, o.n)
	shuffle := o.order != "fixed"
	plain, err := sequential(ctx, targets, false, o.warm, o.n, o.block, shuffle)
	if err != nil {
		return err
	}
	direct := quantile(plain["direct"].total, 0.5)
	added := map[string]time.Duration{}
	for _, t := range targets {
		med := quantile(plain[t.name].total, 0.5)
		added[t.name] = med - direct
		fmt.Printf("%-8s median %s  added %s  p99 %s  fails %d\n", t.name,
			ms(med), ms(added[t.name]), ms(quantile(plain[t.name].total, 0.99)), plain[t.name].fails)
	}
	if added["proxy"] > 0 {
		for _, t := range targets[2:] {
			fmt.Printf("%s/proxy added median: %.2f×\n", t.name, float64(added[t.name])/float64(added["proxy"]))
		}
	}
	step("sequential streaming: %d warm-up + %d samples per target, interleaved", o.warm, o.n)
	stream, err := sequential(ctx, targets, true, o.warm, o.n, o.block, shuffle)
	if err != nil {
		return err
	}
	directTTFT := quantile(stream["direct"].ttft, 0.99)
	addedTTFT := map[string]time.Duration{}
	for _, t := range targets {
		if stream[t.name] == nil || len(stream[t.name].ttft) == 0 {
			continue
		}
		p99 := quantile(stream[t.name].ttft, 0.99)
		addedTTFT[t.name] = p99 - directTTFT
		fmt.Printf("%-8s TTFT p50 %s  p99 %s  added p99 %s\n", t.name,
			ms(quantile(stream[t.name].ttft, 0.5)), ms(p99), ms(addedTTFT[t.name]))
	}
	if addedTTFT["proxy"] > 0 {
		for _, t := range targets[2:] {
			if v, ok := addedTTFT[t.name]; ok {
				fmt.Printf("%s/proxy added TTFT p99: %.2f×\n", t.name, float64(v)/float64(addedTTFT["proxy"]))
			}
		}
	}
	return nil
}

// tputOnly measures the throughput of targets (proxy first) in turn,
// o.tputRounds times, and prints each round and each belay's median ratio
// to the proxy: an A/B of two belay builds whose rounds alternate, so that
// the machine's drift lands on both. It also prints each target's CPU
// time per request (its process's user and system time over the round,
// from /proc, over the requests it answered), which varies less than the
// rate between rounds on a busy machine, and each belay's median ratio of
// it to the proxy's.
func tputOnly(ctx context.Context, o options, targets []*target) error {
	rps := map[string][]float64{}
	cpu := map[string][]float64{} // µs per request
	for r := range o.tputRounds {
		for _, t := range targets {
			t0, errT := cpuTime(t.pid)
			n0 := t.sent.Load()
			v, fails := saturate(ctx, t, o.conc[0], o.tdur)
			if err := ctx.Err(); err != nil {
				return err
			}
			t1, errT1 := cpuTime(t.pid)
			n := t.sent.Load() - n0
			rps[t.name] = append(rps[t.name], v)
			perReq := ""
			if errT == nil && errT1 == nil && n > 0 {
				us := float64(t1-t0) / float64(time.Microsecond) / float64(n)
				cpu[t.name] = append(cpu[t.name], us)
				perReq = fmt.Sprintf("  %4.0f µs CPU per request", us)
			}
			fmt.Printf("round %d  %-8s %7.0f req/s  (%d failed)%s\n", r+1, t.name, v, fails, perReq)
		}
	}
	for _, t := range targets[1:] {
		fmt.Printf("%s/proxy throughput, median of %d rounds: %s\n", t.name, len(rps[t.name]), medianRatio(rps[t.name], rps["proxy"]))
		if len(cpu[t.name]) == len(cpu["proxy"]) && len(cpu["proxy"]) > 0 {
			fmt.Printf("%s/proxy CPU per request, median of %d rounds: %s\n", t.name, len(cpu[t.name]), medianRatio(cpu[t.name], cpu["proxy"]))
		}
	}
	return nil
}

// medianRatio formats the median and range of a[i]/b[i].
func medianRatio(a, b []float64) string {
	var ratios []float64
	for i, v := range a {
		ratios = append(ratios, v/max(1e-9, b[i]))
	}
	slices.Sort(ratios)
	return fmt.Sprintf("%.3f× (%.3f–%.3f)", ratios[(len(ratios)-1)/2], ratios[0], ratios[len(ratios)-1])
}

// measureSpeed runs the sequential latency, streaming TTFT and throughput
// measurements.
func measureSpeed(ctx context.Context, o options, targets []*target, m *measured) error {
	var err error
	step("sequential non-streaming: %d warm-up + %d samples per target, interleaved", o.warm, o.n)
	if m.plain, err = sequential(ctx, targets, false, o.warm, o.n, o.block, o.order != "fixed"); err != nil {
		return err
	}
	step("sequential streaming: %d warm-up + %d samples per target, interleaved", o.warm, o.n)
	if m.stream, err = sequential(ctx, targets, true, o.warm, o.n, o.block, o.order != "fixed"); err != nil {
		return err
	}
	m.rps = map[string]float64{}
	m.rpsFails = map[string]int64{}
	for _, c := range o.conc {
		for _, t := range targets {
			step("throughput: %s at concurrency %d for %v", t.name, c, o.tdur)
			rps, fails := saturate(ctx, t, c, o.tdur)
			if rps > m.rps[t.name] {
				m.rps[t.name] = rps
				m.rpsConc = append(m.rpsConc, fmt.Sprintf("%s@%d", t.name, c))
			}
			m.rpsFails[t.name] += fails
		}
	}
	return ctx.Err()
}

// rssSamples is how many VmRSS readings make one memory reading, and
// rssSpacing the share of the reading's request count driven between two
// of them. One sample lands anywhere in a garbage-collection cycle (in
// session 11 the Go heap in use read 13.8 and 24.6 MB at two readings
// while the runtime's mapped total stayed at 52.9 MB, and one full run
// measured 1.143× where the next measured 1.022×); the median of readings
// spread over the next 4% of requests is the resident set at that point,
// not at one instant of it.
const (
	rssSamples = 5
	rssSpacing = 0.01
)

// measureRSS drives belay to rssFrom and rssTo requests in total and reads
// its resident set at each: the median of rssSamples readings, taken
// rssSpacing×count requests apart from the count on.
func measureRSS(ctx context.Context, o options, bel *target, pid int, m *measured) error {
	for _, at := range []int64{o.rssFrom, o.rssTo} {
		step("memory: driving belay to %d requests (now %d)", at, bel.sent.Load())
		var r rssReading
		for i := range rssSamples {
			m.rssFails += drive(ctx, bel, 32, at+int64(float64(i)*rssSpacing*float64(at)))
			if err := ctx.Err(); err != nil {
				return err
			}
			kb, err := rssKB(pid)
			if err != nil {
				return err
			}
			if i == 0 {
				r.requests = bel.sent.Load()
			}
			r.samples = append(r.samples, kb)
		}
		r.kb = median(r.samples)
		m.rss = append(m.rss, r)
	}
	return nil
}

// median returns the middle value of xs (the lower of the two middle
// ones for an even count); xs is not changed.
func median(xs []int64) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// breakerYAML returns the reliability config's breaker settings: s, or
// the consecutive-failure threshold the breaker goal is checked against.
func breakerYAML(s string) string {
	if strings.TrimSpace(s) == "" {
		// Storm deployments fail a third of their attempts and still serve;
		// a breaker that trips at a 50% failure rate over a window cuts
		// them off now and then, so the storm config trips at 80% (a
		// deployment that is down still trips on breakerThreshold
		// failures in a row).
		return fmt.Sprintf("consecutive_failures: %d, failure_rate: 0.8", breakerThreshold)
	}
	return s
}

func step(format string, args ...any) {
	fmt.Printf("[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
