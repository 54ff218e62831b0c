package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/belay-run/belay/store"

	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
)

// routes builds the gateway's mux.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+openai.Path, s.serveModel(openAIFront{}))
	mux.Handle("POST "+anthropic.Path, s.serveModel(anthropicFront{}))
	mux.Handle("POST "+openai.ResponsesPath, s.serveModel(responsesFront{}))
	mux.HandleFunc("POST "+CountTokensPath, s.countTokens)
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.getModel)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.ready)
	mux.HandleFunc("GET "+RunsAPIPath+"{id}", s.getRun)
	mux.HandleFunc("POST "+RunsAPIPath+"{id}/end", s.endRun)
	mux.Handle("GET /metrics", s.metrics.handler())
	s.adminRoutes(mux)
	return inDialect(mux)
}

// inDialect serves mux, but answers what mux cannot route — an unknown path
// (404) or a method the path does not take (405, with Allow) — as a JSON
// error in the caller's dialect: Anthropic's when the path is under
// /v1/messages or the request carries anthropic-version, OpenAI's
// otherwise.
func inDialect(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// mux's own answer: not found, method not allowed, or a redirect
		// to the canonical path. Keep its status and headers (Allow,
		// Location); replace a 404 or 405 body.
		rec := &capture{header: w.Header()}
		h.ServeHTTP(rec, r)
		status := rec.status
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			w.WriteHeader(status)
			_, _ = w.Write(rec.body)
			return
		}
		w.Header().Set(HeaderShouldRetry, "false") // the same request gets the same answer
		noRoute := fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)
		msg := noRoute
		anthropicClient := r.Header.Get("Anthropic-Version") != ""
		switch p := r.URL.Path; {
		case p == "/messages" || p == "/models" && anthropicClient:
			msg += fmt.Sprintf(" (did you mean /v1%s? an Anthropic client's base URL is http://HOST:PORT, without /v1: the client adds /v1%s itself)", p, p)
		case p == "/chat/completions" || p == "/responses" || p == "/models":
			// The client's base URL lacks /v1, a common slip.
			msg += fmt.Sprintf(" (did you mean /v1%s? an OpenAI client's base URL is http://HOST:PORT/v1)", p)
		case strings.HasPrefix(p, "/v1/v1/"):
			// The other slip: /v1 in an Anthropic client's base URL
			// (its SDK adds /v1 to the paths), or twice in another's.
			msg += fmt.Sprintf(" (did you mean %s? the client added /v1 to a base URL that ends in /v1: an Anthropic client's base URL is http://HOST:PORT, an OpenAI client's http://HOST:PORT/v1)", strings.TrimPrefix(p, "/v1"))
		}
		if rest, ok := strings.CutPrefix(r.URL.Path, "/belay/runs"); ok {
			// An Anthropic client's base URL has no /v1.
			msg += fmt.Sprintf(" (did you mean /v1/belay/runs%s? the run API is under /v1 for every client)", rest)
		} else if rest, ok := strings.CutPrefix(r.URL.Path, "/v1/runs"); ok {
			msg += fmt.Sprintf(" (did you mean /v1/belay/runs%s?)", rest)
		} else if msg == noRoute && !strings.HasPrefix(r.URL.Path, openai.ResponsesPath+"/") &&
			r.URL.Path != "/admin" && !strings.HasPrefix(r.URL.Path, "/admin/") {
			msg += " (belay serves " + servedRoutes + ")"
		}
		if strings.HasPrefix(r.URL.Path, openai.ResponsesPath+"/") {
			// GET /v1/responses/{id}, its input_items, cancel, DELETE
			// (the provider's store, which one of the model's deployments
			// holds), input_tokens, compact.
			msg += " (belay serves POST /v1/responses, not the Responses API's other endpoints: a stored response (GET, DELETE, " +
				"cancel, input_items) is in the account of the deployment that made it, so ask that provider for it; input token " +
				"counts and compaction are not relayed)"
		}
		if status == http.StatusMethodNotAllowed {
			msg = fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, w.Header().Get("Allow"))
		}
		if r.URL.Path == "/admin" || strings.HasPrefix(r.URL.Path, "/admin/") {
			writeJSON(w, status, map[string]string{"error": msg}) // the admin API's shape
			return
		}
		if strings.HasPrefix(r.URL.Path, anthropic.Path) || strings.HasSuffix(r.URL.Path, "/messages") || r.Header.Get("Anthropic-Version") != "" {
			typ := "not_found_error"
			if status == http.StatusMethodNotAllowed {
				typ = "invalid_request_error"
			}
			anthropic.WriteError(w, status, typ, msg)
			return
		}
		code := "unknown_url"
		if status == http.StatusMethodNotAllowed {
			code = "method_not_allowed"
		}
		openai.WriteError(w, status, "invalid_request_error", code, msg)
	})
}

// servedRoutes lists the client endpoints, for the answer to a path belay
// does not serve.
const servedRoutes = "POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, POST /v1/messages/count_tokens, " +
	"GET /v1/models, GET /v1/belay/runs/{id}, POST /v1/belay/runs/{id}/end, /healthz, /readyz, /metrics and the admin API under /admin/"

// capture records a small response written by one of mux's own handlers;
// headers go straight to the real writer's header map.
type capture struct {
	header http.Header
	status int
	body   []byte
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body = append(c.body, b...)
	return len(b), nil
}

// readyProbe is the kill flag /readyz clears to prove the store takes
// writes: a run id no client can send (X-Belay-Run-Id does not allow "/").
const readyProbe = "belay/readyz-probe"

// ready answers /readyz: 200 when, within 2s, the store answers a read
// (ListKills) and commits a write transaction (ClearKill of a flag that
// does not exist: a no-op DELETE, which still takes the write lock, so a
// locked or read-only SQLite file or a dead PostgreSQL connection is not
// ready); 503 otherwise, with the store's error in the log, not the body.
// The answer comes within the 2s even when the store does not heed its
// context (SQLite's busy handler waits out its own timeout on a file that
// another process locked): probes run in the background, one at a time,
// and a request that finds one running waits for its result.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.store != nil {
		timer := time.NewTimer(readyWithin)
		defer timer.Stop()
		pr := s.probe.start(s)
		var err error
		select {
		case <-pr.done:
			err = pr.err
		case <-timer.C:
			err = fmt.Errorf("the store did not answer within %v", readyWithin)
		case <-r.Context().Done():
			return
		}
		if err != nil {
			s.log.LogAttrs(r.Context(), slog.LevelWarn, "readyz: store unavailable", slogErr(err))
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable",
				"error": "the store does not answer reads and writes"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// readyWithin bounds /readyz's answer.
const readyWithin = 2 * time.Second

// readiness runs /readyz's store probes, one at a time. The zero value is
// ready for use.
type readiness struct {
	mu  sync.Mutex
	cur *probeRun // in flight or the last one; nil before the first
}

// probeRun is one store probe; err is set before done is closed.
type probeRun struct {
	done chan struct{}
	err  error
}

// start returns a probe that began no earlier than now: the one in
// flight, or a new one.
func (p *readiness) start(s *Server) *probeRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		select {
		case <-p.cur.done:
		default:
			return p.cur // in flight: its answer is fresh enough
		}
	}
	pr := &probeRun{done: make(chan struct{})}
	p.cur = pr
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
		defer cancel()
		_, err := s.store.ListKills(ctx)
		if err == nil {
			err = s.store.ClearKill(ctx, store.KillRun, readyProbe)
		}
		pr.err = err
		close(pr.done)
	}()
	return pr
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
