package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/belay-run/belay/failure"
)

// adv20Body is an OpenAI completion padded with trailing spaces to n bytes.
func adv20Body(n int) string {
	b := fmt.Sprintf(okCompletion, 10, 5)
	if n < len(b) {
		panic("too small")
	}
	return b + strings.Repeat(" ", n-len(b))
}

// Upstream bodies around failure.MaxHeadBytes and max_upstream_body_bytes,
// with and without Content-Length: a body within the cap is answered whole,
// one past it is refused.
func TestAdv20UpstreamBodySizes(t *testing.T) {
	const H = failure.MaxHeadBytes
	cases := []struct {
		name     string
		limit    int // 0: default (32 MiB)
		size     int
		declared bool
		wantOK   bool
	}{
		{"head-1 chunked", 0, H - 1, false, true},
		{"head chunked", 0, H, false, true},
		{"head+1 chunked", 0, H + 1, false, true},
		{"head declared", 0, H, true, true},
		{"head+1 declared", 0, H + 1, true, true},
		{"2head+3 chunked", 0, 2*H + 3, false, true},
		{"limit exactly, small, chunked", 65536, 65536, false, true},
		{"limit+1, small, chunked", 65536, 65537, false, false},
		{"between limit and head, chunked", 65536, H / 2, false, false},
		{"head, limit below, chunked", 65536, H, false, false},
		{"head+1, limit below, chunked", 65536, H + 1, false, false},
		{"limit = head exactly, chunked", H, H, false, true},
		{"limit = head, body head+1, chunked", H, H + 1, false, false},
		{"limit = head+1, body head+1, chunked", H + 1, H + 1, false, true},
		{"limit = head+1, body head+2, declared", H + 1, H + 2, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := adv20Body(c.size)
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				if c.declared {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				} else {
					w.(http.Flusher).Flush() // chunked, no Content-Length
				}
				io.WriteString(w, body)
			})
			extra := ""
			if c.limit > 0 {
				extra = fmt.Sprintf("max_upstream_body_bytes: %d\n", c.limit)
			}
			g := newGW(t, aliasRetrying(1, extra, openAIDep("d", "gpt-4o-mini", up.URL)), nil)
			resp, got := g.do("POST", "/v1/chat/completions", chat)
			if c.wantOK {
				if resp.StatusCode != 200 || len(got) != len(body) {
					t.Fatalf("status %d, %d bytes of %d", resp.StatusCode, len(got), len(body))
				}
			} else if resp.StatusCode == 200 || !strings.Contains(got, "max_upstream_body_bytes") {
				t.Fatalf("status %d body %.200s", resp.StatusCode, got)
			}
		})
	}
}

// An upstream that declares a longer Content-Length than it sends and
// closes the connection: the truncated answer is not relayed as a 200.
func TestAdv20UpstreamShortBody(t *testing.T) {
	for _, size := range []int{100, failure.MaxHeadBytes - 10, failure.MaxHeadBytes + 10} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			body := adv20Body(max(size, 400))
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				conn, bw, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body)+50)
				bw.WriteString(body)
				bw.Flush()
			})
			g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o-mini", up.URL)), nil)
			resp, got := g.do("POST", "/v1/chat/completions", chat)
			if resp.StatusCode == 200 {
				t.Fatalf("truncated upstream body answered 200 (%d bytes)", len(got))
			}
		})
	}
}
