package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/store"
)

// adminRoutes registers the admin API, every route behind the admin key
// (Authorization: Bearer ADMIN_KEY):
//
//	GET    /admin/runs?tenant=&status=&limit=   runs, newest first
//	GET    /admin/runs/{id}                     {"run": ..., "spans": [...]}
//	GET    /admin/kills                         kill flags
//	POST   /admin/kill      {"target","name","reason","force"}  set a kill flag
//	DELETE /admin/kill?target=&name=            clear it (any name; 404 when it is not set)
//	POST   /admin/tools/{name}/disable          kill flag on a tool
//	POST   /admin/tools/{name}/enable           clear it
//	GET    /admin/approvals?state=pending       approvals, oldest first
//	POST   /admin/approvals/{id}/approve        {"by","note"}
//	POST   /admin/approvals/{id}/deny           {"by","note"}
//	GET    /admin/breakers                      breaker state per deployment
//
// A kill of a model, deployment or tenant must name one the config serves
// (a model alias or provider model name; a deployment name; a tenant's
// name, or "default" without tenants): another name is 404, listing the
// names served, unless the body has "force": true.
//
// Errors are {"error": "..."} with 400 (bad input), 401 (bad key), 403
// (no admin key configured), 404, 409 (already decided) or 503 (no store).
func (s *Server) adminRoutes(mux *http.ServeMux) {
	h := func(pattern string, f func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(pattern, s.admin(f))
	}
	h("GET /admin/runs", s.adminRuns)
	h("GET /admin/runs/{id}", s.adminRun)
	h("GET /admin/kills", s.adminKills)
	h("POST /admin/kill", s.adminKill)
	h("DELETE /admin/kill", s.adminUnkill)
	h("POST /admin/tools/{name}/disable", s.adminTool(true))
	h("POST /admin/tools/{name}/enable", s.adminTool(false))
	h("GET /admin/approvals", s.adminApprovals)
	h("POST /admin/approvals/{id}/approve", s.adminDecide(store.ApprovalApproved))
	h("POST /admin/approvals/{id}/deny", s.adminDecide(store.ApprovalDenied))
	h("GET /admin/budgets", func(w http.ResponseWriter, r *http.Request) error {
		s.flushBefore(r.Context(), "") // this process's settles first, as for runs
		out, err := Budgets(r.Context(), s.cfg, s.store, time.Now())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"budgets": out})
		return nil
	})
	h("GET /admin/breakers", func(w http.ResponseWriter, r *http.Request) error {
		out := map[string]string{}
		for name, st := range s.router.Breakers() {
			out[name] = st.String()
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// adminError is an admin API failure with its status.
type adminError struct {
	status int
	msg    string
}

func (e *adminError) Error() string { return e.msg }

func badRequest(msg string) error { return &adminError{http.StatusBadRequest, msg} }

func (s *Server) admin(f func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	want := sha256.Sum256([]byte(s.cfg.AdminKey.Value))
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.AdminKey.IsSet() {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "the admin API is disabled: set admin_key in the config"})
			return
		}
		key := requestKey(r)
		got := sha256.Sum256([]byte(key))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			msg := "invalid admin key"
			switch {
			case key == "" && (r.Header.Get("Authorization") != "" || r.Header.Get("Api-Key") != ""):
				msg = "admin key in an unsupported form: send the config's admin_key as Authorization: Bearer KEY or x-api-key: KEY"
			case key == "":
				msg = "missing admin key: send the config's admin_key as Authorization: Bearer KEY or x-api-key: KEY"
			}
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": msg})
			return
		}
		if s.store == nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no store"})
			return
		}
		if err := f(w, r); err != nil {
			var ae *adminError
			status := 0
			switch {
			case errors.As(err, &ae):
				status = ae.status
			case errors.Is(err, store.ErrNotFound):
				status = http.StatusNotFound
			case errors.Is(err, store.ErrConflict):
				status = http.StatusConflict
			}
			if status == 0 { // the store failed: transient, details in the log only
				s.log.LogAttrs(r.Context(), slog.LevelWarn, "admin: store unavailable", slogString("path", r.URL.Path), slogErr(err))
				w.Header().Set("Retry-After", "1")
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "belay's store is unavailable; retry shortly"})
				return
			}
			msg := err.Error()
			if status == http.StatusNotFound && ae == nil {
				msg = notFound(r, !s.tenants.open) // not the store's wording
			}
			writeJSON(w, status, map[string]string{"error": msg})
		}
	}
}

