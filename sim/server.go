// Package sim is an LLM API simulator: an http.Handler that answers OpenAI
// Chat Completions, OpenAI Responses and Anthropic Messages requests in the providers' real
// wire formats, with replies chosen by a Script and faults drawn from a
// Profile, deterministically for a seed.
//
// Endpoints (each also under /d/{deployment}/):
//
//	POST /v1/chat/completions   OpenAI, streaming or not (stream_options.include_usage honoured)
//	POST /v1/responses          OpenAI Responses, streaming or not (typed events, sequence_number)
//	POST /v1/messages           Anthropic, streaming or not
//	POST /v1/messages/count_tokens  Anthropic's token count
//	GET  /v1/models             OpenAI list shape; Anthropic shape when anthropic-version is sent
//	GET  /sim/stats             Stats as JSON
//
// Output limits are honoured as a provider honours them: a reply longer
// than max_tokens (OpenAI: max_completion_tokens, else max_tokens;
// Responses: max_output_tokens; Anthropic: max_tokens) at 4 characters a token is cut there — text
// first, then tool names and arguments; calls past the limit are dropped —
// and ends with finish_reason "length" (OpenAI), status "incomplete" with
// reason max_output_tokens (Responses) or stop_reason "max_tokens"
// (Anthropic); the usage reports at most the limit.
//
// Deployments: a path prefix /d/{name} selects the profile Config.Deployments
// gives name (or SetProfile set); failing that, the built-in profile called
// name ("/d/down/v1/messages" is always down); failing that, Config.Profile.
// So one sim can serve a healthy deployment at "/d/a" and a dead one at
// "/d/down" at the same time.
// Every model answer names the profile that served it in the
// X-Sim-Profile response header (a misspelt "/d/flakey" answers with
// Config.Profile, and says so; a name near a built-in profile's also gets
// an X-Sim-Note: `no profile named "flakey" (did you mean "flaky"?): …`).
//
// Per-request controls (headers):
//
//	X-Sim-Fault: <fault>     force that fault (see Fault; "none" forces success)
//	X-Belay-Run-Id: <id>     part of the determinism key, and the scope of a script rule's fault_times
//
// Determinism: every random draw of a request (the fault, latency,
// Retry-After, reply wording, ids) comes from a PCG generator seeded by
// SHA-256 of (Config.Seed, deployment, X-Belay-Run-Id, request body, n),
// where n counts earlier requests with the same (deployment, run id, body).
// A retry of the same body therefore gets a fresh draw, and the outcome of
// each request depends only on the seed and on what was sent before with
// the same key — never on goroutine interleaving across runs or bodies.
package sim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/belay-run/belay/internal/suggest"
)

// Config configures a Server. The zero value serves every request
// correctly with no delay, seed 0 and the default script.
type Config struct {
	// Profile applies to requests without a /d/{name} prefix and to unknown
	// deployment names. The zero Profile has no faults and no latency.
	Profile Profile
	// Seed seeds every random draw (see the package doc).
	Seed uint64
	// Script chooses replies; nil means the default reply.
	Script *Script
	// Deployments maps a deployment name (the /d/{name} prefix) to its profile.
	Deployments map[string]Profile
	// APIKey, when set, is required as "Authorization: Bearer KEY" or
	// "x-api-key: KEY"; a request without it gets the dialect's 401.
	APIKey string
	// Models are listed by GET /v1/models; default gpt-4o, gpt-4o-mini,
	// claude-sonnet-5-5, claude-haiku-4-5. Any model name is accepted.
	Models []string
	// MaxBodyBytes bounds the request body; default 32 MiB (Anthropic's
	// documented limit). Larger bodies get the dialect's 413.
	MaxBodyBytes int64
	// Now gives the "created" timestamps; default time.Now.
	Now func() time.Time
}

// Server is the simulator. It is safe for concurrent use.
type Server struct {
	cfg   Config
	mux   *http.ServeMux
	mu    sync.Mutex // guards the fields below; never held during I/O
	seen  map[[32]byte]uint64
	spent map[spentKey]int
	over  map[string]Profile
	stats Stats
	// runKey maps a run id to the part of it that keys random draws (see
	// SetRunKey); nil means the whole id.
	runKey func(string) string
}

// SetRunKey sets the function that maps a request's X-Belay-Run-Id to the
// key of its random draws, in place of the whole id. An evaluation whose
// run ids carry a per-invocation prefix strips it, so the same suite with
// the same seed draws the same faults and replies every time.
func (s *Server) SetRunKey(f func(runID string) string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runKey = f
}

type spentKey struct {
	rule  int
	runID string
}

