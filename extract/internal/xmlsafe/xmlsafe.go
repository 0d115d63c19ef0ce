// Package xmlsafe reads the XML parts of office files and e-books within
// limits: nesting depth, element count, and no entity declarations, so that
// a "billion laughs" file or one nested a million levels deep is refused at
// once. It offers a streaming Decoder for large parts (a document body, a
// sheet) and a small tree (Parse) for the rest.
package xmlsafe

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/html/charset"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// Default limits.
const (
	// MaxDepth bounds element nesting. Office documents nest a few dozen
	// levels (tables in tables in text boxes); 256 leaves room.
	MaxDepth = 256
	// MaxNodes bounds the elements of a tree built by Parse or Subtree.
	MaxNodes = 4 << 20
	// MaxTreeBytes bounds the memory a tree built by Parse or Subtree
	// takes, as estimated from its nodes, names, attributes and text (a
	// bare element takes about 128 bytes): 64 MiB holds half a million
	// elements, more than any part read whole is given.
	MaxTreeBytes = 64 << 20
)

// treeBudget is MaxTreeBytes, but in tests.
var treeBudget = MaxTreeBytes

// Estimated costs of a tree's parts, in bytes: a node (its struct and its
// place in its parent's list) and an attribute.
const (
	nodeCost = 128
	attrCost = 64
)

// tree counts what a tree being built holds, against MaxNodes and
// MaxTreeBytes.
type tree struct {
	part         string
	nodes, bytes int
}

// element returns the node of an element start.
func (tr *tree) element(t xml.StartElement) (*Node, error) {
	tr.nodes++
	if tr.nodes > MaxNodes {
		return nil, fmt.Errorf("%w: %s holds more than %d elements", textdoc.ErrTooLarge, tr.part, MaxNodes)
	}
	tr.bytes += nodeCost + len(t.Name.Local)
	for _, a := range t.Attr {
		tr.bytes += attrCost + len(a.Name.Local) + len(a.Value)
	}
	if tr.bytes > treeBudget {
		return nil, tr.tooLarge()
	}
	return &Node{Name: t.Name, Attr: t.Attr}, nil
}

// text returns the node of character data.
func (tr *tree) text(t xml.CharData) (*Node, error) {
	if tr.bytes += nodeCost + len(t); tr.bytes > treeBudget {
		return nil, tr.tooLarge()
	}
	return &Node{Text: string(t)}, nil
}

func (tr *tree) tooLarge() error {
	return fmt.Errorf("%w: %s would take more than %d MiB of memory read whole (the limit of a part read whole)", textdoc.ErrTooLarge, tr.part, treeBudget>>20)
}

// Decoder is an xml.Decoder that refuses entity declarations and nesting
// deeper than MaxDepth. Errors wrap textdoc.ErrCorrupt or ErrTooLarge.
type Decoder struct {
	d     *xml.Decoder
	depth int
	part  string
}

// NewDecoder returns a Decoder reading the part named part (for messages)
// from r. It reads any encoding the part declares, and is lenient with
// unknown entities and mismatched tags as office applications are.
func NewDecoder(r io.Reader, part string) *Decoder {
	d := xml.NewDecoder(r)
	d.Strict = false
	d.CharsetReader = charset.NewReaderLabel
	return &Decoder{d: d, part: part}
}

// Token returns the next token, io.EOF at the end. Character data is copied
// and stays valid.
func (d *Decoder) Token() (xml.Token, error) {
	tok, err := d.d.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if errors.Is(err, textdoc.ErrTooLarge) || errors.Is(err, textdoc.ErrCorrupt) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s: %v", textdoc.ErrCorrupt, d.part, err)
	}
	switch t := tok.(type) {
	case xml.StartElement:
		d.depth++
		if d.depth > MaxDepth {
			return nil, fmt.Errorf("%w: %s nests elements deeper than %d levels", textdoc.ErrTooLarge, d.part, MaxDepth)
		}
	case xml.EndElement:
		d.depth--
	case xml.Directive:
		if bytes.Contains(t, []byte("ENTITY")) {
			return nil, fmt.Errorf("%w: %s declares XML entities, which documents never need (an entity expansion attack?)", textdoc.ErrCorrupt, d.part)
		}
	case xml.CharData:
		return t.Copy(), nil
	}
	return tok, nil
}

// Skip skips the rest of the element whose start was just read.
func (d *Decoder) Skip() error {
	for depth := 1; depth > 0; {
		tok, err := d.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
	}
	return nil
}

