package gateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
)

// routes builds the gateway's mux.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+openai.Path, s.serveModel(openAIFront{}))
	mux.Handle("POST "+anthropic.Path, s.serveModel(anthropicFront{}))
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.ready)
	mux.Handle("GET /metrics", s.metrics.handler())
	s.adminRoutes(mux)
	return mux
}

// listModels answers GET /v1/models with the configured aliases, in the
// OpenAI list shape, which also carries the Anthropic fields (id, type,
// display_name, created_at) so both SDKs can read it.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID          string   `json:"id"`
		Object      string   `json:"object"`
		Created     int64    `json:"created"`
		OwnedBy     string   `json:"owned_by"`
		Type        string   `json:"type"`
		DisplayName string   `json:"display_name"`
		CreatedAt   string   `json:"created_at"`
		Dialects    []string `json:"belay_dialects"`
	}
	out := struct {
		Object  string  `json:"object"`
		Data    []model `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}{Object: "list", Data: []model{}}
	epoch := time.Unix(0, 0).UTC()
	for _, m := range s.models {
		out.Data = append(out.Data, model{ID: m.alias, Object: "model", OwnedBy: "belay", Type: "model",
			DisplayName: m.alias, CreatedAt: epoch.Format(time.RFC3339), Dialects: m.dialects})
	}
	if n := len(out.Data); n > 0 {
		out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// ready answers /readyz: 200 when the store answers a query within 2s,
// 503 otherwise.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.store != nil {
		ctx, cancel := contextWithTimeout(r, 2*time.Second)
		defer cancel()
		if _, err := s.store.ListKills(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
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
