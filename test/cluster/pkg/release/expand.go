package release

import (
	"fmt"
	"strings"
)

// args are the ARGs in scope: a name with a nil value is declared without
// a default.
type args map[string]*string

// declare adds ARG words (NAME or NAME=value, the value maybe quoted);
// inherit gives a bare NAME the default it has in outer (a stage's ARG
// redeclaring a global one).
func (a args) declare(words []word, outer args) {
	for _, w := range words {
		name, value, ok := strings.Cut(w.text, "=")
		switch {
		case ok:
			v := unquote(value)
			a[name] = &v
		case outer[name] != nil:
			a[name] = outer[name]
		default:
			a[name] = nil
		}
	}
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// expand substitutes $NAME, ${NAME}, ${NAME:-word} and ${NAME:+word} as
// the builder does with the ARGs' defaults: the image a line names when no
// --build-arg overrides them, which is the one a release builds.
func (a args) expand(s string, escape byte) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == escape && i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			v, err := a.braced(s[i+2 : i+end])
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += end
			continue
		}
		n := nameLen(s[i+1:])
		if n == 0 {
			b.WriteByte(c)
			continue
		}
		v, err := a.value(s[i+1 : i+1+n])
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		i += n
	}
	return b.String(), nil
}

// braced is the value of what stands between ${ and }.
func (a args) braced(expr string) (string, error) {
	n := nameLen(expr)
	name, op := expr[:n], expr[n:]
	if n == 0 {
		return "", fmt.Errorf("bad substitution ${%s}", expr)
	}
	switch {
	case op == "":
		return a.value(name)
	case strings.HasPrefix(op, ":-"):
		if v := a[name]; v != nil && *v != "" {
			return *v, nil
		}
		return a.expand(op[2:], 0)
	case strings.HasPrefix(op, ":+"):
		if v := a[name]; v != nil && *v != "" {
			return a.expand(op[2:], 0)
		}
		return "", nil
	}
	return "", fmt.Errorf("unsupported substitution ${%s}", expr)
}

func (a args) value(name string) (string, error) {
	v, declared := a[name]
	switch {
	case !declared:
		return "", fmt.Errorf("$%s is not an ARG in scope", name)
	case v == nil:
		return "", fmt.Errorf("ARG %s has no default", name)
	}
	return *v, nil
}

func nameLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return i
	}
	return len(s)
}
