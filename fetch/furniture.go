package fetch

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// furnitureWords are the class and id words of a page's furniture: the
// navigation bars, menus, sidebars, breadcrumbs, tables of contents and
// footers that repeat on every page of a site ("navheader" and "navfooter"
// hold the "Prev / Up / Home / Next" bars of DocBook manuals).
var furnitureWords = map[string]bool{
	"nav": true, "navbar": true, "navheader": true, "navfooter": true, "navigation": true, "menu": true,
	"sidebar": true, "breadcrumb": true, "breadcrumbs": true, "toc": true, "footer": true, "skip": true,
	"skiplink": true, "cookie": true, "cookies": true, "banner": true,
}

// furniture reports whether n is page furniture rather than content: a
// nav, aside, form, script, style, noscript, template or iframe element; a
// header or footer that is not part of an article or main element; an
// element whose role is navigation, banner, contentinfo or complementary;
// or one whose class or id holds one of furnitureWords.
func furniture(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	switch n.DataAtom {
	case atom.Nav, atom.Aside, atom.Form, atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Iframe, atom.Button:
		return true
	case atom.Header, atom.Footer:
		for p := n.Parent; p != nil; p = p.Parent {
			if p.DataAtom == atom.Article || p.DataAtom == atom.Main {
				return false
			}
		}
		return true
	}
	for _, a := range n.Attr {
		switch a.Key {
		case "role":
			switch strings.ToLower(a.Val) {
			case "navigation", "banner", "contentinfo", "complementary", "search":
				return true
			}
		case "class", "id":
			for _, w := range strings.FieldsFunc(strings.ToLower(a.Val), func(r rune) bool {
				return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
			}) {
				if furnitureWords[w] {
					return true
				}
			}
		case "hidden", "aria-hidden":
			if a.Key == "hidden" || a.Val == "true" {
				return true
			}
		}
	}
	return false
}

// contentRunes counts the characters of n's text outside furniture, white
// space runs counted once.
func contentRunes(n *html.Node) int {
	count := 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch {
		case n.Type == html.TextNode:
			space := true
			for _, r := range n.Data {
				isSpace := r == ' ' || r == '\n' || r == '\t' || r == '\r' || r == '\f'
				if !isSpace || !space {
					count++
				}
				space = isSpace
			}
			return
		case furniture(n):
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return count
}

// dropFurniture removes every furniture element from the tree under n.
func dropFurniture(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if furniture(c) {
			n.RemoveChild(c)
		} else {
			dropFurniture(c)
		}
		c = next
	}
}
