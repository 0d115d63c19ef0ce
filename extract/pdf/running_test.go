package pdf

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// body returns the distinct text of page n: a heading and a paragraph that
// no other page shares.
func body(n int) string {
	return fmt.Sprintf("Section %c\n\nThe %sparagraph explains step %c of the process in its own words.",
		'A'+rune(n), strings.Repeat("long ", n%3+1), 'a'+rune(n))
}

// withLines returns pages of body text, page n (from 1) preceded by
// top(n) and followed by bottom(n) when they are not nil, each set apart by
// a blank line as the extractor sets a header apart.
func withLines(pages int, top, bottom func(int) string) []string {
	texts := make([]string, pages)
	for i := range texts {
		n := i + 1
		t := body(n)
		if top != nil {
			t = top(n) + "\n\n" + t
		}
		if bottom != nil {
			t += "\n\n" + bottom(n)
		}
		texts[i] = t
	}
	return texts
}

// withMiddle returns pages whose first and last two lines are their own
// and whose middle holds line.
func withMiddle(pages int, line string) []string {
	texts := make([]string, pages)
	for i := range texts {
		c := 'a' + rune(i)
		texts[i] = fmt.Sprintf("Top %c\n\nThe %c lead\n\n%s\n\n%s\n\nEnd %c", c, c, line, body(i+1), c)
	}
	return texts
}

func fixed(s string) func(int) string { return func(int) string { return s } }

