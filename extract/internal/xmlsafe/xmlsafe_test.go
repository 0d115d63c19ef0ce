package xmlsafe

import (
	"encoding/xml"
	"errors"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// TestTreeBudget checks that Parse and Subtree refuse a part whose tree
// would take more than the budget (MaxTreeBytes, here 4 MiB), counting
// elements, attributes and text, and read one just within it.
func TestTreeBudget(t *testing.T) {
	defer func(b int) { treeBudget = b }(treeBudget)
	treeBudget = 4 << 20
	element := nodeCost + len("a")
	// The elements a tree of the budget holds, the root <r> included.
	fit := treeBudget / element
	for _, c := range []struct {
		name string
		xml  string
		ok   bool
	}{
		{"elements within the budget", "<r>" + strings.Repeat("<a/>", fit-1) + "</r>", true},
		{"elements past it", "<r>" + strings.Repeat("<a/>", fit+1) + "</r>", false},
		{"attributes past it", "<r>" + strings.Repeat(`<a x="1" y="2" z="3"/>`, treeBudget/(element+3*(attrCost+2))+1) + "</r>", false},
		{"text nodes past it", "<r>" + strings.Repeat("<a/> ", fit/2+1) + "</r>", false},
	} {
		_, err := Parse(strings.NewReader(c.xml), "part.xml")
		d := NewDecoder(strings.NewReader(c.xml), "part.xml")
		tok, _ := d.Token()
		_, subErr := d.Subtree(tok.(xml.StartElement))
		for _, err := range []error{err, subErr} {
			switch {
			case c.ok && err != nil:
				t.Errorf("%s: %v", c.name, err)
			case !c.ok && (!errors.Is(err, textdoc.ErrTooLarge) || !strings.Contains(err.Error(), "limit of a part read whole")):
				t.Errorf("%s: %v, want ErrTooLarge naming the limit", c.name, err)
			}
		}
	}
}
