package nccltopo

import (
	"errors"
	"fmt"
	"strings"
)

// parser reads a topology file with the grammar of NCCL's xmlGetNode and
// xmlLoadSub, stricter only where NCCL would silently misread: between
// elements spaces, newlines and carriage returns; an element's name ends
// at a space, '>' or '/'; attributes follow one space each as
// key="value" with no markup and no quote inside (no entities are
// decoded); comments are skipped; a close tag names the open element.
type parser struct {
	s    string
	i    int
	line int
}

func (p *parser) errf(format string, a ...any) error {
	return fmt.Errorf("line %d: %s", strings.Count(p.s[:p.i], "\n")+1, fmt.Sprintf(format, a...))
}

func (p *parser) parse() (*element, error) {
	root, err := p.next()
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, errors.New("empty file")
	}
	if root.close {
		return nil, p.errf("close tag </%s> before any element", root.e.name)
	}
	if err := p.children(root); err != nil {
		return nil, err
	}
	if rest, err := p.next(); err != nil {
		return nil, err
	} else if rest != nil {
		return nil, p.errf("element %s after the top element", rest.e.name)
	}
	return root.e, nil
}

type token struct {
	e      *element
	close  bool
	single bool
}

func (p *parser) children(t *token) error {
	if t.single {
		return nil
	}
	for {
		c, err := p.next()
		if err != nil {
			return err
		}
		if c == nil {
			return p.errf("unterminated %s", t.e.name)
		}
		if c.close {
			if c.e.name != t.e.name {
				return p.errf("</%s> closes %s", c.e.name, t.e.name)
			}
			return nil
		}
		t.e.subs = append(t.e.subs, c.e)
		if err := p.children(c); err != nil {
			return err
		}
	}
}

func (p *parser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// next reads one tag, nil at the end of the file.
func (p *parser) next() (*token, error) {
	for {
		p.skipSpace()
		if p.i == len(p.s) {
			return nil, nil
		}
		if p.s[p.i] != '<' {
			return nil, p.errf("expecting '<', got %q", p.s[p.i])
		}
		if strings.HasPrefix(p.s[p.i:], "<!--") {
			end := strings.Index(p.s[p.i+4:], "-->")
			if end < 0 {
				return nil, p.errf("unterminated comment")
			}
			p.i += 4 + end + 3
			continue
		}
		break
	}
	p.i++
	t := &token{e: &element{}}
	if p.i < len(p.s) && p.s[p.i] == '/' {
		t.close = true
		p.i++
	}
	name, err := p.word()
	if err != nil {
		return nil, err
	}
	t.e.name = name
	if t.close {
		if p.i >= len(p.s) || p.s[p.i] != '>' {
			return nil, p.errf("unexpected trailing characters in </%s", name)
		}
		p.i++
		return t, nil
	}
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
		key, err := p.word()
		if err != nil {
			return nil, err
		}
		if p.i >= len(p.s) || p.s[p.i] != '=' {
			return nil, p.errf("attribute %q of %s has no value", key, name)
		}
		p.i++
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.errf("attribute %s of %s: expected a double quote", key, name)
		}
		p.i++
		end := strings.IndexByte(p.s[p.i:], '"')
		if end < 0 {
			return nil, p.errf("attribute %s of %s: unterminated value", key, name)
		}
		v := p.s[p.i : p.i+end]
		if len(v) > maxStrLen {
			return nil, p.errf("attribute %s of %s: value of %d characters, more than %d", key, name, len(v), maxStrLen)
		}
		if strings.ContainsAny(v, "<>&\n\r\t") {
			return nil, p.errf("attribute %s of %s: value holds markup or a control character", key, name)
		}
		t.e.attrs = append(t.e.attrs, attr{key, v})
		p.i += end + 1
	}
	if p.i < len(p.s) && p.s[p.i] == '/' {
		t.single = true
		p.i++
	}
	if p.i >= len(p.s) || p.s[p.i] != '>' {
		return nil, p.errf("%s: expected '>'", name)
	}
	p.i++
	return t, nil
}

// word reads a tag or attribute name: letters, digits and '_'.
func (p *parser) word() (string, error) {
	start := p.i
	for p.i < len(p.s) {
		ch := p.s[p.i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' {
			p.i++
			continue
		}
		break
	}
	if p.i == start {
		return "", p.errf("expected a name")
	}
	if p.i-start > maxStrLen {
		return "", p.errf("name of %d characters, more than %d", p.i-start, maxStrLen)
	}
	return p.s[start:p.i], nil
}
