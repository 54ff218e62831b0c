package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req on bw as http.Request.Write does, byte for byte,
// for the requests a gateway sends: a body of known length (or none), no
// Connection: close, no Transfer-Encoding or trailers, a plain ASCII host,
// no trace hook on each header field. ok is false, with nothing written,
// for any other request: the caller then uses http.Request.Write.
//
// Why: Request.Write formats its request and host lines with fmt, builds a
// transfer writer, and sorts the header through a pooled sorter; on a
// model call through the gateway that was about a quarter of the upstream
// exchange's CPU in a profile of bench/gateway's sequential run (the whole
// call's CPU moved too little to measure: bench/gateway/README.md,
// session 18).
//
// As Request.Write: the request line, Host, User-Agent (the header's, or
// Go's default when the header has none; none when it is empty),
// Content-Length (a body's length, or 0 for a POST, PUT or PATCH without
// one), then the header's other fields sorted by key, each value with
// CR and LF turned to spaces and trimmed; the body is copied and closed,
// and a body whose length differs from ContentLength is an error. The
// trace's WroteHeaders and WroteRequest hooks are called as Request.Write
// calls them, and the head is flushed before a body that is not held in
// memory (a *bytes.Reader, *bytes.Buffer or *strings.Reader, bare or in
// io.NopCloser) is read. One difference: a body's read error is returned
// as it is, where Request.Write wraps it in an unexported type of the same
// text.
func writeRequest(bw *bufio.Writer, req *http.Request) (ok bool, err error) {
	trace := httptrace.ContextClientTrace(req.Context())
	if trace != nil && trace.WroteHeaderField != nil || req.Close || req.URL == nil ||
		len(req.TransferEncoding) > 0 || len(req.Trailer) > 0 || req.Method == "CONNECT" {
		return false, nil
	}
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	if req.ContentLength < 0 || req.ContentLength == 0 && body != nil || req.ContentLength > 0 && body == nil {
		return false, nil // Request.Write probes or refuses these
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !plainHost(host) {
		return false, nil
	}
	uri := req.URL.RequestURI()
	if hasCTL(uri) || req.Method != "" && !httpguts.ValidHeaderFieldName(req.Method) { // a method is a token too
		return false, nil
	}
	var keys [24]string
	n := 0
	for k := range req.Header {
		if n == len(keys) {
			return false, nil
		}
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return false, nil // Request.Write drops a key that is not a field name
		}
		keys[n] = k
		n++
	}
	sorted := keys[:n]
	slices.Sort(sorted)

	if trace != nil && trace.WroteRequest != nil {
		defer func() { trace.WroteRequest(httptrace.WroteRequestInfo{Err: err}) }()
	}
	closed := false
	defer func() {
		if !closed && body != nil {
			if cerr := body.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	ua := "Go-http-client/1.1"
	if _, ok := req.Header["User-Agent"]; ok {
		ua = req.Header.Get("User-Agent")
	}
	if ua != "" {
		writeField(bw, "User-Agent", ua)
	}
	if req.ContentLength > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		bw.WriteString("Content-Length: ")
		var num [20]byte
		bw.Write(strconv.AppendInt(num[:0], req.ContentLength, 10))
		bw.WriteString("\r\n")
	}
	for _, k := range sorted {
		for _, v := range req.Header[k] {
			writeField(bw, k, v)
		}
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		return true, err
	}
	if trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	if body == nil {
		return true, nil
	}
	if !inMemory(body) {
		// The head goes out before a body that may wait on the server
		// (Request.Write's rule for bodies not held in memory).
		if err := bw.Flush(); err != nil {
			return true, err
		}
	}
	closed = true
	copied, err := io.Copy(bw, io.LimitReader(body, req.ContentLength))
	if err == nil {
		var extra int64
		extra, err = io.Copy(io.Discard, body)
		copied += extra
	}
	if cerr := body.Close(); err == nil {
		err = cerr
	}
	if err == nil && copied != req.ContentLength {
		err = fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, copied)
	}
	return true, err
}

// writeField writes "key: value\r\n", the value's CR and LF turned to
// spaces and its ends trimmed of spaces and tabs (Header.Write's rule).
func writeField(bw *bufio.Writer, key, v string) {
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
	}
	v = strings.Trim(v, " \t")
	bw.WriteString(key)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

// plainHost reports whether host is a non-empty ASCII host[:port] that
// Request.Write sends as it is: no IDNA conversion, no IPv6 zone to
// strip, only characters a valid Host header holds.
func plainHost(host string) bool {
	if host == "" {
		return false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_':
		default:
			return false
		}
	}
	return true
}

// hasCTL reports whether s holds an ASCII control byte.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// nopCloser types are io.NopCloser's results, for a reader with and
// without WriteTo: inMemory looks through them.
var (
	nopCloser         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterTo = reflect.TypeOf(io.NopCloser(strings.NewReader("")))
)

// inMemory reports whether a request body is held in memory, so that
// reading it never waits: a *bytes.Reader, *bytes.Buffer or
// *strings.Reader, bare or in io.NopCloser (http.NewRequest's bodies).
func inMemory(r io.Reader) bool {
	if t := reflect.TypeOf(r); t == nopCloser || t == nopCloserWriterTo {
		if inner, ok := reflect.ValueOf(r).Field(0).Interface().(io.Reader); ok {
			r = inner
		}
	}
	switch r.(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return true
	}
	return false
}
