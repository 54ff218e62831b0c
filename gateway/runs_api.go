package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/store"
)

// The run API for clients, under the tenant's virtual key (as the model
// endpoints), so that an agent that names its runs (X-Belay-Run-Id) can
// read and end them without the admin key. The paths are under /v1, so an
// OpenAI client reaches them with its own base URL and a custom request
// (openai-go's Client.Post, npm openai's client.post("/belay/runs/ID/end")):
//
//	GET  /v1/belay/runs/{id}       the run's record
//	POST /v1/belay/runs/{id}/end   end it: {"status": "succeeded"|"failed", "error": "..."}, both optional
//
// RunsAPIPath is the prefix of both; {id} is the client's run id.
const RunsAPIPath = "/v1/belay/runs/"

// runEnder is implemented by a Turns that can end a run at its client's
// request (run.Manager.End).
type runEnder interface {
	EndRun(ctx context.Context, id, tenant string, status store.RunStatus, msg string) (store.Run, error)
	// HeldRun returns the record of run id of tenant as this process
	// holds it, when it does (run.Manager.Held).
	HeldRun(id, tenant string) (store.Run, bool)
}

// EndRun ends run id of tenant (see run.Manager.End).
func (t *runTurns) EndRun(ctx context.Context, id, tenant string, status store.RunStatus, msg string) (store.Run, error) {
	return t.m.End(ctx, id, tenant, status, msg)
}

// HeldRun returns the held record of run id (see run.Manager.Held).
func (t *runTurns) HeldRun(id, tenant string) (store.Run, bool) { return t.m.Held(id, tenant) }

// runAnswer is the answer of the run API: the client's run id, the run's
// record as the store and the admin API hold it (its id the stored one,
// TENANT~ID with tenants; cost in 10⁻¹² USD), and the cost in dollars as a
// decimal string (the form of x-belay-cost-usd).
type runAnswer struct {
	Object  string    `json:"object"` // "belay.run"
	ID      string    `json:"id"`
	Status  string    `json:"status"`
	CostUSD string    `json:"cost_usd"`
	Run     store.Run `json:"run"`
	// Note, on an end answer, says that the run had ended before this
	// request, which then changed nothing (its first ending is kept).
	Note string `json:"note,omitempty"`
}

// maxEndBody bounds the body of an end request.
const maxEndBody = 64 << 10

// endRequest is the body of POST /v1/belay/runs/{id}/end.
type endRequest struct {
	Status store.RunStatus `json:"status"`
	Error  string          `json:"error"`
}

// runOf identifies the caller and returns its tenant's name and the run's
// client and stored ids, or writes the refusal and returns ok false. Errors
// of the run API are in the caller's dialect (modelsFront: Anthropic's when
// the request carries anthropic-version).
func (s *Server) runOf(w http.ResponseWriter, r *http.Request) (tenant, id, key string, ok bool) {
	f := modelsFront(r)
	t, fe := s.tenants.identify(r)
	if fe != nil {
		refuseModels(w, f, fe)
		return "", "", "", false
	}
	id = r.PathValue("id")
	if !s.tenants.open {
		// The stored id of the caller's own run (Stack.StartRun's
		// run.ID(), belay runs' ID column) names it too (newcomer
		// finding: it was refused as not an id).
		id = strings.TrimPrefix(id, t.Name+RunKeySep)
	}
	if !validRunID(id) {
		refuseModels(w, f, refusal(failure.InvalidRequest, fmt.Sprintf("run id %q: want 1-128 characters of letters, digits and . _ : -, not only dots (the id sent as %s)", id, HeaderRunID)))
		return "", "", "", false
	}
	return t.Name, id, s.tenants.runKey(t.Name, id), true
}

// runNotFound writes 404 in the request's dialect for a run the tenant
// does not have.
func runNotFound(w http.ResponseWriter, r *http.Request, id string) {
	f := modelsFront(r)
	w.Header().Set(HeaderShouldRetry, "false")
	setRequestID(w.Header(), f.dialect())
	msg := fmt.Sprintf("run %q not found: no run of this key has that id (a call without %s is a run of its own, whose id is in its answer's %s; a call refused before it counted, for its key or body, leaves no run)", id, HeaderRunID, HeaderRunID)
	if f.dialect() == failure.DialectAnthropic {
		anthropic.WriteError(w, http.StatusNotFound, "not_found_error", msg)
		return
	}
	openai.WriteError(w, http.StatusNotFound, "invalid_request_error", "run_not_found", msg)
}

