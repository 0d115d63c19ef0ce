package pdftest

import (
	"compress/zlib"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
)

// TestStructure checks the writer's file structure, so a failure of the
// extractor's or the documents tests points at the code under test rather
// than at a broken fixture.
func TestStructure(t *testing.T) {
	twoPages := [][]string{{"first (page)"}, {`second \ page`}}
	tests := []struct {
		name    string
		data    func() []byte
		version string
		// objects is the number of objects the file must hold.
		objects int
		// want are in the file as written, content in its decoded streams.
		want, content []string
	}{
		{
			name:    "Pages, one page per element",
			data:    func() []byte { return Pages(twoPages...) },
			version: "1.4",
			// The font, a content stream and a page per page, the page tree
			// and the catalog.
			objects: 1 + 2*len(twoPages) + 2,
			want:    []string{"/BaseFont /Helvetica", "/Count 2", "/Root 7 0 R"},
			content: []string{`(first \(page\)) Tj`, `(second \\ page) Tj`},
		},
		{
			name: "RunningPages, a header and a footer on every page",
			data: func() []byte {
				return RunningPages(func(int) string { return "Field Guide (draft)" },
					func(n int) string { return fmt.Sprintf("Page %d of 2", n) }, twoPages...)
			},
			version: "1.4",
			objects: 1 + 2*len(twoPages) + 2,
			want:    []string{"/Count 2"},
			content: []string{
				"BT /F1 9 Tf 72 756 Td (Field Guide \\(draft\\)) Tj ET\nBT /F1 12 Tf 72 720 Td",
				"(first \\(page\\)) Tj\nET\nBT /F1 9 Tf 72 36 Td (Page 1 of 2) Tj ET\n",
				"(Page 2 of 2) Tj",
			},
		},
		{
			name:    "RunningPages without header or footer",
			data:    func() []byte { return RunningPages(nil, func(int) string { return "" }, twoPages[:1]...) },
			version: "1.4",
			objects: 1 + 2 + 2,
			content: []string{"(first \\(page\\)) Tj\nET\n"},
		},
		{
			name:    "Pages without pages",
			data:    func() []byte { return Pages() },
			version: "1.4",
			objects: 1 + 2,
			want:    []string{"/Kids [] /Count 0"},
		},
		{
			name: "builder with extra objects, a deflated page and trailer entries",
			data: func() []byte {
				w := New()
				w.Version = "2.0"
				w.Compress = true
				form := w.Stream("/Type /XObject /Subtype /Form /BBox [0 0 612 792]", "BT /F1 12 Tf 72 600 Td (Form) Tj ET", false)
				w.XObjects = fmt.Sprintf("<< /X1 %d 0 R >>", form)
				w.TextPage("Deflated (text).", "Second line.")
				w.Page("")
				w.Trailer = "/Prev XREF"
				return w.Bytes()
			},
			version: "2.0",
			// The font, the form, two pages of two objects each, the page
			// tree and the catalog.
			objects: 1 + 1 + 2*2 + 2,
			want:    []string{"/XObject << /X1 2 0 R >>", "/Count 2", "/Filter /FlateDecode", "/Parent 7 0 R"},
			content: []string{"(Form) Tj", "(Deflated \\(text\\).) Tj\nT* (Second line.) Tj\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := string(tt.data())
			content := checkStructure(t, s, tt.version, tt.objects)
			for _, want := range tt.want {
				if !strings.Contains(s, want) {
					t.Errorf("document lacks %q", want)
				}
			}
			for _, want := range tt.content {
				if !strings.Contains(content, want) {
					t.Errorf("content streams lack %q:\n%s", want, content)
				}
			}
		})
	}
}

