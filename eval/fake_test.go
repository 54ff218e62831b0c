package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// canned is what the fake harness records for one run, beyond the tool
// spans the agent produced through Env.Tools.
type canned struct {
	status     store.RunStatus // empty: succeeded or failed from the exit
	stopReason string
	turns      int
	cost       string // USD decimal
	spans      []trace.Span
}

// fakeHarness implements Harness with canned run records: script decides,
// per scenario and run index, what the run recorded.
type fakeHarness struct {
	script func(scenario string, index int) canned
	golden map[string][]byte
	// approval is the approval state recorded on tool spans the agent runs
	// through Env.Tools, per tool (default not_required).
	approval map[string]string

	mu       sync.Mutex
	limits   map[string]store.Limits // by scenario
	started  int
	finished []error // the agent error of each Finish, in order
	closed   atomic.Int32
}

var _ Harness = (*fakeHarness)(nil)

func (f *fakeHarness) Start(ctx context.Context, sc *Scenario, runID string, limits store.Limits) (RunHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limits == nil {
		f.limits = map[string]store.Limits{}
	}
	f.limits[sc.Name] = limits
	f.started++
	return &fakeRun{f: f, sc: sc.Name, runID: runID}, nil
}

func (f *fakeHarness) Golden(ctx context.Context, name string) ([]byte, error) {
	if b, ok := f.golden[name]; ok {
		return b, nil
	}
	return nil, store.ErrNotFound
}

func (f *fakeHarness) Close() error { f.closed.Add(1); return nil }

// factory returns a HarnessFactory that always hands out f.
func (f *fakeHarness) factory() HarnessFactory {
	return func(context.Context, *Suite, Providers) (Harness, error) { return f, nil }
}

type fakeRun struct {
	f     *fakeHarness
	sc    string
	runID string

	mu    sync.Mutex
	spans []trace.Span
	index int
}

func (r *fakeRun) Env(env *Env) {
	r.index = env.Index
	env.BaseURL = "http://fake.invalid/v1"
	env.Tools = r
}

// RunTool records an executed tool span and runs fn.
func (r *fakeRun) RunTool(ctx context.Context, name, callID string, args json.RawMessage, fn ToolFunc) (json.RawMessage, error) {
	approval := r.f.approval[name]
	if approval == "" {
		approval = trace.ApprovalNotRequired
	}
	r.mu.Lock()
	r.spans = append(r.spans, toolSpan(name, trace.ToolExecuted, approval, len(r.spans)))
	r.mu.Unlock()
	return fn(ctx, r.runID+"/"+callID)
}

func (r *fakeRun) Finish(ctx context.Context, exitCode int, agentErr error) (store.Run, []trace.Span, error) {
	c := canned{}
	if r.f.script != nil {
		c = r.f.script(r.sc, r.index)
	}
	rec := store.Run{ID: r.runID, Status: store.RunSucceeded, Turns: c.turns, StopReason: c.stopReason}
	if exitCode != 0 || agentErr != nil {
		rec.Status = store.RunFailed
	}
	if c.status != "" {
		rec.Status = c.status
	}
	if c.cost != "" {
		v, err := parseUSD(c.cost)
		if err != nil {
			return store.Run{}, nil, err
		}
		rec.Cost = v
	}
	r.mu.Lock()
	spans := append(append([]trace.Span(nil), r.spans...), c.spans...)
	r.mu.Unlock()
	r.f.mu.Lock()
	r.f.finished = append(r.f.finished, agentErr)
	r.f.mu.Unlock()
	return rec, spans, nil
}

// toolSpan is a tool span as belay records it; seq orders spans in time.
func toolSpan(name, outcome, approval string, seq int) trace.Span {
	s := trace.Span{TraceID: "t", SpanID: fmt.Sprintf("tool-%s-%d", name, seq), ParentID: "run", Kind: trace.KindTool,
		Name: "execute_tool " + name, Status: trace.StatusOK,
		Attrs: map[string]any{trace.AttrToolName: name, trace.AttrToolOutcome: outcome}}
	s.Start = time.Unix(1_000_000, 0).Add(time.Duration(seq) * time.Millisecond)
	s.End = s.Start
	if approval != "" {
		s.Attrs[trace.AttrApprovalState] = approval
	}
	return s
}

// agentFunc is an in-process Agent from a function.
type agentFunc func(ctx context.Context, env Env) (int, string, error)

func (f agentFunc) Run(ctx context.Context, env Env) (int, string, error) { return f(ctx, env) }

// checkingAgent is an agentFunc that is also a Checker.
type checkingAgent struct {
	agentFunc
	check func(env Env, check string) error
}

func (c checkingAgent) Check(ctx context.Context, env Env, check string) error {
	return c.check(env, check)
}

var agentSeq atomic.Int64

// register registers a under a name unique to this test (the registry is
// global) and returns the name.
func register(t *testing.T, a Agent) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), agentSeq.Add(1))
	RegisterAgent(name, a)
	return name
}

// suiteFor loads a suite text whose agent line is "agent: AGENT".
func suiteFor(t *testing.T, text, agent string) *Suite {
	t.Helper()
	s, err := LoadSuite(writeSuite(t, strings.ReplaceAll(text, "AGENT", agent)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// outcomesOf returns a report's outcomes of one scenario, by index.
func outcomesOf(r *Report, scenario string) []Outcome {
	var os []Outcome
	for _, o := range r.Outcomes {
		if o.Scenario == scenario {
			os = append(os, o)
		}
	}
	return os
}

var errBoom = errors.New("boom")
