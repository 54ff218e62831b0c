package config

import (
	"errors"
	"fmt"
	"github.com/belay-run/belay/internal/suggest"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/belay-run/belay/internal/yamlnode"
)

// Error is a mistake in a configuration and where it is: the file, the
// line, and the key path in the YAML ("models[0].deployments[1].timeout";
// list items by index, pricing entries as pricing["gpt-4.1"]). Parse and
// Load return an *Error for every mistake in a file: invalid YAML, an
// unknown key, a value of the wrong shape or type, a bad value, a missing
// env: variable. Validate returns one without File and Line.
//
// It reads "config FILE: line N: PATH: MSG", without the parts that are
// empty; Msg says what was found and what is wanted, in the words of the
// file, never a Go type.
type Error struct {
	File string // the name given to Parse; empty from Validate
	Line int    // 1-based line in File; 0 when unknown
	Path string // the YAML key path; empty for the whole document
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString("config " + e.File + ": ")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// bad returns an *Error at path whose message is format's.
func bad(path, format string, args ...any) *Error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// The checks below read the YAML node tree against the types it decodes
// into, before it is decoded, so that no mistake reaches the user as the
// YAML library's message (which names Go types: "cannot unmarshal !!str
// into []config.Model", "field listn not found in type config.Config").

// readDocument parses data as at most one YAML document; nil for an empty
// one.
func readDocument(data []byte) (*yaml.Node, error) {
	root, err := yamlnode.Read(data)
	var se *yamlnode.SyntaxError
	var md *yamlnode.MoreDocumentsError
	switch {
	case errors.As(err, &se):
		return nil, &Error{Line: se.Line, Msg: "invalid YAML: " + se.Msg}
	case errors.As(err, &md):
		return nil, &Error{Line: md.Line, Msg: "a second YAML document starts here; want one document"}
	}
	return root, err
}

// checker walks a YAML tree against the type it decodes into. It records
// the line of every key path it passes, for errors found after decoding.
type checker struct {
	lines map[string]int
	// visited counts the nodes checked: aliases can make a small file a
	// huge tree, which the decoder refuses ("excessive aliasing"); past
	// maxVisited the check stops with an *Error at the alias's line.
	visited int
}

// maxVisited bounds the nodes a config's check visits, aliases expanded:
// far above any real config (a thousand deployments with their keys), far
// below what a few kilobytes of nested aliases expand to.
const maxVisited = 200_000

// check returns an *Error for the first key t does not have, key given
// twice, or value of the wrong shape or type under n, which is at path.
// Null leaves a value at its default, as the decoder does.
func (c *checker) check(n *yaml.Node, t reflect.Type, path string) error {
	if c.visited++; c.visited > maxVisited {
		return &Error{Line: n.Line, Path: path, Msg: fmt.Sprintf("the file expands, aliases followed, to more than %d values; want a config without so many aliases", maxVisited)}
	}
	n = yamlnode.Resolve(n)
	if yamlnode.IsNull(n) {
		return nil
	}
	if u, ok := reflect.New(t).Interface().(yaml.Unmarshaler); ok {
		return at(u.UnmarshalYAML(n), n, path)
	}
	switch t.Kind() {
	case reflect.Pointer: // an optional value: checked as the value
		c.visited--
		return c.check(n, t.Elem(), path)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return wrongType(n, t, path)
		}
		return c.fields(n, t, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return wrongType(n, t, path)
		}
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			c.mark(p, item.Line)
			if t.Elem().Kind() == reflect.Struct && yamlnode.IsNull(yamlnode.Resolve(item)) {
				// The decoder would drop the item, and the items after it
				// move up: an empty tenant would leave the gateway open.
				return &Error{Line: item.Line, Path: p, Msg: "found nothing (an empty item); want " + want(t.Elem())}
			}
			if err := c.check(item, t.Elem(), p); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return wrongType(n, t, path)
		}
		return c.entries(n, t, path)
	}
	return scalar(n, t, path)
}

// entries checks mapping n against map type t: each key a name, given
// once, each value of t's element type. A merge key ("<<: *anchor") brings
// in the entries of another mapping, which entries given here override.
func (c *checker) entries(n *yaml.Node, t reflect.Type, path string) error {
	entries, merged, bad := yamlnode.Entries(n)
	seen := map[string]int{}
	for _, e := range entries {
		k, v := e.Key, e.Value
		if k.Kind != yaml.ScalarNode {
			return &Error{Line: k.Line, Path: path, Msg: "found " + found(k) + " as a key; want a name"}
		}
		p := path + entry(k.Value)
		if first, dup := seen[k.Value]; dup {
			return twice(k, p, first)
		}
		seen[k.Value] = k.Line
		c.mark(p, k.Line)
		if err := c.check(v, t.Elem(), p); err != nil {
			return err
		}
	}
	for _, src := range merged {
		if err := c.entries(src, t, path); err != nil {
			return err
		}
	}
	if bad != nil {
		return &Error{Line: bad.Line, Path: path, Msg: "a merge (<<) found " + found(bad) + "; want a mapping or a list of mappings"}
	}
	return nil
}

