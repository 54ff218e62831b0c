// Package sse writes and reads server-sent events as the LLM providers use
// them (WHATWG HTML Living Standard, "Server-sent events"): an optional
// "event: NAME" line, one or more "data: ..." lines, and a blank line.
//
// OpenAI sends data-only events and ends with "data: [DONE]"; Anthropic names
// every event (message_start ... message_stop, ping, error).
package sse

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
)

// ContentType is the content type both providers send for streams.
const ContentType = "text/event-stream; charset=utf-8"

// Format returns one event: "event: NAME\n" when name is not empty, then
// "data: DATA\n" (one line per line of data), then "\n".
func Format(name string, data []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(name) + len(data) + 16)
	if name != "" {
		b.WriteString("event: ")
		b.WriteString(name)
		b.WriteByte('\n')
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// Write writes Format(name, data) to w and flushes w when it is an
// http.Flusher (directly or through http.ResponseController).
func Write(w io.Writer, name string, data []byte) error {
	if _, err := w.Write(Format(name, data)); err != nil {
		return err
	}
	return Flush(w)
}

// Flush flushes w if it can be flushed; a writer that cannot is not an error.
func Flush(w io.Writer) error {
	if rw, ok := w.(http.ResponseWriter); ok {
		if err := http.NewResponseController(rw).Flush(); err != nil && err != http.ErrNotSupported {
			return err
		}
		return nil
	}
	if f, ok := w.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// SetHeaders sets the response headers of a stream: content-type,
// cache-control: no-cache and connection: keep-alive.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", ContentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
}

// Event is one parsed event. Name is empty for unnamed events.
type Event struct {
	Name string
	Data []byte
}

// Reader parses events from a stream. Comment lines (":...") and the id and
// retry fields are skipped. It is not safe for concurrent use.
type Reader struct {
	sc *bufio.Scanner
}

// NewReader returns a Reader over r; lines may be up to 4 MiB.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	return &Reader{sc: sc}
}

// Next returns the next complete event. At the end of the input it returns
// io.EOF when the input ended on an event boundary and io.ErrUnexpectedEOF
// when a partial event was cut off; other errors are the reader's.
func (r *Reader) Next() (Event, error) {
	var ev Event
	var data [][]byte
	started := false
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if len(line) == 0 {
			if !started {
				continue
			}
			ev.Data = bytes.Join(data, []byte("\n"))
			return ev, nil
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
			started = true
		case "data":
			data = append(data, bytes.Clone(value))
			started = true
		}
	}
	if err := r.sc.Err(); err != nil {
		return Event{}, err
	}
	if started {
		return Event{}, io.ErrUnexpectedEOF
	}
	return Event{}, io.EOF
}