// Node is an element of a tree built by Parse, or a text node when
// Name.Local is "".
type Node struct {
	Name xml.Name
	Attr []xml.Attr
	Kids []*Node
	Text string
}

// Parse reads a whole part as a tree. Meant for parts of bounded size
// (relationships, styles, a slide, a package manifest): the tree takes a
// few times the part's size, and a part whose tree would take more than
// MaxTreeBytes, or hold more than MaxNodes elements, fails with
// textdoc.ErrTooLarge.
func Parse(r io.Reader, part string) (*Node, error) {
	d := NewDecoder(r, part)
	root := &Node{}
	stack := []*Node{root}
	tr := tree{part: part}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		top := stack[len(stack)-1]
		switch t := tok.(type) {
		case xml.StartElement:
			n, err := tr.element(t)
			if err != nil {
				return nil, err
			}
			top.Kids = append(top.Kids, n)
			stack = append(stack, n)
		case xml.EndElement:
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if len(t) > 0 {
				n, err := tr.text(t)
				if err != nil {
					return nil, err
				}
				top.Kids = append(top.Kids, n)
			}
		}
	}
	for _, k := range root.Kids {
		if k.Name.Local != "" {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: %s has no root element", textdoc.ErrCorrupt, part)
}

// IsText reports whether n is a text node.
func (n *Node) IsText() bool {
	return n != nil && n.Name.Local == ""
}

// A returns the value of the attribute named local in no namespace or any
// namespace, the first one found; "" when there is none or n is nil. Like
// every method of Node it accepts a nil n, so that lookups chain.
func (n *Node) A(local string) string {
	if n == nil {
		return ""
	}
	for _, a := range n.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// AIn returns the value of the attribute named local whose namespace URI
// ends with spaceSuffix, such as "/relationships" for r:id in both the
// transitional and the strict OOXML namespaces.
func (n *Node) AIn(spaceSuffix, local string) string {
	if n == nil {
		return ""
	}
	for _, a := range n.Attr {
		if a.Name.Local == local && strings.HasSuffix(a.Name.Space, spaceSuffix) {
			return a.Value
		}
	}
	return ""
}

// Child returns the first child element named local, or nil.
func (n *Node) Child(local string) *Node {
	if n == nil {
		return nil
	}
	for _, k := range n.Kids {
		if k.Name.Local == local {
			return k
		}
	}
	return nil
}

// Children returns the child elements named local.
func (n *Node) Children(local string) []*Node {
	if n == nil {
		return nil
	}
	var out []*Node
	for _, k := range n.Kids {
		if k.Name.Local == local {
			out = append(out, k)
		}
	}
	return out
}

// Find returns the first descendant element named local, depth first, or
// nil.
func (n *Node) Find(local string) *Node {
	if n == nil {
		return nil
	}
	for _, k := range n.Kids {
		if k.Name.Local == local {
			return k
		}
		if f := k.Find(local); f != nil {
			return f
		}
	}
	return nil
}

// FindAll returns every descendant element named local, in document order.
func (n *Node) FindAll(local string) []*Node {
	var out []*Node
	n.Walk(func(k *Node) bool {
		if k.Name.Local == local {
			out = append(out, k)
		}
		return true
	})
	return out
}

// Walk calls fn on every descendant of n in document order; fn returning
// false skips that node's own descendants.
func (n *Node) Walk(fn func(*Node) bool) {
	if n == nil {
		return
	}
	for _, k := range n.Kids {
		if fn(k) {
			k.Walk(fn)
		}
	}
}

// AllText returns the concatenated text of n's descendants.
func (n *Node) AllText() string {
	var b strings.Builder
	n.Walk(func(k *Node) bool {
		b.WriteString(k.Text)
		return true
	})
	return b.String()
}

// Subtree reads the element whose start was just read, up to its end, as
// a tree: for the small parts of a large streamed part, such as the styles
// ahead of a document's body.
func (d *Decoder) Subtree(start xml.StartElement) (*Node, error) {
	root := &Node{Name: start.Name, Attr: start.Attr}
	stack := []*Node{root}
	tr := tree{part: d.part}
	for len(stack) > 0 {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return root, nil
		}
		if err != nil {
			return nil, err
		}
		top := stack[len(stack)-1]
		switch t := tok.(type) {
		case xml.StartElement:
			n, err := tr.element(t)
			if err != nil {
				return nil, err
			}
			top.Kids = append(top.Kids, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(t) > 0 {
				n, err := tr.text(t)
				if err != nil {
					return nil, err
				}
				top.Kids = append(top.Kids, n)
			}
		}
	}
	return root, nil
}