// notFound names what an admin request asked for that the store does not
// hold: `run "ID" not found`, `approval "ID" not found`; with tenants
// configured, a run id without RunKeySep also gets NoRunError's hint.
func notFound(r *http.Request, tenants bool) string {
	id := r.PathValue("id")
	if id == "" {
		return "not found"
	}
	if strings.HasPrefix(r.URL.Path, "/admin/approvals/") {
		return fmt.Sprintf("approval %q not found", id)
	}
	msg := fmt.Sprintf("run %q not found", id)
	if tenants {
		msg += (&NoRunError{ID: id}).Hint()
	}
	return msg
}

func (s *Server) adminRuns(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "tenant", "agent", "status", "since", "limit":
		default:
			// Not ignored: a filter misspelt would list every run
			// (newcomer finding: since= was ignored).
			return badRequest(fmt.Sprintf("unknown parameter %q: want tenant, agent, status, since or limit", k))
		}
	}
	f := store.RunFilter{Tenant: q.Get("tenant"), Agent: q.Get("agent"), Status: store.RunStatus(q.Get("status"))}
	if v := q.Get("since"); v != "" {
		age, err := config.ParseAge(v)
		if err != nil || age <= 0 {
			return badRequest("since: want a time > 0: a duration (90m, 2h) or a whole number of days (7d)")
		}
		f.Since = time.Now().Add(-age)
	}
	switch f.Status {
	case "", store.RunRunning, store.RunSucceeded, store.RunFailed, store.RunStopped:
	default:
		return badRequest("status: want running, succeeded, failed or stopped")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return badRequest("limit: want a positive integer")
		}
		f.Limit = n
	}
	s.flushBefore(r.Context(), "")
	runs, err := s.store.ListRuns(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": nonNil(runs)})
	return nil
}

func (s *Server) adminRun(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	s.flushBefore(r.Context(), id)
	run, err := s.store.GetRun(r.Context(), id)
	if err != nil {
		return err
	}
	spans, err := s.store.RunSpans(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"run": run, "spans": nonNil(spans)})
	return nil
}

// adminFlushWait bounds the admin API's wait for background writes (see
// Deps.Flush): a store that is failing must not hold an admin read.
const adminFlushWait = 2 * time.Second

// flushBefore waits, up to adminFlushWait, for the background writes of
// run id (all runs when id is ""), when the server has a Deps.Flush.
func (s *Server) flushBefore(ctx context.Context, id string) {
	if s.flush == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, adminFlushWait)
	defer cancel()
	if err := s.flush(ctx, id); err != nil && ctx.Err() == nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "admin: flushing runs before a read failed", slogString("run", id), slogErr(err))
	}
}

func (s *Server) adminKills(w http.ResponseWriter, r *http.Request) error {
	kills, err := s.store.ListKills(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"kills": nonNil(kills)})
	return nil
}

var killTargets = map[store.KillTarget]bool{store.KillAll: true, store.KillRun: true, store.KillTenant: true,
	store.KillTool: true, store.KillModel: true, store.KillDeployment: true}

// adminKill sets a kill flag. A model, deployment or tenant flag must name
// one this gateway's config serves (KillNames), else 404 listing them, unless
// the body says "force": true: the flag is shared through the store, and a
// gateway with another config, or a Go agent, may serve the name.
func (s *Server) adminKill(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		store.Kill
		Force bool `json:"force"`
	}
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	k := in.Kill
	if err := checkKill(k.Target, k.Name); err != nil {
		return err
	}
	if err := CheckKill(s.cfg, k.Target, k.Name); err != nil && !in.Force {
		return &adminError{http.StatusNotFound, err.Error() + `; send "force": true to set the flag anyway (a gateway with another config, or a Go agent, sharing the store may serve it)`}
	}
	if k.Target == store.KillRun && !in.Force && s.store != nil {
		// As belay kill run: a run id neither held here nor stored is most
		// likely mistyped. A run this gateway named is held from its
		// start, stored only when its call ends.
		h, ok := s.runs.(interface{ Holds(string) bool })
		if !ok || !h.Holds(k.Name) {
			var nr *NoRunError
			if err := CheckKillRun(r.Context(), s.store, k.Name); errors.As(err, &nr) {
				return &adminError{http.StatusNotFound, err.Error() + " nor held by this gateway" + nr.Hint() + `; send "force": true to set the flag anyway (a flag may be set before its run starts)`}
			} else if err != nil {
				return err
			}
		}
	}
	k.At, k.By = time.Now().UTC(), "admin"
	if err := s.setKill(r.Context(), k); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}

