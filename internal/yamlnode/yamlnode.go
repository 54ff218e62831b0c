// Package yamlnode holds what belay's checkers of YAML files (the config,
// eval suites) share: reading one document as a node tree with the line
// of a syntax error, following aliases, and the YAML keys of a struct. The
// checkers walk the tree against the types it decodes into, so that every
// mistake reaches the user in the file's words with its line, never as the
// YAML library's message (which names Go types).
package yamlnode

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SyntaxError is YAML the parser refused: Msg is its message without the
// "yaml: line N: " prefix, Line its line (0 when the parser gave none).
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return "line " + strconv.Itoa(e.Line) + ": " + e.Msg }

// MoreDocumentsError is a file that holds a second YAML document; Line is
// where it starts.
type MoreDocumentsError struct{ Line int }

func (e *MoreDocumentsError) Error() string {
	return "line " + strconv.Itoa(e.Line) + ": a second YAML document starts here"
}

var errLine = regexp.MustCompile(`^yaml: line (\d+): `)

// Read parses data as at most one YAML document. It returns nil and no
// error for an empty one, a *SyntaxError for YAML the parser refuses, and
// a *MoreDocumentsError when a second document follows.
func Read(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		return nil, nil
	case err != nil:
		return nil, syntaxError(err)
	}
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
		return &root, nil
	case err != nil:
		return nil, syntaxError(err)
	}
	return nil, &MoreDocumentsError{Line: more.Line}
}

func syntaxError(err error) *SyntaxError {
	msg := err.Error()
	e := &SyntaxError{}
	if m := errLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	e.Msg = strings.TrimPrefix(msg, "yaml: ")
	return e
}

// Resolve skips a document node and follows aliases to the node they name.
func Resolve(n *yaml.Node) *yaml.Node {
	for {
		switch {
		case n.Kind == yaml.DocumentNode && len(n.Content) > 0:
			n = n.Content[0]
		case n.Kind == yaml.AliasNode && n.Alias != nil:
			n = n.Alias
		default:
			return n
		}
	}
}

// IsNull reports whether n is a null scalar (null, ~ or nothing).
func IsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// Keys returns struct t's YAML keys in declaration order and the field of
// each: the yaml tag's name, or the lowercased field name without one;
// unexported fields and fields tagged "-" have none.
func Keys(t reflect.Type) ([]string, map[string]reflect.StructField) {
	var keys []string
	fields := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		keys = append(keys, name)
		fields[name] = f
	}
	return keys, fields
}

// Entry is one key of a mapping and its value, as written.
type Entry struct{ Key, Value *yaml.Node }

// Entries splits mapping n into its entries (each key resolved; a merge
// key's excluded) and the mappings its merge keys ("<<: *anchor", or a
// list of them, YAML 1.1) bring in, resolved, in order. A merge that
// brings in anything but a mapping is returned as bad, and merged stops
// there. The keys given in n override the merged ones.
func Entries(n *yaml.Node) (entries []Entry, merged []*yaml.Node, bad *yaml.Node) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		entries = append(entries, Entry{k, v})
	}
	for _, m := range merges {
		m = Resolve(m)
		from := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			from = m.Content
		}
		for _, src := range from {
			src = Resolve(src)
			if src.Kind != yaml.MappingNode {
				return entries, merged, src
			}
			merged = append(merged, src)
		}
	}
	return entries, merged, nil
}

var (
	errPrefix = regexp.MustCompile(`^(yaml: )?(unmarshal errors:\s*)?`)
	goType    = regexp.MustCompile(` into [\w\[\]\.\*]+`)
	noField   = regexp.MustCompile(`field (\S+) not found in type \S+`)
)

// PlainError is the YAML library's decoding error in a file's words: its
// "line N:" parts kept, one per mistake, joined by "; ", with "field x not
// found in type T" as `unknown field "x"` and no Go type named ("cannot
// unmarshal !!str `abc` into int" reads "... as a whole number"). For a
// decoder that reads a file without a checker of its own.
func PlainError(err error) string {
	s := errPrefix.ReplaceAllString(err.Error(), "")
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			l = noField.ReplaceAllString(l, `unknown field "$1"`)
			parts = append(parts, goType.ReplaceAllStringFunc(l, func(m string) string {
				return " as " + kindWords(strings.TrimPrefix(m, " into "))
			}))
		}
	}
	return strings.Join(parts, "; ")
}

// kindWords names what a Go type holds in a YAML file's words.
func kindWords(goType string) string {
	t := strings.TrimLeft(goType, "*")
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "string":
		return "text"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a mapping" // a struct
}
