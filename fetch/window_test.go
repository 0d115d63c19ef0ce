package fetch

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestWindow(t *testing.T) {
	tests := []struct {
		name      string
		content   string
		start     int
		max       int
		text      string
		next      int
		total     int
		truncated bool
	}{
		{"fits", "hello world", 0, 100, "hello world", 11, 11, false},
		{"empty", "", 0, 10, "", 0, 0, false},
		{"past the end", "abc", 5, 10, "", 3, 3, false},
		{"negative start", "abc", -4, 10, "abc", 3, 3, false},
		{"exact fit", "abcde", 0, 5, "abcde", 5, 5, false},
		{"hard cut", "abcdefghij", 0, 4, "abcd", 4, 10, true},
		{"second window", "abcdefghij", 4, 4, "efgh", 8, 10, true},
		{"last window", "abcdefghij", 8, 4, "ij", 10, 10, false},
		{"cut at space", "abcdefgh ijklmnop", 0, 10, "abcdefgh ", 9, 17, true},
		{"space too early", "a bcdefghijklmnop", 0, 10, "a bcdefghi", 10, 17, true},
		{"cut at paragraph", "para one is short\n\npara two", 0, 20, "para one is short\n\n", 19, 27, true},
		{"line before space", "abcdefghijklmnop\nq rs", 0, 20, "abcdefghijklmnop\n", 17, 21, true},
		{"runes not bytes", "ééééé ééééé", 0, 6, "ééééé ", 6, 11, true},
		{"emoji", "😀😀😀😀", 1, 2, "😀😀", 3, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, next, total, tr := Window(tt.content, tt.start, tt.max)
			if text != tt.text || next != tt.next || total != tt.total || tr != tt.truncated {
				t.Errorf("Window(%q, %d, %d) = %q, %d, %d, %v; want %q, %d, %d, %v",
					tt.content, tt.start, tt.max, text, next, total, tr, tt.text, tt.next, tt.total, tt.truncated)
			}
		})
	}
}

// readAll pages through content in windows of n runes and joins them.
func readAll(content string, n int) (string, int) {
	var b strings.Builder
	calls, start := 0, 0
	for {
		text, next, _, truncated := Window(content, start, n)
		b.WriteString(text)
		calls++
		if !truncated {
			return b.String(), calls
		}
		start = next
	}
}

func FuzzWindow(f *testing.F) {
	f.Add("one two three four five six", 7)
	f.Add("ééé\n\nààà bbb", 3)
	f.Fuzz(func(t *testing.T, content string, n int) {
		if !utf8.ValidString(content) || n < 1 || n > 1000 {
			t.Skip()
		}
		got, calls := readAll(content, n)
		if got != content {
			t.Fatalf("windows of %d rebuild %q, want %q", n, got, content)
		}
		if total := utf8.RuneCountInString(content); calls > total/max(n-n/5, 1)+2 {
			t.Fatalf("%d calls for %d runes in windows of %d", calls, total, n)
		}
	})
}

const sectionDoc = `Intro text.

# Widget guide

Overview.

## Install

Run the installer.

` + "```sh\n# not a heading\nmake install\n```" + `

### From source

Build it.

## Configure ` + "`widget.yml`" + `

Edit the file.

Troubleshooting
---------------

Check the logs.

# [Reference](https://example.org/ref) #

All options.
`

func TestSection(t *testing.T) {
	tests := []struct {
		heading string
		want    string // "" when no section matches
	}{
		{"install", "## Install\n\nRun the installer.\n\n```sh\n# not a heading\nmake install\n```\n\n### From source\n\nBuild it."},
		{"FROM SOURCE", "### From source\n\nBuild it."},
		{"widget.yml", "## Configure `widget.yml`\n\nEdit the file."},
		{"troubleshooting", "Troubleshooting\n---------------\n\nCheck the logs."},
		{"reference", "# [Reference](https://example.org/ref) #\n\nAll options."},
		{"widget guide", "# Widget guide\n\nOverview.\n\n## Install\n\nRun the installer.\n\n```sh\n# not a heading\nmake install\n```\n\n### From source\n\nBuild it.\n\n## Configure `widget.yml`\n\nEdit the file.\n\nTroubleshooting\n---------------\n\nCheck the logs."},
		{"not a heading", ""},
		{"missing", ""},
		{"  ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.heading, func(t *testing.T) {
			got, ok := Section(sectionDoc, tt.heading)
			if ok != (tt.want != "") || got != tt.want {
				t.Errorf("Section(%q) = %q, %v\nwant %q", tt.heading, got, ok, tt.want)
			}
		})
	}
}

func TestSectionPDFPages(t *testing.T) {
	doc := "--- page 1 ---\nCover.\n\n--- page 2 ---\nMethods.\n\n--- page 3 ---\nResults."
	got, ok := Section(doc, "page 2")
	if !ok || got != "--- page 2 ---\nMethods." {
		t.Errorf("Section(page 2) = %q, %v", got, ok)
	}
}
