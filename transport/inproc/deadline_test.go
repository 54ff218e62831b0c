package inproc

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A write deadline works as on a socket (adversarial review: in process,
// timeouts.client_write did nothing, and a body never read held its call,
// and the run's next one, until their contexts ended): a write blocked on
// a caller that does not read fails when the deadline passes; a deadline
// that passes with no write pending fails only a later write, unless it
// is renewed first.
func TestWriteDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errs := make(chan error, 4)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
			_, err := io.WriteString(w, "first") // read at once
			errs <- err
			time.Sleep(2 * time.Second) // the deadline passes, no write pending
			_ = rc.SetWriteDeadline(time.Now().Add(time.Second))
			_, err = io.WriteString(w, "second") // buffered: read 500ms later
			errs <- err
			start := time.Now()
			_, err = w.Write(make([]byte, 2*pipeBuffer)) // never read: the buffer takes half

			errs <- err
			if d := time.Since(start); d != time.Second {
				t.Errorf("the blocked write failed after %v; want 1s, at the deadline", d)
			}
		})
		resp, err := (&http.Client{Transport: RoundTripper(h)}).Get("http://belay.invalid/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
			t.Fatalf("first read: %q, %v", buf, err)
		}
		time.Sleep(2500 * time.Millisecond)
		buf = make([]byte, 6)
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "second" {
			t.Fatalf("second read: %q, %v", buf, err)
		}
		for i, want := range []error{nil, nil, os.ErrDeadlineExceeded} {
			if err := <-errs; (want == nil) != (err == nil) || want != nil && !errors.Is(err, want) {
				t.Errorf("write %d: %v, want %v", i+1, err, want)
			}
		}
		time.Sleep(time.Second) // long past the deadline: the caller reads now
		if b, err := io.ReadAll(resp.Body); len(b) != pipeBuffer || !errors.Is(err, ErrWriteTimeout) {
			t.Errorf("the caller's read after the cut: %d bytes, %v; want the %d buffered, then ErrWriteTimeout", len(b), err, pipeBuffer)
		}
	})
}

// A write after the deadline, with none pending when it passed, fails at
// once.
func TestWriteAfterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errc := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Second))
			time.Sleep(2 * time.Second)
			_, err := io.WriteString(w, "late")
			errc <- err
		})
		resp, err := (&http.Client{Transport: RoundTripper(h)}).Get("http://belay.invalid/x")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		go io.Copy(io.Discard, resp.Body)
		if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a write after the deadline: %v", err)
		}
	})
}

// failingBody yields some bytes, then fails.
type failingBody struct{ n int }

var errDisk = errors.New("disk on fire")

func (b *failingBody) Read(p []byte) (int, error) {
	if b.n > 0 {
		b.n--
		return copy(p, "{\"a\":"), nil
	}
	return 0, errDisk
}

// A request body that fails to read fails the request with its error, as
// over a connection, whatever the handler answered for the body it did
// not get (adversarial review, session 26: a vague 400, no Go error).
func TestRequestBodyErrorFailsTheRequest(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "reading the request body failed", http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok")
	})
	c := &http.Client{Transport: RoundTripper(h)}
	_, err := c.Post("http://belay.invalid/x", "application/json", &failingBody{n: 1})
	if !errors.Is(err, errDisk) {
		t.Errorf("Post with a failing body: %v; want the body's error", err)
	}
	resp, err := c.Post("http://belay.invalid/x", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Errorf("a good body: %q", b)
	}
}