func TestDropRunningLines(t *testing.T) {
	bodies := withLines(6, nil, nil)
	tests := []struct {
		name  string
		texts []string
		// want is the texts expected; nil means bodies.
		want []string
	}{
		{
			name: "title header and page of footer",
			texts: withLines(6, fixed("ACME Field Manual"),
				func(n int) string { return fmt.Sprintf("Page %d of 6", n) }),
		},
		{
			name:  "bare page number footer",
			texts: withLines(6, nil, func(n int) string { return fmt.Sprint(n) }),
		},
		{
			name:  "dashed page number footer",
			texts: withLines(6, nil, func(n int) string { return fmt.Sprintf("- %d -", n) }),
		},
		{
			name: "header with chapter and page numbers",
			texts: withLines(6, func(n int) string {
				return fmt.Sprintf("ACME Manual — Chapter %d … %d", (n+1)/2, n+16)
			}, nil),
		},
		{
			name: "header and page number on one edge, two lines",
			texts: withLines(6, func(n int) string {
				return fmt.Sprintf("Confidential\n%d", n)
			}, nil),
		},
		{
			name: "book headers whose chapter changes, printed numbers offset",
			texts: withLines(6, func(n int) string {
				chapter := []string{"Chapter 1: Setup", "Chapter 1: Setup", "Chapter 2: Use", "Chapter 2: Use", "Chapter 3: Care", "Chapter 3: Care"}[n-1]
				return fmt.Sprintf("%s %d", chapter, n+10)
			}, nil),
		},
		{
			name: "book headers naming each page's section, printed numbers last",
			texts: withLines(6, func(n int) string {
				return fmt.Sprintf("2.%d. Section %c %d", n, 'p'+rune(n), n+30)
			}, nil),
		},
		{
			name: "lines beginning with a number that only one page has stay",
			texts: withLines(6, func(n int) string {
				return fmt.Sprintf("%d Section %c", n+30, 'p'+rune(n))
			}, nil),
			want: withLines(6, func(n int) string {
				return fmt.Sprintf("%d Section %c", n+30, 'p'+rune(n))
			}, nil),
		},
		{
			name: "header drawn after the body",
			texts: withLines(6, nil, func(n int) string {
				return fmt.Sprintf("Annual Report 2025\n%d", n)
			}),
		},
		{
			name:  "on 60% of pages",
			texts: slices.Concat(withLines(3, fixed("Draft"), nil), bodies[3:5]),
			want:  bodies[:5],
		},
		{
			name:  "on half the pages",
			texts: slices.Concat(withLines(3, fixed("Draft"), nil), bodies[3:6]),
			want:  slices.Concat(withLines(3, fixed("Draft"), nil), bodies[3:6]),
		},
		{
			name:  "pages without text keep their place",
			texts: []string{"", "Guide\n\n" + bodies[1], "", "Guide\n\n" + bodies[3], "Guide\n\n" + bodies[4]},
			want:  []string{"", bodies[1], "", bodies[3], bodies[4]},
		},
		{
			name:  "two pages are too few",
			texts: withLines(2, fixed("ACME Field Manual"), nil),
			want:  withLines(2, fixed("ACME Field Manual"), nil),
		},
		{
			name:  "a line repeated inside pages stays",
			texts: withMiddle(5, "Shared middle line"),
			want:  withMiddle(5, "Shared middle line"),
		},
		{
			name: "chapter titles that start with their page's number stay",
			texts: func() []string {
				texts := withLines(6, nil, func(n int) string { return fmt.Sprint(n) })
				texts[0] = "1 Introduction\n\n" + texts[0]
				texts[2] = "3 Installation\n\n" + texts[2]
				return texts
			}(),
			want: func() []string {
				want := withLines(6, nil, nil)
				want[0] = "1 Introduction\n\n" + want[0]
				want[2] = "3 Installation\n\n" + want[2]
				return want
			}(),
		},
		{
			name:  "nothing but running lines",
			texts: []string{"Blank page", "Blank page", "Blank page"},
			want:  []string{"Blank page", "Blank page", "Blank page"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if want == nil {
				want = bodies[:len(tt.texts)]
			}
			got := dropRunningLines(slices.Clone(tt.texts))
			if !slices.Equal(got, want) {
				t.Errorf("dropRunningLines =\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// TestPDFRunningLines extracts a document whose pages draw a running header
// and footer: they are gone from the text, every page keeps its own lines,
// and the page spans still select each page's text. With KeepRunningLines
// they stay.
func TestPDFRunningLines(t *testing.T) {
	const pages = 5
	var bodies [][]string
	for n := 1; n <= pages; n++ {
		bodies = append(bodies, []string{fmt.Sprintf("Page %c opens its own text.", 'A'+n), fmt.Sprintf("Gauge %c is read at dawn and at dusk.", 'A'+n)})
	}
	data := pdftest.RunningPages(func(int) string { return "Reservoir Operations Manual" },
		func(n int) string { return fmt.Sprintf("Page %d of %d", n, pages) }, bodies...)

	doc := mustExtractPDF(t, data)
	if len(doc.Pages) != pages {
		t.Fatalf("%d pages, want %d", len(doc.Pages), pages)
	}
	if strings.Contains(doc.Text, "Reservoir") || strings.Contains(doc.Text, " of 5") {
		t.Errorf("running lines left in the text:\n%s", doc.Text)
	}
	for i, b := range bodies {
		if got, want := pageText(t, doc, i+1), strings.Join(b, "\n"); strings.TrimSpace(got) != want {
			t.Errorf("page %d reads %q, want %q", i+1, got, want)
		}
	}

	kept, err := Extract(context.Background(), data, Options{KeepRunningLines: true})
	if err != nil {
		t.Fatal(err)
	}
	checkDocument(t, kept)
	if got := pageText(t, kept, 3); !strings.HasPrefix(got, "Reservoir Operations Manual\n\n") || !strings.HasSuffix(strings.TrimSpace(got), "Page 3 of 5") {
		t.Errorf("with KeepRunningLines page 3 reads %q", got)
	}
}

// BenchmarkDropRunningLines reports the cost of finding and dropping the
// running lines of a 300-page document.
func BenchmarkDropRunningLines(b *testing.B) {
	texts := withLines(300, fixed("ACME Field Manual"), func(n int) string { return fmt.Sprintf("Page %d of 300", n) })
	for i, t := range texts {
		texts[i] = t + strings.Repeat("\nA line of ordinary text of about sixty characters in all.", 50)
	}
	b.ReportAllocs()
	for b.Loop() {
		dropRunningLines(texts)
	}
}

// FuzzDropRunningLines checks, on pages cut from arbitrary text at form
// feeds, that dropping running lines only ever removes whole lines, keeps
// every page in its place and never empties a document that had text.
func FuzzDropRunningLines(f *testing.F) {
	f.Add("Title\n\nbody one\n\n1\fTitle\n\nbody two\n\n2\fTitle\n\nbody three\n\n3")
	f.Add("Chapter 1 9\nx\f\fChapter 1 11\ny\fChapter 2 12\nz\n\n- 12 -")
	f.Add("a\fa\fa")
	f.Fuzz(func(t *testing.T, s string) {
		texts := strings.Split(s, "\f")
		for i, t := range texts {
			texts[i] = strings.TrimSpace(t)
		}
		got := dropRunningLines(slices.Clone(texts))
		if len(got) != len(texts) {
			t.Fatalf("%d pages became %d", len(texts), len(got))
		}
		had, has := false, false
		for i := range texts {
			had = had || texts[i] != ""
			has = has || got[i] != ""
			if got[i] != strings.TrimSpace(got[i]) {
				t.Fatalf("page %d is not trimmed: %q", i, got[i])
			}
			// The lines left are the page's lines, in order, less some;
			// the page is trimmed again after a cut.
			in := strings.Split(texts[i], "\n")
			k := 0
			for _, l := range strings.Split(got[i], "\n") {
				if l == "" {
					continue
				}
				for k < len(in) && strings.TrimSpace(in[k]) != strings.TrimSpace(l) {
					k++
				}
				if k == len(in) {
					t.Fatalf("page %d line %q is not a line of %q", i, l, texts[i])
				}
				k++
			}
		}
		if had && !has {
			t.Fatalf("dropping emptied the document %q", texts)
		}
	})
}
