package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// Harness is belay's side of an evaluation: it starts runs with their
// limits, gives the agent a way to reach belay, and returns what the run
// recorded. One Harness serves one provider setup; Runner asks its
// HarnessFactory for one per distinct setup in the suite.
type Harness interface {
	// Start begins run runID of scenario sc with limits.
	Start(ctx context.Context, sc *Scenario, runID string, limits store.Limits) (RunHandle, error)
	// Golden returns the canonical form of a saved golden trace.
	Golden(ctx context.Context, name string) ([]byte, error)
	Close() error
}

// RunHandle is one started run.
type RunHandle interface {
	// Env fills the parts of env that reach belay: HTTPClient, BaseURL,
	// Tools.
	Env(env *Env)
	// Finish ends the run (succeeded when agentErr is nil and exitCode is
	// 0, stopped with stop reason canceled when agentErr is
	// ErrInterrupted, failed otherwise, unless belay already stopped it)
	// and returns the stored run record and its spans.
	Finish(ctx context.Context, exitCode int, agentErr error) (store.Run, []trace.Span, error)
}

// HarnessFactory builds a Harness for a provider setup.
type HarnessFactory func(ctx context.Context, s *Suite, p Providers) (Harness, error)

// Options change a suite's run without editing it.
type Options struct {
	Runs     int    // overrides runs per scenario when > 0; at most MaxRuns
	Seed     *int64 // overrides the suite seed
	Progress io.Writer
	// WorkDir holds per-run world files; default a temporary folder.
	WorkDir string
}

// findProgram checks that a command agent's program can be started: a
// name with a path separator is a file (relative to the suite's folder,
// where it runs), a bare name is looked up in PATH, as exec does. A
// missing program would fail every run as a crash.
func findProgram(dir, prog string) error {
	if filepath.Base(prog) == prog {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Errorf("program %q is not in PATH", prog)
		}
		return nil
	}
	path := prog
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("program %q: %w (a relative path is taken from the suite's folder)", prog, err)
	case fi.IsDir():
		return fmt.Errorf("program %q is a folder", prog)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("program %q is not executable (chmod +x, or name its interpreter first: [python3, %s])", prog, prog)
	}
	return nil
}

// job is one run to do.
type job struct {
	sc    *Scenario
	index int
}

