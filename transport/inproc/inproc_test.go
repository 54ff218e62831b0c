package inproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/belay-run/belay/failure"
)

func TestStreamsBeforeHandlerReturns(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Cost")
		w.Header().Set("X-Run", "r1")
		w.WriteHeader(201)
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "second\n")
		w.Header().Set("X-Cost", "0.5")
	})
	c := &http.Client{Transport: RoundTripper(h)}
	resp, err := c.Get("http://belay.invalid/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("X-Run") != "r1" {
		t.Fatalf("status %d header %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	if got := resp.Trailer.Get("X-Cost"); got != "0.5" {
		t.Errorf("trailer X-Cost = %q, want 0.5", got)
	}
}

func TestCloseCancelsHandler(t *testing.T) {
	done := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		_, err := w.Write([]byte("late"))
		done <- err
	})
	resp, err := (&http.Client{Transport: RoundTripper(h)}).Get("http://belay.invalid/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := <-done; !errors.Is(err, errBodyClosed) {
		t.Errorf("handler write after close: %v, want errBodyClosed", err)
	}
}

func TestContextCancelEndsBody(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "x")
		<-r.Context().Done()
	})
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://belay.invalid/", strings.NewReader("body"))
	resp, err := RoundTripper(h).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("read after cancel: %v, want context.Canceled", err)
	}
}

func TestPanicEndsBodyWithError(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		panic("boom")
	})
	resp, err := RoundTripper(h).RoundTrip(httpReq(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if string(b) != "partial" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("body %q err %v", b, err)
	}
}

func TestRequestBodyReachesHandler(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Length", "4")
		io.WriteString(w, strings.ToUpper(string(b)))
	})
	req, _ := http.NewRequest("POST", "http://belay.invalid/", strings.NewReader("ping"))
	resp, err := RoundTripper(h).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "PING" || resp.ContentLength != 4 || resp.StatusCode != 200 {
		t.Errorf("got %q len %d status %d", b, resp.ContentLength, resp.StatusCode)
	}
}

func httpReq(t *testing.T) *http.Request {
	r, err := http.NewRequest("GET", "http://belay.invalid/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A handler that fails before answering gives no response and an error,
// as a connection closed before an answer does: a reset (the simulator's)
// is a connection error, not a 500 (a newcomer's sim "unreachable"
// profile was relayed as a 500 "server_error").
func TestPanicBeforeHeaderIsAnError(t *testing.T) {
	for _, tc := range []struct {
		p     any
		reset bool
	}{{http.ErrAbortHandler, true}, {"boom", false}} {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic(tc.p) })
		resp, err := RoundTripper(h).RoundTrip(httpReq(t))
		if resp != nil || err == nil || errors.Is(err, syscall.ECONNRESET) != tc.reset {
			t.Errorf("panic(%v): resp %v, err %v; want no response and an error (reset: %v)", tc.p, resp, err, tc.reset)
		}
		if fe := failure.ClassifyError(err); tc.reset && fe.Reason != failure.ConnectionError {
			t.Errorf("panic(%v): classified %v, want connection_error", tc.p, fe)
		}
	}
}

// A handler that returns without answering after its caller gave up (a
// hung upstream, canceled) gives the caller its context's error, never an
// empty 200: the gateway took that 200 for a cut answer and charged the
// call its whole output limit (newcomer finding: a hung call canceled at
// shutdown was charged 4096 output tokens, one killed only its prompt).
func TestCanceledBeforeAnswerIsNoResponse(t *testing.T) {
	rt := RoundTripper(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	// The caller's select sees its context end and the handler's return
	// in either order; the answer must not depend on which.
	for i := range 2000 {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://sim/v1/chat/completions", strings.NewReader("{}"))
		if i%2 == 0 {
			cancel() // before the handler starts
		} else {
			go cancel() // while it runs
		}
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
			err = fmt.Errorf("a %d response", resp.StatusCode)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("try %d: %v, want context.Canceled and no response", i, err)
		}
		cancel()
	}
}
