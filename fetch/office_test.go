package fetch

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract"
)

// officeFixture reads a document of extract's comparison fixtures.
func officeFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../extract/testdata/formats/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGetOfficeDocuments reads office documents, e-books, CSV and RTF
// links as Markdown, whatever type the server declares.
func TestGetOfficeDocuments(t *testing.T) {
	s := newSite(t)
	docx := officeFixture(t, "contract.docx")
	s.serve("/contract.docx", extract.MIMEDOCX, docx)
	s.serve("/get/7", "application/octet-stream", docx)
	s.serve("/files/contract", "application/zip", docx)
	s.serve("/deck.pptx", extract.MIMEPPTX, officeFixture(t, "deck.pptx"))
	s.serve("/budget.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet; charset=binary", officeFixture(t, "budget.xlsx"))
	s.serve("/budget.ods", "", officeFixture(t, "budget.ods"))
	s.serve("/book.epub", extract.MIMEEPUB, officeFixture(t, "book.epub"))
	s.serve("/contract.rtf", "application/rtf", officeFixture(t, "contract.rtf"))
	s.serve("/data.csv", "text/csv", []byte("Name,Amount\nalpha,1\nbeta,2\n"))
	s.serve("/plain.csv", "text/plain", []byte("Name;Amount\ngamma;3\n"))
	s.serve("/old.doc", "application/msword", officeFixture(t, "contract.doc"))
	s.serve("/old-octets.doc", "application/octet-stream", officeFixture(t, "contract.doc"))
	c := newClient(t, Options{AllowPrivate: true})

	tests := []struct {
		path, ctype, title string
		sub                []string
		err                error
		errText            string
	}{
		{path: "/contract.docx", ctype: extract.MIMEDOCX, title: "contract.docx",
			sub: []string{"# Scope of Work\n\nThe firm will deliver", "| One | Export and checking | 6 | 4,000 |", "1. Export every record"}},
		{path: "/get/7", ctype: extract.MIMEDOCX, sub: []string{"## Stage Timetable"}},
		{path: "/files/contract", ctype: extract.MIMEDOCX, sub: []string{"## Stage Timetable"}},
		{path: "/deck.pptx", ctype: extract.MIMEPPTX, title: "deck.pptx", sub: []string{"## Slide 4: Timetable by Route", "| Harbour to Pelham | 12 | 71 percent |"}},
		{path: "/budget.xlsx", ctype: extract.MIMEXLSX, sub: []string{"## Sheet: Budget", "## Sheet: Staff\n\n| Name | Role | Start date | Hours per week |"}},
		{path: "/budget.ods", ctype: extract.MIMEODS, sub: []string{"## Sheet: Notes"}},
		{path: "/book.epub", ctype: extract.MIMEEPUB, sub: []string{"Sea Lavender"}},
		{path: "/contract.rtf", ctype: extract.MIMERTF, sub: []string{"# Payment and Term"}},
		{path: "/data.csv", ctype: extract.MIMECSV, sub: []string{"| Name | Amount |\n|---|---|\n| alpha | 1 |\n| beta | 2 |"}},
		{path: "/plain.csv", ctype: extract.MIMECSV, sub: []string{"| gamma | 3 |"}},
		{path: "/old.doc", err: ErrUnsupportedType, errText: "application/msword"},
		{path: "/old-octets.doc", err: ErrUnsupportedType, errText: "legacy Word 97-2003 document (.doc): save it as .docx"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			d, err := c.Get(t.Context(), s.URL+tt.path)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want %v naming %q", err, tt.err, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if d.ContentType != tt.ctype || tt.title != "" && d.Title != tt.title {
				t.Errorf("ContentType %q Title %q, want %q %q", d.ContentType, d.Title, tt.ctype, tt.title)
			}
			for _, w := range tt.sub {
				if !strings.Contains(d.Content, w) {
					t.Errorf("Content lacks %q:\n%s", w, d.Content)
				}
			}
		})
	}
	// A stored page keeps a name its type can be told from.
	r, err := c.Download(t.Context(), s.URL+"/files/contract")
	if err != nil || r.ContentType != extract.MIMEDOCX || r.FileName() != "contract.docx" {
		t.Errorf("Download = %+v, %v; want a DOCX named contract.docx", r, err)
	}
}
