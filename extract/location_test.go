package extract

import (
	"reflect"
	"testing"
)

func TestLocationString(t *testing.T) {
	tests := []struct {
		loc  Location
		want string
	}{
		{Location{}, ""},
		{Location{PageStart: 7, PageEnd: 7}, "page 7"},
		{Location{PageStart: 7, PageEnd: 8}, "pages 7-8"},
		{Location{PageStart: 3, PageEnd: 3, OCR: true}, "page 3 (OCR)"},
		{Location{SlideStart: 3, SlideEnd: 4, SlideTitle: "Quarterly results"}, "slides 3-4 (Quarterly results)"},
		{Location{SlideStart: 2, SlideEnd: 2}, "slide 2"},
		{Location{Sheet: "Budget", Cells: "A1:F40"}, "sheet Budget, A1:F40"},
		{Location{Cells: "A1:C9"}, "cells A1:C9"},
		{Location{Headings: []string{"Contract", "2. Scope"}}, "Contract > 2. Scope"},
	}
	for _, tt := range tests {
		if got := tt.loc.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.loc, got, tt.want)
		}
	}
}

func TestLocationJSON(t *testing.T) {
	tests := []struct {
		loc  Location
		json string
	}{
		{Location{}, `{}`},
		{Location{PageStart: 3, PageEnd: 4, OCR: true}, `{"page_start":3,"page_end":4,"ocr":true}`},
		{Location{SlideStart: 3, SlideEnd: 3, SlideTitle: "Results"}, `{"slide_start":3,"slide_end":3,"slide_title":"Results"}`},
		{Location{Sheet: "Budget", Cells: "A1:F40"}, `{"sheet":"Budget","cells":"A1:F40"}`},
		{Location{Headings: []string{"Contract", "Scope"}}, `{"headings":["Contract","Scope"]}`},
	}
	for _, tt := range tests {
		if got := string(tt.loc.JSON()); got != tt.json {
			t.Errorf("%+v.JSON() = %s, want %s", tt.loc, got, tt.json)
		}
		back, err := ParseLocation([]byte(tt.json))
		if err != nil || !reflect.DeepEqual(back, tt.loc) {
			t.Errorf("ParseLocation(%s) = %+v, %v", tt.json, back, err)
		}
	}
	for _, empty := range []string{"", "null", " "} {
		if l, err := ParseLocation([]byte(empty)); err != nil || !l.IsZero() {
			t.Errorf("ParseLocation(%q) = %+v, %v", empty, l, err)
		}
	}
	if _, err := ParseLocation([]byte("{")); err == nil {
		t.Error("ParseLocation of broken JSON succeeded")
	}
}

func TestLocationMerge(t *testing.T) {
	tests := []struct {
		name       string
		a, b, want Location
	}{
		{"pages", Location{PageStart: 7, PageEnd: 7}, Location{PageStart: 8, PageEnd: 9}, Location{PageStart: 7, PageEnd: 9}},
		{"OCR spreads", Location{PageStart: 1, PageEnd: 1}, Location{PageStart: 2, PageEnd: 2, OCR: true}, Location{PageStart: 1, PageEnd: 2, OCR: true}},
		{"slides keep the first title", Location{SlideStart: 3, SlideEnd: 3, SlideTitle: "A"}, Location{SlideStart: 4, SlideEnd: 4, SlideTitle: "B"},
			Location{SlideStart: 3, SlideEnd: 4, SlideTitle: "A"}},
		{"cells of one sheet grow", Location{Sheet: "S", Cells: "A1:C20"}, Location{Sheet: "S", Cells: "B21:F40"}, Location{Sheet: "S", Cells: "A1:F40"}},
		{"another sheet is left out", Location{Sheet: "S", Cells: "A1:C20"}, Location{Sheet: "T", Cells: "A1:B2"}, Location{Sheet: "S", Cells: "A1:C20"}},
		{"first heading path", Location{Headings: []string{"A", "B"}}, Location{Headings: []string{"A", "C"}}, Location{Headings: []string{"A", "B"}}},
		{"from nothing", Location{}, Location{Headings: []string{"A"}}, Location{Headings: []string{"A"}}},
	}
	for _, tt := range tests {
		if got := tt.a.Merge(tt.b); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Merge = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestLocate(t *testing.T) {
	doc := &Document{Text: "0123456789abcdefghij", Spans: []Span{
		{Start: 0, End: 5, Location: Location{SlideStart: 1, SlideEnd: 1, SlideTitle: "One"}},
		{Start: 5, End: 12, Location: Location{SlideStart: 2, SlideEnd: 2, SlideTitle: "Two"}},
		{Start: 12, End: 12},
		{Start: 12, End: 20, Location: Location{SlideStart: 3, SlideEnd: 3}},
	}}
	tests := []struct {
		start, end int
		want       Location
	}{
		{0, 5, Location{SlideStart: 1, SlideEnd: 1, SlideTitle: "One"}},
		{3, 7, Location{SlideStart: 1, SlideEnd: 2, SlideTitle: "One"}},
		{6, 20, Location{SlideStart: 2, SlideEnd: 3, SlideTitle: "Two"}},
		{12, 13, Location{SlideStart: 3, SlideEnd: 3}},
	}
	for _, tt := range tests {
		if got := doc.Locate(tt.start, tt.end); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Locate(%d, %d) = %+v, want %+v", tt.start, tt.end, got, tt.want)
		}
	}
	if got := (&Document{Text: "x"}).Locate(0, 1); !got.IsZero() {
		t.Errorf("Locate without spans = %+v", got)
	}
}

func TestCellName(t *testing.T) {
	for _, tt := range []struct {
		col, row int
		want     string
	}{{1, 1, "A1"}, {26, 9, "Z9"}, {27, 2, "AA2"}, {28, 3, "AB3"}, {16384, 1048576, "XFD1048576"}} {
		if got := CellName(tt.col, tt.row); got != tt.want {
			t.Errorf("CellName(%d, %d) = %q, want %q", tt.col, tt.row, got, tt.want)
		}
	}
}
