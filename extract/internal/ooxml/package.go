// Package ooxml reads Office Open XML documents: Word (DOCX), PowerPoint
// (PPTX) and Excel (XLSX) files, transitional or strict, macro-enabled or
// not (macros are never read). Parts are found through the package's
// relationships, not by file name, and read within the limits of package
// archive and xmlsafe.
package ooxml

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// maxSmallPart bounds the parts read whole into a tree: relationships,
// styles, numbering, slides, notes.
const maxSmallPart = 64 << 20

// rel is one relationship of a part.
type rel struct {
	ID, Type, Target string
	External         bool
}

// is reports whether the relationship's type ends with /kind, in the
// transitional or the strict namespace.
func (r rel) is(kind string) bool {
	return strings.HasSuffix(r.Type, "/"+kind)
}

// relsPath returns the name of the relationships part of part.
func relsPath(part string) string {
	dir, file := path.Split(part)
	return dir + "_rels/" + file + ".rels"
}

// readRels returns the relationships of part, with internal targets
// resolved to entry names; none when the part has no relationships.
func readRels(a *archive.Archive, part string) ([]rel, error) {
	name := relsPath(part)
	if part == "" {
		name = "_rels/.rels"
	}
	root, err := parsePart(a, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []rel
	for _, n := range root.Children("Relationship") {
		r := rel{ID: n.A("Id"), Type: n.A("Type"), Target: n.A("Target"), External: n.A("TargetMode") == "External"}
		if !r.External {
			r.Target = archive.Resolve(part, r.Target)
		}
		out = append(out, r)
	}
	return out, nil
}

// byID indexes relationships by id.
func byID(rels []rel) map[string]rel {
	m := make(map[string]rel, len(rels))
	for _, r := range rels {
		m[r.ID] = r
	}
	return m
}

// first returns the target of the first relationship of kind, "" if none.
func first(rels []rel, kind string) string {
	for _, r := range rels {
		if r.is(kind) && !r.External {
			return r.Target
		}
	}
	return ""
}

// mainPart returns the package's main document part, from the package
// relationships, or fallback when they name none.
func mainPart(a *archive.Archive, fallback string) (string, error) {
	rels, err := readRels(a, "")
	if err != nil {
		return "", err
	}
	if p := first(rels, "officeDocument"); p != "" && a.Has(p) {
		return p, nil
	}
	if a.Has(fallback) {
		return fallback, nil
	}
	return "", fmt.Errorf("%w: the package names no main document part", textdoc.ErrCorrupt)
}

// parsePart reads a small part whole into a tree.
func parsePart(a *archive.Archive, name string) (*xmlsafe.Node, error) {
	if a.Size(name) > maxSmallPart {
		return nil, fmt.Errorf("%w: %s inflates to more than %d bytes", textdoc.ErrTooLarge, name, maxSmallPart)
	}
	rc, err := a.Open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return xmlsafe.Parse(rc, name)
}

// openPart returns a streaming decoder of a part, and a function closing it.
func openPart(a *archive.Archive, name string) (*xmlsafe.Decoder, func(), error) {
	rc, err := a.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return xmlsafe.NewDecoder(rc, name), func() { rc.Close() }, nil
}

// hasMacros reports whether the package holds a VBA project.
func hasMacros(a *archive.Archive) bool {
	for _, n := range a.Names() {
		if strings.HasSuffix(strings.ToLower(n), "vbaproject.bin") {
			return true
		}
	}
	return false
}

// noText is the error for a package without text: a macro-only file when
// it holds a VBA project.
func noText(a *archive.Archive, what string) error {
	if hasMacros(a) {
		return fmt.Errorf("%w: the %s holds only macros (VBA), which are not read: upload a file with the text itself", textdoc.ErrUnsupported, what)
	}
	return fmt.Errorf("%w: the %s holds no text", textdoc.ErrNoText, what)
}

// checkEvery is how many tokens a streaming reader reads between looks at
// its context.
const checkEvery = 4096

// ticker counts tokens and reports the context's end every checkEvery.
type ticker struct {
	ctx context.Context
	n   int
}

func (t *ticker) tick() error {
	t.n++
	if t.n%checkEvery == 0 {
		return t.ctx.Err()
	}
	return nil
}
