package sim

import (
	"encoding/json"
	"maps"
	"net/http"
	"time"
)

// Stats counts what the simulator did. Faults is keyed by Fault name;
// Deployments by deployment name ("" for requests without a prefix).
type Stats struct {
	Requests    int64                      `json:"requests"`
	Faults      map[string]int64           `json:"faults"`
	Deployments map[string]DeploymentStats `json:"deployments"`
}

// DeploymentStats counts one deployment's requests and injected faults.
type DeploymentStats struct {
	Requests int64            `json:"requests"`
	Faults   map[string]int64 `json:"faults"`
}

func newStats() Stats {
	return Stats{Faults: map[string]int64{}, Deployments: map[string]DeploymentStats{}}
}

func (s *Server) record(dep string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	d := s.stats.Deployments[dep]
	if d.Faults == nil {
		d.Faults = map[string]int64{}
	}
	d.Requests++
	if f != NoFault {
		s.stats.Faults[string(f)]++
		d.Faults[string(f)]++
	}
	s.stats.Deployments[dep] = d
}

// Stats returns a copy of the counters: model requests served (after the
// body was read and validated) and faults injected, in total and per
// deployment.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Stats{Requests: s.stats.Requests, Faults: maps.Clone(s.stats.Faults), Deployments: map[string]DeploymentStats{}}
	for k, d := range s.stats.Deployments {
		out.Deployments[k] = DeploymentStats{Requests: d.Requests, Faults: maps.Clone(d.Faults)}
	}
	return out
}

func (s *Server) serveStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	created := s.cfg.Now().Unix()
	if r.Header.Get("Anthropic-Version") != "" {
		type model struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			DisplayName string `json:"display_name"`
			CreatedAt   string `json:"created_at"`
		}
		var data []model
		for _, m := range s.cfg.Models {
			data = append(data, model{"model", m, m, time.Unix(created, 0).UTC().Format(time.RFC3339)})
		}
		first, last := "", ""
		if len(data) > 0 {
			first, last = data[0].ID, data[len(data)-1].ID
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	var data []model
	for _, m := range s.cfg.Models {
		data = append(data, model{m, "model", created, "belay-sim"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	msg := "Unknown request URL: " + r.Method + " " + r.URL.Path + "."
	if r.Header.Get("Anthropic-Version") != "" {
		anthropicWire{}.writeError(w, http.StatusNotFound, "not_found_error", "", msg)
		return
	}
	openaiWire{}.writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", msg)
}
