package eval

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/belay-run/belay/internal/yamlnode"
)

// The checks in this file read the YAML node tree before the suite is
// decoded, so that every error names the file's line and the field's path
// in the user's words ("must be a whole number", "unknown field"), never a
// Go type.

// readDocument parses b as exactly one YAML document.
func readDocument(b []byte) (*yaml.Node, error) {
	root, err := yamlnode.Read(b)
	var se *yamlnode.SyntaxError
	var md *yamlnode.MoreDocumentsError
	switch {
	case errors.As(err, &se):
		return nil, &fieldError{line: se.Line, msg: plainYAMLError(errors.New(se.Msg))}
	case errors.As(err, &md):
		return nil, &fieldError{line: md.Line, msg: "the file holds more than one YAML document (a second one starts here); a suite is one document"}
	case err != nil:
		return nil, err
	case root == nil:
		return nil, errors.New("the file is empty")
	}
	return root, nil
}

// gatewayConfigKeys are top-level keys of a belay gateway config (see
// package config) that a suite does not have; "deployments" is a models
// entry's, often written at the top by mistake.
var gatewayConfigKeys = []string{"listen", "store", "admin_key", "models", "deployments", "tenants", "retry",
	"breaker", "pricing", "otlp", "redact", "capture", "timeouts", "max_body_bytes", "max_upstream_body_bytes"}

// checkNotConfig refuses a document that looks like a gateway config
// rather than a suite: a mapping with none of a suite's agent and
// scenarios, and at least one of gatewayConfigKeys. The error names the
// keys seen and says what a suite needs.
func checkNotConfig(root *yaml.Node) error {
	top := yamlnode.Resolve(root)
	if top.Kind != yaml.MappingNode {
		return nil // checkVersion says what a suite is
	}
	var seen []string
	for i := 0; i+1 < len(top.Content); i += 2 {
		switch k := top.Content[i].Value; {
		case k == "agent" || k == "scenarios":
			return nil
		case slices.Contains(gatewayConfigKeys, k):
			seen = append(seen, k)
		}
	}
	if len(seen) == 0 {
		return nil
	}
	return badAt(top, fmt.Sprintf("this looks like a gateway config (%s, and no scenarios), the file of belay serve --config; "+
		"belay eval takes a suite file, which needs version: %d, agent (go: NAME or command: [PROGRAM, …]) and scenarios "+
		"(a suite runs its agent on a config's deployments with providers: {config: FILE})", strings.Join(seen, ", "), SuiteVersion))
}

// checkVersion reads only the version of a suite document, so a file of
// another version is refused for its version, not for fields this belay
// does not know.
func checkVersion(root *yaml.Node) error {
	top := yamlnode.Resolve(root)
	if top.Kind != yaml.MappingNode {
		return badAt(top, fmt.Sprintf("a suite is a mapping of fields (version, agent, scenarios, …), not %s", describe(top)))
	}
	var v *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "version" {
			v = yamlnode.Resolve(top.Content[i+1])
			break
		}
	}
	if v == nil {
		return bad(fmt.Sprintf("version is required (this belay reads version %d)", SuiteVersion), "version")
	}
	var version int
	if v.Kind != yaml.ScalarNode || v.Decode(&version) != nil {
		return badAt(v, fmt.Sprintf("must be a whole number, not %s", describe(v)), "version")
	}
	if version != SuiteVersion {
		return badAt(v, fmt.Sprintf("version %d is not understood (this belay reads version %d)", version, SuiteVersion), "version")
	}
	return nil
}

// checkFields walks a YAML node against the Go type it decodes into and
// returns a *fieldError for the first key the type does not have, key
// given twice, or value of the wrong shape (a list where a mapping belongs,
// a word where a number belongs, a bad duration), naming the field's path
// and line.
func checkFields(n *yaml.Node, t reflect.Type, path []string) error {
	n = yamlnode.Resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(path) > 0 && yamlnode.IsNull(n) {
		return nil // an empty value leaves the field at its default
	}
	switch {
	case isStructish(t):
		if n.Kind != yaml.MappingNode {
			return badAt(n, fmt.Sprintf("must be a mapping of fields (%s), not %s", strings.Join(sortedNames(yamlFields(t)), ", "), describe(n)), path...)
		}
		return checkMapping(n, t, path, map[string]int{})
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return badAt(n, "must be a list, not "+describe(n), path...)
		}
		for i, item := range n.Content {
			if err := checkFields(item, t.Elem(), appendPath(path, strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			return badAt(n, "must be a mapping (key: value), not "+describe(n), path...)
		}
	}
	if isWhole(t) && n.ShortTag() == "!!float" {
		// The decoder would truncate 1.5 to 1; 1e5 is whole, as the
		// gateway's config takes it.
		if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
			return badAt(n, valueMessage(t, n, nil), path...)
		}
	}
	if isWhole(t) && n.ShortTag() == "!!int" && leadingZero.MatchString(n.Value) {
		// The decoder reads 010 as octal 8 (YAML 1.1); a suite author
		// meant 10 (an adversarial review found runs: 010 running 8).
		return badAt(n, fmt.Sprintf("%s has a leading 0, which YAML reads as octal (%s); write it without the 0, or as 0o… for octal", n.Value, octalValue(n)), path...)
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		return badAt(n, valueMessage(t, n, err), path...)
	}
	return nil
}

