package nccltopo

import (
	"bytes"
	"strconv"
)

// element is one XML element as NCCL's parser reads it: a name, attributes
// in order, children.
type element struct {
	name  string
	attrs []attr
	subs  []*element
}

type attr struct{ key, value string }

func el(name string, kv ...string) *element {
	e := &element{name: name, attrs: make([]attr, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		e.attrs = append(e.attrs, attr{kv[i], kv[i+1]})
	}
	return e
}

func (e *element) add(c *element) *element { e.subs = append(e.subs, c); return c }

func itoa(i int) string { return strconv.Itoa(i) }

// write emits e as NCCL dumps a topology: two spaces of indent a level,
// one space before each attribute, values in double quotes, childless
// elements closed with "/>", nothing but spaces and newlines between
// elements (NCCL's parser takes no tabs). Values never hold quotes or
// markup: Build writes only bus IDs, numbers and names it checked.
func (e *element) write(b *bytes.Buffer, indent int) {
	for range indent {
		b.WriteByte(' ')
	}
	b.WriteByte('<')
	b.WriteString(e.name)
	for _, a := range e.attrs {
		b.WriteByte(' ')
		b.WriteString(a.key)
		b.WriteString(`="`)
		b.WriteString(a.value)
		b.WriteByte('"')
	}
	if len(e.subs) == 0 {
		b.WriteString("/>\n")
		return
	}
	b.WriteString(">\n")
	for _, c := range e.subs {
		c.write(b, indent+2)
	}
	for range indent {
		b.WriteByte(' ')
	}
	b.WriteString("</")
	b.WriteString(e.name)
	b.WriteString(">\n")
}
