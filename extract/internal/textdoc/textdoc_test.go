package textdoc

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitle(t *testing.T) {
	long := strings.Repeat("word ", 1000)
	for _, c := range []struct{ in, want string }{
		{"  Short\n title\t", "Short title"},
		{strings.Repeat("é", MaxTitleRunes), strings.Repeat("é", MaxTitleRunes)},
		{strings.Repeat("é", MaxTitleRunes+1), strings.Repeat("é", MaxTitleRunes-1) + "…"},
		{long, strings.TrimSpace(long[:5*39+4]) + "…"},
	} {
		got := Title(c.in)
		if got != c.want {
			t.Errorf("Title(%.40q...) = %q, want %q", c.in, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n > MaxTitleRunes {
			t.Errorf("Title(%.40q...) is %d runes long", c.in, n)
		}
	}
}

// TestOutlineBounds checks that a heading path holds at most MaxLevels
// titles of at most MaxTitleRunes, whatever levels and titles a file
// declares.
func TestOutlineBounds(t *testing.T) {
	var o Outline
	var path []string
	for level := 1; level <= 1000; level++ {
		path = o.Enter(level, strings.Repeat("x", 10000))
	}
	if len(path) != MaxLevels {
		t.Errorf("a path of %d levels, want %d", len(path), MaxLevels)
	}
	for _, p := range path {
		if utf8.RuneCountInString(p) > MaxTitleRunes {
			t.Fatalf("a title of %d runes", utf8.RuneCountInString(p))
		}
	}
	if got := o.Enter(2, "Two"); len(got) != 2 || got[1] != "Two" {
		t.Errorf("after a level 2 heading: %q", got)
	}
}

// TestSpanLimit checks that a document of more than MaxSpans spans fails
// with ErrTooLarge, and that locations are cut as Title cuts them.
func TestSpanLimit(t *testing.T) {
	if got := SpanLimit(32 << 20); got != MaxSpans {
		t.Errorf("SpanLimit of 32 MiB = %d, want %d", got, MaxSpans)
	}
	if got := SpanLimit(512 << 20); got != 1<<20 {
		t.Errorf("SpanLimit of 512 MiB = %d, want one a 512 bytes", got)
	}
	b := NewBuilder(1 << 20)
	b.Locate(Location{SlideTitle: strings.Repeat("t", 1000), Sheet: "s", Headings: []string{strings.Repeat("h ", 1000)}}, false)
	b.Block("first")
	for i := 1; i <= MaxSpans && b.Err() == nil; i++ {
		b.Locate(Location{Headings: []string{"h"}}, false)
		b.Block("x")
	}
	_, err := b.Document()
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "limit of a document's parts") {
		t.Fatalf("%d spans: %v, want ErrTooLarge", MaxSpans+1, err)
	}
	if loc := b.spans[0].Loc; utf8.RuneCountInString(loc.SlideTitle) > MaxTitleRunes || utf8.RuneCountInString(loc.Headings[0]) > MaxTitleRunes {
		t.Errorf("a location of %d and %d runes", utf8.RuneCountInString(loc.SlideTitle), utf8.RuneCountInString(loc.Headings[0]))
	}

	b = NewBuilder(1 << 20)
	var spans []Span
	for i := range MaxSpans + 1 {
		spans = append(spans, Span{Start: i * 2, Loc: Location{Headings: []string{"h"}}})
	}
	b.BlockWithSpans(strings.Repeat("x\n", MaxSpans+1), spans)
	if _, err := b.Document(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a block of %d spans: %v, want ErrTooLarge", MaxSpans+1, err)
	}
}