// fields checks mapping n against struct t. A merge key ("<<: *anchor")
// brings in the keys of another mapping, which keys given here override.
func (c *checker) fields(n *yaml.Node, t reflect.Type, path string) error {
	keys, fields := yamlnode.Keys(t)
	seen := map[string]int{}
	entries, merged, bad := yamlnode.Entries(n)
	for _, e := range entries {
		k, v := e.Key, e.Value
		if k.Kind != yaml.ScalarNode {
			return &Error{Line: k.Line, Path: path, Msg: "found " + found(k) + " as a key; want one of " + strings.Join(keys, ", ")}
		}
		p := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			return &Error{Line: k.Line, Path: p, Msg: unknownKey(k.Value, keys)}
		}
		if first, dup := seen[k.Value]; dup {
			return twice(k, p, first)
		}
		seen[k.Value] = k.Line
		c.mark(p, k.Line)
		if err := c.check(v, f.Type, p); err != nil {
			return err
		}
	}
	for _, src := range merged {
		if err := c.fields(src, t, path); err != nil {
			return err
		}
	}
	if bad != nil {
		return &Error{Line: bad.Line, Path: path, Msg: "a merge (<<) found " + found(bad) + "; want a mapping or a list of mappings"}
	}
	return nil
}

// scalar checks a plain value: any scalar for a string; a whole number in
// range for an integer (the decoder would cut 1.5 to 1); a number for a
// float.
func scalar(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.ScalarNode {
		return wrongType(n, t, path)
	}
	switch t.Kind() {
	case reflect.String:
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch n.ShortTag() {
		case "!!int":
		case "!!float": // 1e3 is whole; 1.5 is not
			if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
				return wrongType(n, t, path)
			}
		default:
			return wrongType(n, t, path)
		}
		if n.Decode(reflect.New(t).Interface()) != nil {
			return &Error{Line: n.Line, Path: path, Msg: n.Value + " is out of range; want " + want(t)}
		}
		return nil
	case reflect.Float32, reflect.Float64:
		if tag := n.ShortTag(); tag != "!!int" && tag != "!!float" {
			return wrongType(n, t, path)
		}
	}
	if n.Decode(reflect.New(t).Interface()) != nil {
		return wrongType(n, t, path)
	}
	return nil
}

// at places err, returned by a type's UnmarshalYAML for node n, at path.
func at(err error, n *yaml.Node, path string) error {
	if err == nil {
		return nil
	}
	var e Error
	if ue, ok := errors.AsType[*Error](err); ok {
		e = *ue
	} else {
		e.Msg = err.Error()
	}
	if e.Line == 0 {
		e.Line = n.Line
	}
	e.Path = path
	return &e
}

func twice(k *yaml.Node, path string, first int) *Error {
	return &Error{Line: k.Line, Path: path, Msg: fmt.Sprintf("given twice (first on line %d)", first)}
}

func wrongType(n *yaml.Node, t reflect.Type, path string) *Error {
	return &Error{Line: n.Line, Path: path, Msg: "found " + found(n) + "; want " + want(t)}
}

// found names what a node holds: a mapping, a list, or its text (quoted
// when YAML reads it as a string).
func found(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

// Words for the values of the config's types, in messages.
var (
	nouns = map[reflect.Type]string{
		reflect.TypeFor[Model]():      "models",
		reflect.TypeFor[Deployment](): "deployments",
		reflect.TypeFor[Tenant]():     "tenants",
		reflect.TypeFor[Price]():      "prices",
		reflect.TypeFor[string]():     "strings",
		reflect.TypeFor[float64]():    "numbers",
	}
	wants = map[reflect.Type]string{
		reflect.TypeFor[Duration](): durationWant,
		reflect.TypeFor[USD]():      usdWant,
		reflect.TypeFor[Secret]():   secretWant,
	}
)

const (
	durationWant = "a duration such as 500ms, 30s or 5m, or a number of seconds"
	usdWant      = "a dollar amount such as 1.50"
	secretWant   = "a string (a literal or env:NAME)"
)

// want says what a value of type t looks like in YAML.
func want(t reflect.Type) string {
	if w, ok := wants[t]; ok {
		return w
	}
	switch t.Kind() {
	case reflect.Pointer:
		return want(t.Elem())
	case reflect.Struct:
		keys, _ := yamlnode.Keys(t)
		return "a mapping with keys " + strings.Join(keys, ", ")
	case reflect.Slice:
		return "a list of " + plural(t.Elem())
	case reflect.Map:
		return "a mapping from names to " + plural(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	}
	return "a " + t.Kind().String()
}

// plural names several values of type t: "models, each a mapping with
// keys alias, deployments".
func plural(t reflect.Type) string {
	noun, ok := nouns[t]
	if !ok {
		noun = "values"
	}
	if t.Kind() == reflect.Struct {
		noun += ", each " + want(t)
	}
	return noun
}

// unknownKey says that key is not one of keys, suggesting the closest when
// it is a likely typo.
func unknownKey(key string, keys []string) string {
	msg := "unknown key"
	if s := suggest.Closest(key, keys); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return msg + "; want one of " + strings.Join(keys, ", ")
}

// join appends key to path with a dot.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_/-]+$`)

// entry is the path step of map key k: .k, or ["k"] when k holds other
// characters (a dot, as in gpt-4.1).
func entry(k string) string {
	if plainKey.MatchString(k) {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// mark records the line of path, unless it has one: keys given explicitly
// are checked before the keys a merge brings in, and override them.
func (c *checker) mark(path string, line int) {
	if _, ok := c.lines[path]; !ok {
		c.lines[path] = line
	}
}

// line returns the line of path, or of its nearest ancestor recorded; 0
// when there is none.
func (c *checker) line(path string) int {
	for {
		if l, ok := c.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parent(path)
	}
}

// parent drops the last step of path: a .key or an [index].
func parent(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndex(path, "["); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i]
	}
	return ""
}