// checkExplicitZero refuses a 0 given for a field tagged default:"…",
// whose zero value means that default: runs: 0 would otherwise run the
// default 10 runs. A key left out, or left empty, keeps the default.
func checkExplicitZero(n *yaml.Node, f reflect.StructField, path []string) error {
	def, ok := f.Tag.Lookup("default")
	n = yamlnode.Resolve(n)
	if !ok || yamlnode.IsNull(n) {
		return nil
	}
	v := reflect.New(f.Type)
	if n.Decode(v.Interface()) != nil || !v.Elem().IsZero() {
		return nil
	}
	want := "must be above 0"
	if isWhole(f.Type) {
		want = "must be ≥ 1"
	}
	return badAt(n, fmt.Sprintf("%s, not %s (leave it out for the default, %s)", want, n.Value, def), path...)
}

// isWhole reports whether t holds whole numbers read as plain numbers.
func isWhole(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// checkMapping checks the keys and values of mapping n against struct t;
// seen maps the keys already given to their lines. A merge key ("<<", YAML
// 1.1) brings in the keys of another mapping, which keys given explicitly
// override.
func checkMapping(n *yaml.Node, t reflect.Type, path []string, seen map[string]int) error {
	fields := yamlFields(t)
	entries, merged, bad := yamlnode.Entries(n)
	for _, e := range entries {
		k, v := e.Key, e.Value
		if k.Kind != yaml.ScalarNode {
			return badAt(k, "a key must be a plain name, not "+describe(k), path...)
		}
		p := appendPath(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			return badAt(k, fmt.Sprintf("unknown field %q (known here: %s)", k.Value, strings.Join(sortedNames(fields), ", ")), p...)
		}
		if first, dup := seen[k.Value]; dup {
			return badAt(k, fmt.Sprintf("is given twice (first on line %d)", first), p...)
		}
		seen[k.Value] = k.Line
		if err := checkFields(v, f.Type, p); err != nil {
			return err
		}
		if err := checkExplicitZero(v, f, p); err != nil {
			return err
		}
	}
	for _, src := range merged {
		// Merged keys may repeat each other and the explicit keys.
		if err := checkMapping(src, t, path, map[string]int{}); err != nil {
			return err
		}
	}
	if bad != nil {
		return badAt(bad, "a merge (<<) must bring in a mapping or a list of mappings, not "+describe(bad), path...)
	}
	return nil
}

func appendPath(path []string, p string) []string {
	return append(append([]string(nil), path...), p)
}

// describe names what a node holds, for "must be X, not Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "an empty document"
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// valueMessage says what a value of type t must look like, without naming
// the Go type; types with their own YAML reader (Duration) give their own
// message.
func valueMessage(t reflect.Type, n *yaml.Node, err error) string {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return plainYAMLError(err)
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "must be a whole number, not " + describe(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "must be a whole number ≥ 0, not " + describe(n)
	case reflect.Float32, reflect.Float64:
		return "must be a number, not " + describe(n)
	case reflect.Bool:
		return "must be true or false, not " + describe(n)
	case reflect.String:
		return "must be text, not " + describe(n)
	case reflect.Map:
		return "must be a mapping with plain names as keys"
	}
	return plainYAMLError(err)
}

func isStructish(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerType)
}

// yamlFields maps a struct's YAML keys to its fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	_, fields := yamlnode.Keys(t)
	return fields
}

func sortedNames(m map[string]reflect.StructField) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var yamlLine = regexp.MustCompile(`(^|; )line \d+: `)

// plainYAMLError is a YAML error in the file's words (yamlnode.PlainError)
// without its line prefixes: the caller names the file, line and field.
func plainYAMLError(err error) string {
	return yamlLine.ReplaceAllString(yamlnode.PlainError(err), "$1")
}

// leadingZero matches an integer written with a leading 0 (010, -07),
// which YAML 1.1, and so the decoder, reads as octal.
var leadingZero = regexp.MustCompile(`^[-+]?0[0-9_]+$`)

// octalValue says what the decoder makes of n.
func octalValue(n *yaml.Node) string {
	var v int64
	if err := n.Decode(&v); err != nil {
		return "not a number"
	}
	return strconv.FormatInt(v, 10)
}