// storeFailed writes a retryable 503 for a store that could not answer,
// as a model call's store failure is written (call.unavailable).
func (s *Server) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.log.LogAttrs(r.Context(), slog.LevelWarn, "run API: store unavailable", slogString("path", r.URL.Path), slogErr(err))
	c := s.newCall(modelsFront(r), w, r)
	c.setRequestID()
	c.unavailable(errStoreUnavailable(err), storeUnavailableType, "belay's store is unavailable; retry shortly", storeRetryAfterMS)
}

func (s *Server) answerRun(w http.ResponseWriter, id string, rec store.Run) {
	s.answerRunNote(w, id, rec, "")
}

func (s *Server) answerRunNote(w http.ResponseWriter, id string, rec store.Run, note string) {
	writeJSON(w, http.StatusOK, runAnswer{Object: "belay.run", ID: id, Status: string(rec.Status), CostUSD: rec.Cost.Decimal(), Run: rec, Note: note})
}

// getRun serves GET /v1/belay/runs/{id}: the run's record as the store
// holds it, after this process's pending writes for it.
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	tenant, id, key, ok := s.runOf(w, r)
	if !ok {
		return
	}
	if s.store == nil {
		s.storeFailed(w, r, errors.New("no store"))
		return
	}
	s.flushBefore(r.Context(), key)
	rec, err := s.store.GetRun(r.Context(), key)
	if e, ok := s.runs.(runEnder); ok && (err == nil || errors.Is(err, store.ErrNotFound)) {
		// This process's record when the store is behind it: a run the
		// gateway named is stored once its call has ended, and an ending
		// whose write failed is being retried in the background.
		held, ok := e.HeldRun(key, tenant)
		if ok && (err != nil || rec.Status == store.RunRunning && held.Status != store.RunRunning) {
			rec, err = held, nil
		}
	}
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && rec.Tenant != tenant:
		runNotFound(w, r, id)
	case err != nil:
		s.storeFailed(w, r, err)
	default:
		s.answerRun(w, id, rec)
	}
}

// endRun serves POST /v1/belay/runs/{id}/end (see runEnder). An empty
// body ends the run by its last call's outcome; an error without a status
// ends it failed.
func (s *Server) endRun(w http.ResponseWriter, r *http.Request) {
	asked := time.Now()
	tenant, id, key, ok := s.runOf(w, r)
	if !ok {
		return
	}
	f := modelsFront(r)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEndBody))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		refuseModels(w, f, refusal(failure.RequestTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxEndBody)))
		return
	}
	if err != nil {
		refuseModels(w, f, refusal(failure.InvalidRequest, "reading the request body failed"))
		return
	}
	var req endRequest
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || dec.More() {
			refuseModels(w, f, refusal(failure.InvalidRequest, fmt.Sprintf(`body: want a JSON object {"status": "succeeded" or "failed", "error": "why it failed"}, both optional (%v)`, cmpErr(err, "more than one value"))))
			return
		}
	}
	switch req.Status {
	case "", store.RunSucceeded, store.RunFailed:
	default:
		refuseModels(w, f, refusal(failure.InvalidRequest, fmt.Sprintf(`status: %q is not "succeeded" or "failed" (omit it to end the run by its last call's outcome)`, req.Status)))
		return
	}
	if req.Status == store.RunSucceeded && req.Error != "" {
		refuseModels(w, f, refusal(failure.InvalidRequest, `error: a run that succeeded has no error (send "status": "failed" with it)`))
		return
	}
	e, ok := s.runs.(runEnder)
	if !ok {
		runNotFound(w, r, id)
		return
	}
	rec, err := e.EndRun(r.Context(), key, tenant, req.Status, req.Error)
	switch {
	case errors.Is(err, store.ErrNotFound):
		runNotFound(w, r, id)
	case err != nil && rec.ID == "":
		s.storeFailed(w, r, err)
	default:
		// Ended; a write still pending (ctx ended first) finishes in the
		// background, and the record returned is the process's own.
		note := ""
		if !rec.Ended.IsZero() && rec.Ended.Before(asked) {
			// Newcomer finding: a second end asking another status got
			// 200 with the first one, and nothing said why.
			how := string(rec.Status)
			if rec.StopReason != "" {
				how += ", " + rec.StopReason
			}
			note = fmt.Sprintf("the run had already ended (%s) at %s: its first ending is kept", how, rec.Ended.UTC().Format(time.RFC3339))
		}
		s.answerRunNote(w, id, rec, note)
	}
}

// cmpErr returns err's text, or alt when err is nil.
func cmpErr(err error, alt string) string {
	if err == nil {
		return alt
	}
	return err.Error()
}