// New returns a Server for cfg. It compiles cfg.Script and panics if the
// script is invalid (ParseScript and Script.Compile return the error).
func New(cfg Config) *Server {
	if err := cfg.Script.Compile(); err != nil {
		panic(err)
	}
	if len(cfg.Models) == 0 {
		cfg.Models = []string{"gpt-4o", "gpt-4o-mini", "claude-sonnet-5-5", "claude-haiku-4-5"}
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 32 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		cfg:   cfg,
		seen:  map[[32]byte]uint64{},
		spent: map[spentKey]int{},
		over:  map[string]Profile{},
		stats: newStats(),
	}
	mux := http.NewServeMux()
	for _, prefix := range []string{"", "/d/{deployment}"} {
		mux.HandleFunc("POST "+prefix+"/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
			s.serveModel(w, r, openaiWire{})
		})
		mux.HandleFunc("POST "+prefix+"/v1/messages", func(w http.ResponseWriter, r *http.Request) {
			s.serveModel(w, r, anthropicWire{})
		})
		mux.HandleFunc("POST "+prefix+"/v1/responses", func(w http.ResponseWriter, r *http.Request) {
			s.serveModel(w, r, responsesWire{})
		})
		mux.HandleFunc("POST "+prefix+"/v1/messages/count_tokens", s.countTokens)
		mux.HandleFunc("GET "+prefix+"/v1/models", s.serveModels)
		mux.HandleFunc("GET "+prefix+"/sim/stats", s.serveStats)
	}
	mux.HandleFunc("/", s.notFound)
	s.mux = mux
	return s
}

// Handler returns the simulator's handler.
func (s *Server) Handler() http.Handler { return s.mux }

// ServeHTTP serves r; a *Server is itself an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// SetProfile sets the profile of deployment name (the /d/{name} prefix)
// from now on, overriding Config.Deployments; name "" sets the profile of
// requests without a prefix.
func (s *Server) SetProfile(name string, p Profile) {
	s.mu.Lock()
	s.over[name] = p
	s.mu.Unlock()
}

func (s *Server) profileFor(dep string) Profile {
	s.mu.Lock()
	p, ok := s.over[dep]
	s.mu.Unlock()
	if ok {
		return p
	}
	if dep == "" {
		return s.cfg.Profile
	}
	if p, ok := s.cfg.Deployments[dep]; ok {
		return p
	}
	if p, ok := LookupProfile(dep); ok {
		return p
	}
	return s.cfg.Profile
}

// profileNote is the X-Sim-Note of an answer for deployment dep: when dep
// names no deployment nor built-in profile but is near one's name (a typo,
// by internal/suggest), it says so; else "". dep is a request's path, so
// the note quotes it as Go does.
func (s *Server) profileNote(dep string, served Profile) string {
	if dep == "" {
		return ""
	}
	s.mu.Lock()
	_, over := s.over[dep]
	s.mu.Unlock()
	if _, ok := s.cfg.Deployments[dep]; ok || over {
		return ""
	}
	if _, ok := LookupProfile(dep); ok {
		return ""
	}
	near := suggest.Closest(dep, ProfileNames())
	if near == "" {
		return ""
	}
	return fmt.Sprintf("no profile named %q (did you mean %q?): served by the default profile, %s", dep, near, served.Name)
}

// requestRand returns the generator for one request (see the package doc).
func (s *Server) requestRand(dep, runID string, body []byte) *rand.Rand {
	s.mu.Lock()
	keyOf := s.runKey
	s.mu.Unlock()
	if keyOf != nil {
		runID = keyOf(runID)
	}
	h := sha256.New()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], s.cfg.Seed)
	h.Write(seed[:])
	for _, part := range [][]byte{[]byte(dep), []byte(runID), body} {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var key [32]byte
	h.Sum(key[:0])

	s.mu.Lock()
	n := s.seen[key]
	s.seen[key] = n + 1
	s.mu.Unlock()

	return drawRand(key, n)
}

func drawRand(key [32]byte, n uint64) *rand.Rand {
	var buf [40]byte
	copy(buf[:], key[:])
	binary.LittleEndian.PutUint64(buf[32:], n)
	sum := sha256.Sum256(buf[:])
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
}

// spend reports whether a scripted fault of rule may fire for runID, and
// counts it when it may.
func (s *Server) spend(rule int, runID string, times int) bool {
	if times == 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := spentKey{rule, runID}
	if s.spent[k] >= times {
		return false
	}
	s.spent[k]++
	return true
}

// ListenAndServe serves a new Server for cfg on addr until ctx ends, then
// closes it (hung requests are cut). It returns nil after ctx ends, or the
// listener's error.
func ListenAndServe(ctx context.Context, addr string, cfg Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, cfg)
}

// Serve is ListenAndServe on an existing listener, which it closes.
func Serve(ctx context.Context, ln net.Listener, cfg Config) error {
	srv := &http.Server{Handler: New(cfg), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = srv.Close()
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) && ctx.Err() != nil {
		return nil
	}
	return err
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	if k := r.Header.Get("X-Api-Key"); k == s.cfg.APIKey {
		return true
	}
	auth := r.Header.Get("Authorization")
	return strings.HasPrefix(auth, "Bearer ") && strings.TrimPrefix(auth, "Bearer ") == s.cfg.APIKey
}