// checkStructure verifies the header, the cross-reference table and its
// offsets, the trailer, and every stream's length. It returns the decoded
// data of every stream, one after the other.
func checkStructure(t *testing.T, s, version string, objects int) string {
	t.Helper()
	header := "%PDF-" + version + "\n%"
	if !strings.HasPrefix(s, header) || !strings.HasSuffix(s, "%%EOF\n") {
		t.Fatalf("header or end of file missing:\n%s", s)
	}
	marker, _, _ := strings.Cut(s[len(header):], "\n")
	binary := len(marker) >= 4
	for i := range len(marker) {
		binary = binary && marker[i] > 127
	}
	if !binary {
		t.Errorf("second line %q is not a binary marker of bytes above 127", marker)
	}
	var xref int
	if _, err := fmt.Sscanf(s[strings.LastIndex(s, "startxref\n"):], "startxref\n%d", &xref); err != nil {
		t.Fatalf("startxref: %v", err)
	}
	size := objects + 1
	if !strings.HasPrefix(s[xref:], fmt.Sprintf("xref\n0 %d\n", size)) {
		t.Fatalf("startxref %d does not point at a table of %d entries: %q", xref, size, s[xref:min(len(s), xref+20)])
	}
	trailer := strings.Index(s, "trailer\n")
	entries := strings.Split(strings.TrimSuffix(s[xref:trailer], "\n"), "\n")[2:]
	if len(entries) != size {
		t.Fatalf("%d cross-reference entries, want %d", len(entries), size)
	}
	if entries[0] != "0000000000 65535 f " {
		t.Errorf("entry 0 = %q, want the head of the free list", entries[0])
	}
	bodies := make([]string, size)
	for n, e := range entries[1:] {
		num := n + 1
		if len(e)+1 != 20 {
			t.Errorf("entry %d is %d bytes with its newline, want 20", num, len(e)+1)
		}
		var off int
		fmt.Sscanf(e, "%d", &off)
		want := fmt.Sprintf("%d 0 obj\n", num)
		if !strings.HasPrefix(s[off:], want) {
			t.Errorf("entry %d points at %q, want %q", num, s[off:min(len(s), off+12)], want)
			continue
		}
		body, _, ok := strings.Cut(s[off+len(want):], "\nendobj\n")
		if !ok {
			t.Errorf("object %d has no endobj", num)
		}
		bodies[num] = body
	}
	if want := fmt.Sprintf("<< /Size %d /Root %d 0 R ", size, objects); !strings.HasPrefix(s[trailer+len("trailer\n"):], want) {
		t.Errorf("trailer %q does not start with %q", s[trailer:], want)
	}
	if !strings.HasPrefix(bodies[objects], "<< /Type /Catalog /Pages ") {
		t.Errorf("root object %d = %q, want the catalog", objects, bodies[objects])
	}
	var content strings.Builder
	for num, body := range bodies {
		content.WriteString(checkStream(t, num, body))
	}
	return content.String()
}

var lengthRE = regexp.MustCompile(`^<< /Length (\d+) `)

// checkStream verifies that a stream object's /Length is the length of its
// data, and returns the data, inflated where it is deflated. Objects that
// are not streams give "".
func checkStream(t *testing.T, num int, body string) string {
	t.Helper()
	dict, data, ok := strings.Cut(body, "\nstream\n")
	if !ok {
		return ""
	}
	data, ok = strings.CutSuffix(data, "\nendstream")
	if !ok {
		t.Errorf("object %d: stream has no endstream", num)
		return ""
	}
	m := lengthRE.FindStringSubmatch(dict)
	if m == nil || m[1] != fmt.Sprint(len(data)) {
		t.Errorf("object %d: dictionary %q, want /Length %d first", num, dict, len(data))
	}
	if !strings.Contains(dict, "/FlateDecode") {
		return data
	}
	zr, err := zlib.NewReader(strings.NewReader(data))
	if err != nil {
		t.Errorf("object %d: %v", num, err)
		return ""
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Errorf("object %d does not inflate: %v", num, err)
	}
	return string(plain)
}

func TestTextContent(t *testing.T) {
	tests := []struct {
		font  string
		size  float64
		lines []string
		want  string
	}{
		{"F1", 10, []string{"one", "two (2)"}, "BT /F1 10 Tf 72 720 Td 12 TL\n(one) Tj\nT* (two \\(2\\)) Tj\nET\n"},
		{"T0", 20, []string{`back\slash`}, "BT /T0 20 Tf 72 720 Td 24 TL\n(back\\\\slash) Tj\nET\n"},
		{"F2", 5, nil, "BT /F2 5 Tf 72 720 Td 6 TL\nET\n"},
	}
	for _, tt := range tests {
		if got := TextContent(tt.font, tt.size, tt.lines...); got != tt.want {
			t.Errorf("TextContent(%q, %g, %q) = %q, want %q", tt.font, tt.size, tt.lines, got, tt.want)
		}
	}
}
