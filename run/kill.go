package run

import (
	"context"
	"fmt"

	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
)

// killSet is an immutable snapshot of the kill flags.
type killSet map[store.KillTarget]map[string]store.Kill

func newKillSet(ks []store.Kill) killSet {
	s := killSet{}
	for _, k := range ks {
		s.add(k)
	}
	return s
}

func (s killSet) add(k store.Kill) {
	if k.Target == store.KillAll {
		k.Name = ""
	}
	m := s[k.Target]
	if m == nil {
		m = map[string]store.Kill{}
		s[k.Target] = m
	}
	m[k.Name] = k
}

func (s killSet) with(k store.Kill) killSet {
	c := killSet{}
	for _, m := range s {
		for _, v := range m {
			c.add(v)
		}
	}
	c.add(k)
	return c
}

func (s killSet) without(t store.KillTarget, name string) killSet {
	c := killSet{}
	for _, m := range s {
		for _, v := range m {
			if v.Target != t || (t != store.KillAll && v.Name != name) {
				c.add(v)
			}
		}
	}
	return c
}

func (s killSet) get(t store.KillTarget, name string) (store.Kill, bool) {
	if t == store.KillAll {
		name = ""
	} else if name == "" {
		return store.Kill{}, false
	}
	k, ok := s[t][name]
	return k, ok
}

// forRun returns the flag that stops a whole run: all, the run, its tenant.
func (s killSet) forRun(runID, tenant string) (store.Kill, bool) {
	if k, ok := s.get(store.KillAll, ""); ok {
		return k, true
	}
	if k, ok := s.get(store.KillRun, runID); ok {
		return k, true
	}
	return s.get(store.KillTenant, tenant)
}

// forStep returns the flag that refuses one step: its model (alias or
// model name), deployment, or tool.
func (s killSet) forStep(st Step) (store.Kill, bool) {
	for _, c := range []struct {
		t    store.KillTarget
		name string
	}{
		{store.KillModel, st.Alias}, {store.KillModel, st.Model},
		{store.KillDeployment, st.Deployment}, {store.KillTool, st.Tool},
	} {
		if k, ok := s.get(c.t, c.name); ok {
			return k, true
		}
	}
	return store.Kill{}, false
}

// killFailure is the error a kill flag raises.
func killFailure(k store.Kill) *failure.Error {
	reason := failure.Killed
	if k.Target == store.KillTool {
		reason = failure.ToolDisabled
	}
	msg := fmt.Sprintf("killed by the kill switch (%s)", k.Target)
	switch {
	case k.Target == store.KillTool:
		msg = fmt.Sprintf("tool %s is disabled by the kill switch", k.Name)
	case k.Name != "":
		msg = fmt.Sprintf("killed by the kill switch (%s %s)", k.Target, k.Name)
	}
	if k.Reason != "" {
		msg += ": " + k.Reason
	}
	return &failure.Error{Kind: failure.Fatal, Reason: reason, Message: msg}
}

// Kill sets a kill flag in the store and applies it at once in this
// process: a run, tenant or all flag stops the matching live runs and
// cancels their in-flight steps' contexts before Kill returns; a model,
// deployment or tool flag refuses later steps (in-flight ones finish).
// Other processes see the flag at their next poll or store notification.
// name is ignored for store.KillAll. When the store fails, the flag still
// applies in this process (until the next poll replaces the view) and the
// error is returned.
func (m *Manager) Kill(ctx context.Context, target store.KillTarget, name, reason string) error {
	return m.SetKill(ctx, store.Kill{Target: target, Name: name, Reason: reason})
}

// SetKill is Kill with the whole flag: k.By (default the Manager's Owner)
// and k.At (default now) are stored as given.
func (m *Manager) SetKill(ctx context.Context, k store.Kill) error {
	target, name := k.Target, k.Name
	switch target {
	case store.KillAll, store.KillRun, store.KillTenant, store.KillTool, store.KillModel, store.KillDeployment:
	default:
		return fmt.Errorf("run: kill target %q is unknown; want all, run, tenant, tool, model or deployment", target)
	}
	if target != store.KillAll && name == "" {
		return fmt.Errorf("run: kill %s needs a name", target)
	}
	if k.By == "" {
		k.By = m.owner
	}
	if k.At.IsZero() {
		k.At = m.now()
	}
	if target == store.KillAll {
		k.Name = ""
	}
	serr := m.st.SetKill(ctx, k)
	// Applied here even when the store failed: a kill must not wait on it.
	m.killMu.Lock()
	m.setKills(m.loadKills().with(k))
	m.killGen++
	m.killMu.Unlock()
	m.applyKills(ctx)
	if serr != nil {
		return fmt.Errorf("run: set kill (applied in this process only): %w", serr)
	}
	return nil
}

// Unkill clears a kill flag in the store and in this process. A run that
// a kill stopped stays stopped.
func (m *Manager) Unkill(ctx context.Context, target store.KillTarget, name string) error {
	if err := m.st.ClearKill(ctx, target, name); err != nil {
		return fmt.Errorf("run: clear kill: %w", err)
	}
	m.killMu.Lock()
	m.setKills(m.loadKills().without(target, name))
	m.killGen++
	m.killMu.Unlock()
	return nil
}

// Killed reports the kill flag, if any, that applies to target and name
// in this process's current view (for a router that skips killed
// deployments, for example).
func (m *Manager) Killed(target store.KillTarget, name string) (store.Kill, bool) {
	return m.loadKills().get(target, name)
}

func (m *Manager) loadKills() killSet {
	if s := m.kills.Load(); s != nil {
		return *s
	}
	return killSet{}
}

// refreshKills reads the flags from the store and applies them. A flag
// set or cleared in this process while the store was read is newer than
// what was read: the store is read again, so that a read begun before a
// Kill cannot put back the set without it (Kill, whose applying then
// missed its own flag, returned with the run's steps still going).
func (m *Manager) refreshKills(ctx context.Context) error {
	for {
		m.killMu.Lock()
		gen := m.killGen
		m.killMu.Unlock()
		ks, err := m.st.ListKills(ctx)
		if err != nil {
			return err
		}
		m.killMu.Lock()
		if m.killGen != gen {
			m.killMu.Unlock()
			continue
		}
		m.setKills(newKillSet(ks))
		m.killMu.Unlock()
		break
	}
	m.applyKills(ctx)
	return nil
}

// applyKills stops every live run a run-level flag matches.
func (m *Manager) applyKills(ctx context.Context) {
	ks := m.loadKills()
	if len(ks[store.KillAll])+len(ks[store.KillRun])+len(ks[store.KillTenant]) == 0 {
		return
	}
	type hit struct {
		r *Run
		k store.Kill
	}
	var hits []hit
	for _, r := range m.held() {
		if k, ok := ks.forRun(r.id, r.tenant); ok {
			hits = append(hits, hit{r, k})
		}
	}
	for _, h := range hits {
		h.r.kill(ctx, h.k)
	}
}
