package failure

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// SSEEvent is one block of a server-sent-event stream, as parsed by the
// WHATWG HTML "Server-sent events" rules (§9.2.6 "Interpreting an event
// stream").
type SSEEvent struct {
	// Event is the event field ("message_start", "error"); empty when the
	// block has none (OpenAI and Gemini streams send data only).
	Event string
	// Data is the data fields joined with "\n", without the final newline;
	// nil when the block has no data field (a comment, a retry field).
	Data []byte
	// ID is the last id field of the block, if any.
	ID string
	// Raw is the block exactly as received, from the first byte after the
	// previous block through the blank line that ends this one, comments
	// and line endings included, so a proxy can relay it unchanged.
	Raw []byte
	// Partial is true for a block cut off by the end of the stream before
	// its terminating blank line.
	Partial bool
}

// ErrSSELineTooLong is returned by SSEReader.Next for a line longer than
// MaxSSELine.
var ErrSSELineTooLong = errors.New("failure: server-sent-event line too long")

// MaxSSELine is the longest line SSEReader accepts: 8 MiB.
const MaxSSELine = 8 << 20

// SSEReader reads server-sent events from an io.Reader. Lines may end in
// CRLF, LF or CR; comment lines (starting with ":") are kept in Raw but
// otherwise ignored; a single space after a field's colon is dropped; data
// fields of one block are joined with "\n".
//
// Unlike a browser's EventSource, it returns every non-empty block, also
// those without data (comments used as keep-alives), so a proxy can relay
// them; such blocks have nil Data. A block cut off by the end of the input
// is returned with Partial set.
//
// A line ending in a lone CR is only recognised once the next byte arrives,
// so a CR-only stream is delivered one byte late. An SSEReader is not safe
// for concurrent use.
type SSEReader struct {
	sc  *bufio.Scanner
	err error
}

// NewSSEReader returns an SSEReader over r.
func NewSSEReader(r io.Reader) *SSEReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxSSELine)
	sc.Split(splitSSELines)
	return &SSEReader{sc: sc}
}

// Next returns the next block. At the end of the input it returns io.EOF
// (blank lines after the last block are discarded); a read error, or
// ErrSSELineTooLong, is returned as is and repeated on later calls.
func (r *SSEReader) Next() (SSEEvent, error) {
	if r.err != nil {
		return SSEEvent{}, r.err
	}
	var ev SSEEvent
	var raw []byte
	var data [][]byte
	started := false
	for r.sc.Scan() {
		line := r.sc.Bytes()
		raw = append(raw, line...)
		content := trimEOL(line)
		if len(content) == 0 {
			if !started {
				continue // a blank line between blocks
			}
			ev.Raw = raw
			ev.Data = joinData(data)
			return ev, nil
		}
		started = true
		parseField(&ev, &data, content)
	}
	r.err = r.sc.Err()
	if errors.Is(r.err, bufio.ErrTooLong) {
		r.err = ErrSSELineTooLong
	}
	if r.err == nil {
		r.err = io.EOF
	}
	if !started {
		return SSEEvent{}, r.err
	}
	ev.Raw, ev.Data, ev.Partial = raw, joinData(data), true
	return ev, nil
}

func parseField(ev *SSEEvent, data *[][]byte, line []byte) {
	if line[0] == ':' {
		return // comment
	}
	name, value, found := bytes.Cut(line, []byte(":"))
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "event":
		ev.Event = string(value)
	case "data":
		*data = append(*data, bytes.Clone(value)) // value aliases the scanner's buffer
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			ev.ID = string(value)
		}
	}
}

func joinData(lines [][]byte) []byte {
	if lines == nil {
		return nil
	}
	if out := bytes.Join(lines, []byte("\n")); out != nil {
		return out
	}
	return []byte{} // "data:" with no value: present but empty
}

func trimEOL(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r"))
}

// splitSSELines is a bufio.SplitFunc returning lines with their CRLF, LF or
// CR ending included.
func splitSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, c := range data {
		switch c {
		case '\n':
			return i + 1, data[:i+1], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i+2], nil
				}
				return i + 1, data[:i+1], nil
			}
			if atEOF {
				return i + 1, data[:i+1], nil
			}
			return 0, nil, nil // need the next byte to tell CR from CRLF
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
