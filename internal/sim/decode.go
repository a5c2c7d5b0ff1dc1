package sim

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml2 "go.yaml.in/yaml/v2"
	yaml "go.yaml.in/yaml/v3"
)

// The decoder walks a yaml.Node tree itself instead of using yaml.Decoder
// with KnownFields: that way every error names the field's path
// (gpus[3].pciBusID) as well as its line, and it records the line of every
// path it fills so that the semantic checks in build.go can point at the
// right line too.

// fieldError is an error about one place in a machine file.
type fieldError struct {
	Line int
	Path string
	Msg  string
}

func (e *fieldError) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %s", e.Path, e.Msg)
	}
	if e.Path == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Path, e.Msg)
}

// lineIndex maps a field path (gpus[3].pciBusID) to the line it is on.
type lineIndex map[string]int

// line returns the line of path, or of its closest written ancestor when the
// field itself was left out (a missing required field is reported on the
// line of the mapping that lacks it).
func (l lineIndex) line(path string) int {
	for p := path; ; {
		if n, ok := l[p]; ok {
			return n
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return l[""]
		}
		p = p[:i]
	}
}

// decodeStrict decodes a machine file into out (a pointer to a struct),
// rejecting unknown and duplicate fields and values of the wrong type.
func decodeStrict(data []byte, out any) (lineIndex, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlSyntaxError(data, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &fieldError{Line: 1, Msg: "the file is empty"}
	}
	d := &decoder{lines: lineIndex{"": 1}}
	if err := d.decode(doc.Content[0], reflect.ValueOf(out).Elem(), ""); err != nil {
		return nil, err
	}
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return d.lines, nil
}

// Syntax errors. go.yaml.in/yaml/v3 reports the line where the broken
// construct starts (an unclosed "[" on line 10), yaml/v2 the line where the
// parser noticed the problem (the next key on line 11): the error names the
// second and mentions the first when they differ. Both print the 0-based line
// for parser (not scanner) problems, which yamlLine corrects.
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// yamlLine splits "yaml: line 5: problem" into a 1-based line and the
// problem; line 0 when the message has none.
func yamlLine(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 0, msg
	}
	num, tail, ok := strings.Cut(rest, ": ")
	n, convErr := strconv.Atoi(num)
	if !ok || convErr != nil {
		return 0, msg
	}
	if yamlParserProblems[tail] {
		n++
	}
	return n, tail
}

// yamlSyntaxError turns a yaml/v3 syntax error into a fieldError with a
// 1-based line, so syntax errors read like every other error.
func yamlSyntaxError(data []byte, err error) error {
	start, problem := yamlLine(err)
	line := start
	var probe any
	if err2 := yaml2.Unmarshal(data, &probe); err2 != nil {
		if n, _ := yamlLine(err2); n > 0 {
			line = n
		}
	}
	msg := "invalid YAML: " + problem
	if start > 0 && start < line {
		msg += fmt.Sprintf(" (in what starts on line %d)", start)
	}
	if line == 0 {
		line = 1
	}
	return &fieldError{Line: line, Msg: msg}
}

type decoder struct {
	lines lineIndex
	depth int
	// errs are the problems found so far: decoding goes on past one, so a
	// file's every type error is reported in one run.
	errs []error
}

// fail records a problem of the file; decoding goes on with the next field.
func (d *decoder) fail(err error) error {
	d.errs = append(d.errs, err)
	return nil
}

// maxAliasDepth bounds alias chains so a hostile file cannot loop us.
const maxAliasDepth = 32

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.AliasNode {
		if d.depth >= maxAliasDepth {
			return d.fail(&fieldError{Line: n.Line, Path: path, Msg: "aliases nest too deeply"})
		}
		d.depth++
		defer func() { d.depth-- }()
		return d.decode(n.Alias, v, path)
	}
	if _, seen := d.lines[path]; !seen {
		d.lines[path] = n.Line
	}
	if isNull(n) {
		// An explicit null leaves the zero value, like an omitted field.
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		if err := d.decode(n, elem.Elem(), path); err != nil {
			return err
		}
		v.Set(elem)
		return nil
	case reflect.Struct:
		return d.decodeStruct(n, v, path)
	case reflect.Slice:
		return d.decodeSlice(n, v, path)
	case reflect.Map:
		return d.decodeMap(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return d.fail(wantError(n, path, "a string"))
		}
		v.SetString(n.Value)
		return nil
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			return d.fail(wantError(n, path, "an integer"))
		}
		var i int64
		if err := n.Decode(&i); err != nil {
			return d.fail(&fieldError{Line: n.Line, Path: path, Msg: fmt.Sprintf("%q is not an integer", n.Value)})
		}
		if v.OverflowInt(i) {
			return d.fail(&fieldError{Line: n.Line, Path: path, Msg: fmt.Sprintf("%s is out of range", n.Value)})
		}
		v.SetInt(i)
		return nil
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			return d.fail(wantError(n, path, "true or false"))
		}
		var b bool
		if err := n.Decode(&b); err != nil {
			return d.fail(wantError(n, path, "true or false"))
		}
		v.SetBool(b)
		return nil
	}
	// Only the types in format.go reach here; anything else is a bug.
	return fmt.Errorf("sim: decoder cannot fill %s at %s", v.Type(), path)
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.fail(wantError(n, path, "a mapping"))
	}
	fields := structFields(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			return d.fail(&fieldError{Line: k.Line, Path: path, Msg: "merge keys (<<) are not supported; use a gpuTypes entry instead"})
		}
		fieldPath := join(path, k.Value)
		idx, ok := fields[k.Value]
		if !ok {
			d.fail(&fieldError{Line: k.Line, Path: fieldPath, Msg: fmt.Sprintf("unknown field (known fields: %s)", knownFields(fields))})
			continue
		}
		if seen[k.Value] {
			d.fail(&fieldError{Line: k.Line, Path: fieldPath, Msg: "field appears twice"})
			continue
		}
		seen[k.Value] = true
		d.lines[fieldPath] = k.Line
		if err := d.decode(val, v.Field(idx), fieldPath); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.SequenceNode {
		return d.fail(wantError(n, path, "a list"))
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	v.Set(s)
	return nil
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.fail(wantError(n, path, "a mapping"))
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		keyPath := join(path, k.Value)
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			d.fail(&fieldError{Line: k.Line, Path: path, Msg: "keys must be non-empty strings"})
			continue
		}
		if m.MapIndex(reflect.ValueOf(k.Value)).IsValid() {
			d.fail(&fieldError{Line: k.Line, Path: keyPath, Msg: "key appears twice"})
			continue
		}
		d.lines[keyPath] = k.Line
		elem := reflect.New(v.Type().Elem()).Elem()
		if err := d.decode(val, elem, keyPath); err != nil {
			return err
		}
		m.SetMapIndex(reflect.ValueOf(k.Value), elem)
	}
	v.Set(m)
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func wantError(n *yaml.Node, path, want string) error {
	return &fieldError{Line: n.Line, Path: path, Msg: fmt.Sprintf("want %s, got %s", want, describe(n))}
}

// describe says what a node is, for type errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// structFields maps yaml tag names to field indices.
func structFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

func knownFields(fields map[string]int) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