func (s *Server) adminUnkill(w http.ResponseWriter, r *http.Request) error {
	t, name := store.KillTarget(r.URL.Query().Get("target")), r.URL.Query().Get("name")
	if err := checkKill(t, name); err != nil {
		return err
	}
	// A flag that is not set is 404, naming those that are, as belay
	// unkill refuses it: a misspelt name must not pass for a cleared
	// flag (an adversarial review).
	set, err := s.store.ListKills(r.Context())
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(set, func(k store.Kill) bool { return k.Target == t && k.Name == name }) {
		names := make([]string, len(set))
		for i, k := range set {
			names[i] = string(k.Target) + ":" + k.Name
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no kill flag " + string(t) + ":" + name + " is set", "set": names})
		return nil
	}
	if err := s.clearKill(r.Context(), t, name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"cleared": string(t) + ":" + name})
	return nil
}

func checkKill(t store.KillTarget, name string) error {
	switch {
	case !killTargets[t]:
		return badRequest("target: want all, run, tenant, tool, model or deployment")
	case t != store.KillAll && name == "":
		return badRequest("name: required for target " + string(t))
	case t == store.KillAll && name != "":
		return badRequest("name: must be empty for target all (it names everything)")
	}
	return nil
}

func (s *Server) adminTool(disable bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		name := r.PathValue("name")
		var err error
		if disable {
			err = s.setKill(r.Context(), store.Kill{Target: store.KillTool, Name: name, Reason: "disabled by admin", By: "admin", At: time.Now().UTC()})
		} else {
			err = s.clearKill(r.Context(), store.KillTool, name)
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"tool": name, "disabled": disable})
		return nil
	}
}

func (s *Server) adminApprovals(w http.ResponseWriter, r *http.Request) error {
	st := store.ApprovalState(r.URL.Query().Get("state"))
	switch st {
	case "", store.ApprovalPending, store.ApprovalApproved, store.ApprovalDenied, store.ApprovalExpired:
	default:
		return badRequest("state: want pending, approved, denied or expired")
	}
	list, err := s.store.ListApprovals(r.Context(), st)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": nonNil(list)})
	return nil
}

func (s *Server) adminDecide(state store.ApprovalState) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		var in struct {
			By   string `json:"by"`
			Note string `json:"note"`
		}
		if err := decodeJSON(r, &in); err != nil {
			return err
		}
		if in.By == "" {
			in.By = "admin"
		}
		id := r.PathValue("id")
		a, err := s.store.DecideApproval(r.Context(), id, state, in.By, in.Note, time.Now().UTC())
		if errors.Is(err, store.ErrConflict) { // decided before: say how, not in the store's words
			msg := fmt.Sprintf("approval %s is already %s", id, a.State)
			if a.DecidedBy != "" {
				msg += " by " + a.DecidedBy
			}
			return &adminError{status: http.StatusConflict, msg: msg}
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, a)
		return nil
	}
}

// decodeJSON reads a small JSON body strictly; an empty body is {}. A
// value of the wrong type is named by its key, in JSON's words ("body:
// force: found a string; want true or false"), not by Go's types.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// One JSON value and nothing after it: trailing text is a mistake,
		// not something to ignore.
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			return badRequest("body: unexpected data after the JSON object")
		}
		return nil
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		key := te.Field[strings.LastIndex(te.Field, ".")+1:] // "Kill.target": target
		return badRequest(fmt.Sprintf("body: %s: found %s; want %s", key, jsonFound(te.Value), jsonWant(te.Type)))
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return badRequest(fmt.Sprintf("request body is not valid JSON (at byte %d: %s)", se.Offset, se.Error()))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return badRequest("request body is not valid JSON (cut short: it ends inside a value)")
	}
	return badRequest("body: " + strings.TrimPrefix(err.Error(), "json: "))
}

// jsonWant names the JSON value that decodes into t.
func jsonWant(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// jsonFound names the JSON value encoding/json reports ("string",
// "number", "bool", "array", "object").
func jsonFound(value string) string {
	switch value {
	case "array", "object":
		return "an " + value
	case "bool":
		return "a boolean"
	}
	return "a " + value
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}

// setKill sets a kill flag through the run layer when it applies flags
// itself (Killer), else in the store.
func (s *Server) setKill(ctx context.Context, k store.Kill) error {
	if kl, ok := s.runs.(Killer); ok {
		return kl.SetKill(ctx, k)
	}
	return s.store.SetKill(ctx, k)
}

func (s *Server) clearKill(ctx context.Context, t store.KillTarget, name string) error {
	if kl, ok := s.runs.(Killer); ok {
		return kl.Unkill(ctx, t, name)
	}
	return s.store.ClearKill(ctx, t, name)
}
