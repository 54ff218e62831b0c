package failure

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAllEvents(t testing.TB, r io.Reader) ([]SSEEvent, error) {
	t.Helper()
	sr := NewSSEReader(r)
	var out []SSEEvent
	for {
		ev, err := sr.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []SSEEvent // Raw not compared here
	}{
		{"lf", "event: a\ndata: 1\n\ndata: 2\n\n",
			[]SSEEvent{{Event: "a", Data: []byte("1")}, {Data: []byte("2")}}},
		{"crlf", "event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n",
			[]SSEEvent{{Event: "a", Data: []byte("1")}, {Data: []byte("2")}}},
		{"cr only", "data: 1\r\rdata: 2\r\r",
			[]SSEEvent{{Data: []byte("1")}, {Data: []byte("2")}}},
		{"multi-line data", "data: {\"a\":\ndata:  1}\n\n",
			[]SSEEvent{{Data: []byte("{\"a\":\n 1}")}}},
		{"comments and keep-alive", ": keep-alive\n\n: hi\ndata: x\n\n",
			[]SSEEvent{{}, {Data: []byte("x")}}},
		{"empty data field", "data\n\ndata:\n\n",
			[]SSEEvent{{Data: []byte{}}, {Data: []byte{}}}},
		{"id and unknown fields", "id: 7\nretry: 10\nfoo: bar\ndata: d\n\n",
			[]SSEEvent{{ID: "7", Data: []byte("d")}}},
		{"leading blank lines", "\n\n\r\ndata: x\n\n\n\n",
			[]SSEEvent{{Data: []byte("x")}}},
		{"partial at end", "data: 1\n\ndata: [DONE]",
			[]SSEEvent{{Data: []byte("1")}, {Data: []byte("[DONE]"), Partial: true}}},
		{"no space after colon", "data:x\n\n", []SSEEvent{{Data: []byte("x")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time too, to exercise the CR/CRLF boundary.
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				got, err := readAllEvents(t, r)
				if err != io.EOF {
					t.Fatalf("err = %v, want io.EOF", err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("got %d events %+v, want %d", len(got), got, len(tt.want))
				}
				for i := range got {
					g, w := got[i], tt.want[i]
					if g.Event != w.Event || g.ID != w.ID || g.Partial != w.Partial ||
						!bytes.Equal(g.Data, w.Data) || (g.Data == nil) != (w.Data == nil) {
						t.Errorf("event %d = %+v, want %+v", i, g, w)
					}
				}
			}
		})
	}
}

func TestSSEReaderRawRelaysExactly(t *testing.T) {
	in := "\r\n: ping\r\nevent: e\r\ndata: a\r\n\r\ndata: b\n\n"
	got, _ := readAllEvents(t, strings.NewReader(in))
	if len(got) != 2 {
		t.Fatalf("got %d events", len(got))
	}
	if string(got[0].Raw) != "\r\n: ping\r\nevent: e\r\ndata: a\r\n\r\n" || string(got[1].Raw) != "data: b\n\n" {
		t.Errorf("raw = %q, %q", got[0].Raw, got[1].Raw)
	}
}

func TestSSEReaderErrors(t *testing.T) {
	boom := errors.New("boom")
	r := NewSSEReader(io.MultiReader(strings.NewReader("data: 1\n\ndata: 2"), iotest.ErrReader(boom)))
	if ev, err := r.Next(); err != nil || string(ev.Data) != "1" {
		t.Fatalf("first = %+v, %v", ev, err)
	}
	ev, err := r.Next()
	if err != nil || !ev.Partial || string(ev.Data) != "2" {
		t.Fatalf("second = %+v, %v; want the partial event", ev, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("third err = %v, want boom", err)
	}

	long := NewSSEReader(strings.NewReader("data: " + strings.Repeat("x", MaxSSELine+1) + "\n\n"))
	if _, err := long.Next(); !errors.Is(err, ErrSSELineTooLong) {
		t.Fatalf("long line err = %v", err)
	}
}

// FuzzSSEReader checks that any input parses without panic, that the raw
// bytes of the events rebuild the input (up to trailing blank lines), and
// that data never holds more lines than the input.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"data: x\n\n", "event: e\r\ndata: 1\r\ndata: 2\r\n\r\n", ": c\n\n", "data: [DONE]", "\r\r\r", "data\rdata:\r\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		events, err := readAllEvents(t, bytes.NewReader(in))
		if err != io.EOF {
			t.Fatalf("err = %v", err)
		}
		var raw []byte
		for _, ev := range events {
			raw = append(raw, ev.Raw...)
			if bytes.Count(ev.Data, []byte("\n")) > bytes.Count(ev.Raw, []byte("\n"))+bytes.Count(ev.Raw, []byte("\r")) {
				t.Fatalf("data %q has more lines than raw %q", ev.Data, ev.Raw)
			}
		}
		if !bytes.HasPrefix(in, raw) || strings.Trim(string(in[len(raw):]), "\r\n") != "" {
			t.Fatalf("raw %q does not rebuild input %q", raw, in)
		}
		w := NewStreamWatcher(DialectOpenAI)
		for _, ev := range events {
			w.ObserveEvent(ev)
		}
		_ = w.End(nil)
	})
}