// Run executes every scenario of s the configured number of times through
// harnesses from newHarness and returns the report. It fails only when the
// suite cannot run at all (no agent, a harness that cannot start); a run
// that fails, times out or crashes is a result, not an error.
func Run(ctx context.Context, s *Suite, newHarness HarnessFactory, opt Options) (*Report, error) {
	// A suite built in code skips LoadSuite: a NaN here would end up in
	// the report, which JSON cannot encode, and a size past its bound
	// would exhaust memory.
	if err := checkMinPassRate(s.MinPassRate); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadSuite, s.Path, err)
	}
	if err := s.checkSizes(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadSuite, s.Path, err)
	}
	// What it leaves 0 gets LoadSuite's defaults (a concurrency of 0
	// started no worker, and Run waited forever), on a copy: the caller's
	// suite is not changed.
	cp := *s
	cp.setDefaults()
	cp.Scenarios = slices.Clone(s.Scenarios)
	s = &cp
	for i := range s.Scenarios {
		sc := &s.Scenarios[i]
		if err := checkRunIDPart(sc.Name); err != nil {
			return nil, fmt.Errorf("%w: %s: scenarios.%d.name: %w", ErrBadSuite, s.Path, i, err)
		}
		if sc.World != nil && sc.worldJSON == nil { // built in code: LoadSuite encoded none
			b, err := json.Marshal(sc.World)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: scenarios.%d.world: cannot be written as JSON for the agent: %w", ErrBadSuite, s.Path, i, err)
			}
			sc.worldJSON = b
		}
	}
	if opt.Runs < 0 || opt.Runs > MaxRuns {
		return nil, fmt.Errorf("eval: Options.Runs %d: must be between 1 and %d, or 0 for the suite's runs", opt.Runs, MaxRuns)
	}
	var inproc Agent
	if s.Agent.Go != "" {
		a, err := lookupAgent(s.Agent.Go)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: agent.go: %w", ErrBadSuite, s.Path, err)
		}
		inproc = a
		if cp, ok := a.(CheckParser); ok {
			for i, sc := range s.Scenarios {
				if sc.Expect.Check == "" {
					continue
				}
				if err := cp.ParseCheck(sc.Expect.Check); err != nil {
					return nil, fmt.Errorf("%w: %s: scenarios.%d.expect.check (scenario %s): %w", ErrBadSuite, s.Path, i, sc.Name, err)
				}
			}
		}
	}
	if len(s.Agent.Command) > 0 {
		if err := findProgram(s.Dir, s.Agent.Command[0]); err != nil {
			return nil, fmt.Errorf("%w: %s: agent.command: %w", ErrBadSuite, s.Path, err)
		}
	}
	seed := s.Seed
	if opt.Seed != nil {
		seed = *opt.Seed
		// The harnesses' simulators draw from the suite's seed: the
		// override is the suite's seed for this evaluation.
		o := *s
		o.Seed = seed
		s = &o
	}
	work := opt.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "belay-eval-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	harnesses, err := newHarnessSet(ctx, s, newHarness)
	if err != nil {
		return nil, err
	}
	defer harnesses.close()

	var jobs []job
	for i := range s.Scenarios {
		sc := &s.Scenarios[i]
		n := s.Runs
		if sc.Runs > 0 {
			n = sc.Runs
		}
		if opt.Runs > 0 {
			n = opt.Runs
		}
		for k := 0; k < n; k++ {
			jobs = append(jobs, job{sc: sc, index: k})
		}
	}
	started := time.Now()
	bar := newProgress(opt.Progress, len(jobs))
	evalID := newEvalID()
	outcomes := make([]Outcome, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < s.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					continue // interrupted: no run starts after it
				}
				j := jobs[i]
				r := runner{suite: s, agent: inproc, seed: mix(seed, j.sc.Name, j.index), work: work}
				h, herr := harnesses.get(ctx, j.sc)
				if herr != nil {
					outcomes[i] = Outcome{Scenario: j.sc.Name, Index: j.index, Reason: "harness", Failures: []string{herr.Error()}}
				} else {
					outcomes[i] = r.one(ctx, h, j, runID(evalID, j.sc.Name, j.index))
				}
				bar.add(outcomes[i].Passed)
			}
		}()
	}
	for i := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	bar.done()
	if err := ctx.Err(); err != nil {
		ended, cut := 0, 0
		for _, o := range outcomes {
			switch {
			case o.Interrupted:
				cut++
			case o.Scenario != "":
				ended++
			}
		}
		return nil, fmt.Errorf("eval interrupted (%w) with %d of %d runs ended and %d cut short: no report is written; "+
			"the runs that ended were recorded in the store, and those cut short as stopped (stop reason canceled)",
			err, ended, len(jobs), cut)
	}
	rep := buildReport(s, seed, outcomes)
	rep.Started = started
	rep.Duration = time.Since(started).Seconds()
	return rep, nil
}

// mix derives a run's seed from the suite seed, scenario and index.
func mix(seed int64, scenario string, index int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", seed, scenario, index)
	return int64(h.Sum64() >> 1)
}

// RunKey returns the part of an eval run id that is the same in every
// invocation of the suite: run ids are "evXXXXXXXX-SCENARIO-INDEX", where
// the ev prefix is new each time (ids are unique in the store). Random
// draws keyed by RunKey (the simulator's faults and replies) are then the
// same for the same seed.
func RunKey(runID string) string {
	if prefix, rest, ok := strings.Cut(runID, "-"); ok && strings.HasPrefix(prefix, "ev") {
		return rest
	}
	return runID
}

func newEvalID() string {
	return fmt.Sprintf("ev%x", time.Now().UnixNano()&evalIDMask)
}

// evalIDMask keeps an evaluation's id to "ev" and at most 10 hex digits.
const evalIDMask = 0xffffffffff

