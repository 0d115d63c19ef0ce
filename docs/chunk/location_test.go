package chunk

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/extract"
)

// spannedDoc joins parts as blocks ("\n\n" between, owned by the part
// before) with one span per part holding its location.
func spannedDoc(locs []extract.Location, breaks []bool, parts ...string) *extract.Document {
	doc := &extract.Document{}
	pos := 0
	for i, p := range parts {
		if i < len(parts)-1 {
			p += "\n\n"
		}
		n := utf8.RuneCountInString(p)
		doc.Text += p
		doc.Spans = append(doc.Spans, extract.Span{Start: pos, End: pos + n, Location: locs[i], Break: breaks[i]})
		pos += n
	}
	doc.Pages = []extract.Page{{Number: 0, Start: 0, End: pos}}
	return doc
}

// TestSplitPageSpans checks that the page spans the PDF reader adds leave
// the chunks of a paged document as they were, and give each chunk its
// pages as a Location.
func TestSplitPageSpans(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		doc := randomDoc(r, r.IntN(4000))
		opts := Options{Size: 100 + r.IntN(900)}
		opts.Overlap = r.IntN(opts.Size / 2)
		plain := Split(doc, opts)
		withSpans := *doc
		for _, p := range doc.Pages {
			if p.End > p.Start {
				withSpans.Spans = append(withSpans.Spans, extract.Span{Start: p.Start, End: p.End,
					Location: extract.Location{PageStart: p.Number, PageEnd: p.Number}})
			}
		}
		got := Split(&withSpans, opts)
		if len(got) != len(plain) {
			t.Fatalf("doc %d: %d chunks with page spans, %d without", i, len(got), len(plain))
		}
		for j := range got {
			loc := got[j].Location
			got[j].Location = extract.Location{}
			if !reflect.DeepEqual(got[j], plain[j]) {
				t.Fatalf("doc %d chunk %d: %+v with page spans, %+v without", i, j, got[j], plain[j])
			}
			if loc.PageStart != plain[j].PageStart || loc.PageEnd != plain[j].PageEnd {
				t.Errorf("doc %d chunk %d: location %+v, pages %d-%d", i, j, loc, plain[j].PageStart, plain[j].PageEnd)
			}
		}
	}
}

// TestSplitBreak checks that no chunk runs from one sheet into the next,
// however small the sheets.
func TestSplitBreak(t *testing.T) {
	var locs []extract.Location
	var breaks []bool
	var parts []string
	for i, sheet := range []string{"A", "A", "B", "C", "C"} {
		locs = append(locs, extract.Location{Sheet: sheet, Cells: "A1:B2"})
		breaks = append(breaks, i == 0 || sheet != locs[i-1].Sheet)
		parts = append(parts, "| h1 | h2 |\n|---|---|\n| "+sheet+" | "+strings.Repeat("v ", 20+i*30)+"|")
	}
	doc := spannedDoc(locs, breaks, parts...)
	opts := Options{Size: 200, Overlap: 30}
	chunks := Split(doc, opts)
	checkChunks(t, doc, opts, chunks)
	for _, c := range chunks {
		for _, s := range doc.Spans {
			if s.Break && c.Start < s.Start && c.End > s.Start {
				t.Errorf("chunk [%d,%d) %q runs into sheet %s at %d", c.Start, c.End, c.Content, s.Location.Sheet, s.Start)
			}
		}
		if c.Location.Sheet == "" || !strings.Contains(c.Content, "| "+c.Location.Sheet+" |") && !strings.HasPrefix(c.Content, "v") {
			t.Errorf("chunk %q located at %+v", c.Content, c.Location)
		}
	}
}

// TestSplitSlides checks chunk locations across slides: a chunk holding two
// short slides names both and the first title.
func TestSplitSlides(t *testing.T) {
	locs := []extract.Location{
		{SlideStart: 1, SlideEnd: 1, SlideTitle: "Welcome"},
		{SlideStart: 2, SlideEnd: 2, SlideTitle: "Numbers"},
		{SlideStart: 3, SlideEnd: 3, SlideTitle: "Plans"},
	}
	doc := spannedDoc(locs, make([]bool, 3),
		"## Slide 1: Welcome\n\nHello.",
		"## Slide 2: Numbers\n\n"+strings.Repeat("Crossings rose. ", 10),
		"## Slide 3: Plans\n\n"+strings.Repeat("A later sailing on Fridays. ", 30))
	opts := Options{Size: 400, Overlap: 50}
	chunks := Split(doc, opts)
	checkChunks(t, doc, opts, chunks)
	if got := chunks[0].Location.String(); got != "slides 1-2 (Welcome)" {
		t.Errorf("first chunk at %q, want slides 1-2 (Welcome)", got)
	}
	last := chunks[len(chunks)-1]
	if got := last.Location.String(); got != "slide 3 (Plans)" {
		t.Errorf("last chunk at %q, want slide 3 (Plans)", got)
	}
	// The overlap does not reach back over a slide's start.
	for _, c := range chunks[1:] {
		if c.Location.SlideStart == 3 && !strings.HasPrefix(c.Content, "## Slide 3") && c.Start == doc.Spans[2].Start {
			t.Errorf("chunk %q", c.Content)
		}
	}
}

// TestSplitSheetHeaders reads a workbook and checks that every chunk of a
// sheet carries the sheet's header row, as the reader writes its rows in
// blocks of a chunk's size.
func TestSplitSheetHeaders(t *testing.T) {
	data, err := os.ReadFile("../../extract/testdata/formats/budget.xlsx")
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{400, 1000, 2000} {
		l := extract.Limits{ChunkSize: size}
		mt, err := l.Detect("budget.xlsx", "", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := l.Extract(context.Background(), mt, data)
		if err != nil {
			t.Fatal(err)
		}
		opts := Options{Size: size, Overlap: size / 5}
		chunks := Split(doc, opts)
		checkChunks(t, doc, opts, chunks)
		headers := map[string]string{"Budget": "| Item | Category | Q1 |", "Staff": "| Name | Role | Start date |", "Notes": "| Topic | Note |"}
		seen := map[string]int{}
		for _, c := range chunks {
			h, ok := headers[c.Location.Sheet]
			if !ok {
				t.Fatalf("size %d: chunk %q has location %+v", size, c.Content, c.Location)
			}
			seen[c.Location.Sheet]++
			if !strings.Contains(c.Content, h) {
				t.Errorf("size %d: chunk of sheet %s at %s lacks the header row:\n%s", size, c.Location.Sheet, c.Location.Cells, c.Content)
			}
		}
		if seen["Budget"] < 2 || !reflect.DeepEqual(len(seen), 3) {
			t.Errorf("size %d: chunks per sheet %v", size, seen)
		}
	}
}