// runID is the id of run index of a scenario in evaluation evalID.
func runID(evalID, scenario string, index int) string {
	return fmt.Sprintf("%s-%s-%d", evalID, scenario, index)
}

// A run id must be what the gateway takes in X-Belay-Run-Id
// (gateway.runIDPattern): 1-128 letters, digits and . _ : -.
const maxRunIDLen = 128

var runIDChars = regexp.MustCompile(`^[A-Za-z0-9._:\-]*$`)

// maxScenarioName is the longest scenario name that fits in every run id:
// the longest is the longest evaluation id, the name and the index of run
// MaxRuns-1, so 109 characters.
var maxScenarioName = maxRunIDLen - len(runID(fmt.Sprintf("ev%x", evalIDMask), "", MaxRuns-1))

// checkRunIDPart refuses a scenario name that cannot be part of its runs'
// ids: a character outside the gateway's, or too long a name. Its runs
// would all fail as crashes, the agent's calls refused by the gateway.
func checkRunIDPart(name string) error {
	why := ""
	switch loc := runIDChars.FindStringIndex(name); {
	case loc == nil:
		bad := strings.TrimLeft(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")
		c, _ := utf8.DecodeRuneInString(bad)
		why = fmt.Sprintf("has %q", string(c))
	case len(name) > maxScenarioName:
		why = fmt.Sprintf("is %d characters", len(name))
	default:
		return nil
	}
	shown := name
	if utf8.RuneCountInString(shown) > 40 {
		shown = string([]rune(shown)[:40]) + "…"
	}
	return fmt.Errorf("%q %s: a scenario name is part of its runs' ids (evXXXXXXXXXX-NAME-N, sent as %s), "+
		"so it may use only letters, digits and . _ : -, at most %d characters", shown, why, "X-Belay-Run-Id", maxScenarioName)
}

// harnessSet builds one harness per distinct provider setup, lazily.
type harnessSet struct {
	mu    sync.Mutex
	suite *Suite
	newH  HarnessFactory
	byKey map[string]*harnessEntry
}

type harnessEntry struct {
	once sync.Once
	h    Harness
	err  error
}

func newHarnessSet(ctx context.Context, s *Suite, f HarnessFactory) (*harnessSet, error) {
	hs := &harnessSet{suite: s, newH: f, byKey: map[string]*harnessEntry{}}
	// Build every harness up front, the suite's and each scenario's own
	// providers', so a setup that cannot start fails the command before
	// the first run, not each run of its scenario (an adversarial review
	// found a scenario's missing script failing its runs, exit 0).
	if _, err := hs.get(ctx, &Scenario{}); err != nil {
		hs.close()
		return nil, err
	}
	for i := range s.Scenarios {
		sc := &s.Scenarios[i]
		if sc.Providers == nil {
			continue
		}
		if _, err := hs.get(ctx, sc); err != nil {
			hs.close()
			return nil, fmt.Errorf("scenario %q: providers: %w", sc.Name, err)
		}
	}
	return hs, nil
}

func effectiveProviders(s *Suite, sc *Scenario) Providers {
	if sc.Providers != nil {
		return *sc.Providers
	}
	return s.Providers
}

func (hs *harnessSet) get(ctx context.Context, sc *Scenario) (Harness, error) {
	p := effectiveProviders(hs.suite, sc)
	key := p.Key()
	hs.mu.Lock()
	e, ok := hs.byKey[key]
	if !ok {
		e = &harnessEntry{}
		hs.byKey[key] = e
	}
	hs.mu.Unlock()
	e.once.Do(func() {
		e.h, e.err = hs.newH(ctx, hs.suite, p)
		if e.err != nil {
			e.h = nil // a typed nil would be closed by close
		}
	})
	return e.h, e.err
}

func (hs *harnessSet) close() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, e := range hs.byKey {
		if e.h != nil {
			_ = e.h.Close()
		}
	}
}

// worldPath returns a fresh world file path for a run.
func worldPath(work, runID string) string {
	return filepath.Join(work, runID+".world.json")
}

var errAgentTimeout = errors.New("agent timed out")
