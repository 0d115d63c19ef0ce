package extract

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/extract/pdf"
	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

func TestDetectType(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		declared string
		head     string
		want     string
		wantErr  error
	}{
		{"pdf by content", "upload.bin", "application/octet-stream", "%PDF-1.7\n...", MIMEPDF, nil},
		{"pdf content beats a text name", "notes.txt", "text/plain", "%PDF-1.4\n", MIMEPDF, nil},
		{"pdf by extension", "Report.PDF", "", "garbage", MIMEPDF, nil},
		{"pdf by declared type", "report", "application/pdf", "", MIMEPDF, nil},
		{"text", "notes.txt", "", "hello", MIMEText, nil},
		{"log", "server.log", "", "line 1", MIMEText, nil},
		{"csv", "data.csv", "", "a,b\n1,2", MIMECSV, nil},
		{"tsv", "data.tsv", "", "a\tb\n1\t2", MIMETSV, nil},
		{"csv declared", "data", "text/csv; charset=utf-8", "a,b", MIMECSV, nil},
		{"rtf by content", "letter.txt", "", "{\\rtf1\\ansi Hello}", MIMERTF, nil},
		{"markdown", "README.md", "text/plain", "# Title", MIMEMarkdown, nil},
		{"markdown long extension", "guide.markdown", "", "# Title", MIMEMarkdown, nil},
		{"markdown with an HTML comment first", "doc.md", "", "<!-- note -->\n# Title", MIMEMarkdown, nil},
		{"html by extension", "page.htm", "", "<p>x</p>", MIMEHTML, nil},
		{"html by declared type with charset", "page", "text/html; charset=utf-8", "x", MIMEHTML, nil},
		{"xhtml declared", "page", "application/xhtml+xml", "x", MIMEHTML, nil},
		{"markdown declared", "notes", "text/x-markdown", "x", MIMEMarkdown, nil},
		{"html sniffed", "page", "", "\ufeff  <!DOCTYPE html><html>", MIMEHTML, nil},
		{"text sniffed", "notes", "", "plain words without a name", MIMEText, nil},
		{"legacy text sniffed", "notes", "", "caf\xe9 cr\xe8me", MIMEText, nil},
		{"png named txt", "photo.txt", "text/plain", "\x89PNG\r\n\x1a\n\x00\x00", "", ErrUnsupported},
		{"jpeg", "photo.jpg", "image/jpeg", "\xff\xd8\xff\xe0", "", ErrUnsupported},
		{"docx by name", "letter.docx", "", "PK\x03\x04\x14\x00", MIMEDOCX, nil},
		{"xlsx by declared type", "upload", MIMEXLSX, "PK\x03\x04\x14\x00", MIMEXLSX, nil},
		{"zip", "archive.zip", "application/zip", "PK\x03\x04", "", ErrUnsupported},
		{"zip named text", "notes.txt", "text/plain", "PK\x03\x04", "", ErrUnsupported},
		{"odt by mimetype entry", "upload.bin", "", zipHead("mimetype", MIMEODT), MIMEODT, nil},
		{"epub by mimetype entry", "book.zip", "", zipHead("mimetype", MIMEEPUB), MIMEEPUB, nil},
		{"pptx by entry name", "upload", "", zipHead("ppt/slides/slide1.xml", "<x/>"), MIMEPPTX, nil},
		{"legacy office", "old.doc", "application/msword", "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00", "", ErrUnsupported},
		{"tiff", "scan.tif", "", "II*\x00\x08\x00", "", ErrUnsupported},
		{"webp", "image.webp", "", "RIFF\x00\x00\x00\x00WEBPVP8 ", "", ErrUnsupported},
		{"unknown binary", "blob", "", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f\x10\x11\x12", "", ErrUnsupported},
		{"unknown extension and type", "data.xyz", "application/x-thing", "", "", ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DetectType(tt.file, tt.declared, []byte(tt.head))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("DetectType error = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("DetectType = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLimitsCheck(t *testing.T) {
	tests := []struct {
		limits Limits
		size   int64
		tooBig bool
	}{
		{Limits{}, DefaultMaxBytes, false},
		{Limits{}, DefaultMaxBytes + 1, true},
		{Limits{MaxBytes: 10}, 10, false},
		{Limits{MaxBytes: 10}, 11, true},
		{Limits{MaxBytes: -1}, 1 << 20, false},
	}
	for _, tt := range tests {
		err := tt.limits.Check(tt.size)
		if got := errors.Is(err, ErrTooLarge); got != tt.tooBig {
			t.Errorf("Limits%+v.Check(%d) = %v, want too large %v", tt.limits, tt.size, err, tt.tooBig)
		}
		if tt.tooBig && !strings.Contains(err.Error(), "11 bytes") && tt.limits.MaxBytes == 10 {
			t.Errorf("error %q does not give the size", err)
		}
	}
}

func TestExtractText(t *testing.T) {
	tests := []struct {
		name string
		mime string
		in   string
		want string
	}{
		{"plain", MIMEText, "hello\nworld\n", "hello\nworld\n"},
		{"CRLF and lone CR", MIMEText, "a\r\nb\rc", "a\nb\nc"},
		{"NUL bytes dropped", MIMEText, "nu\x00ll\x00", "null"},
		{"invalid UTF-8 repaired", MIMEText, "caf\xc3\xa9 and \xff\xfe broken", "café and \ufffd broken"},
		{"legacy Windows-1252", MIMEText, "caf\xe9 \x93quoted\x94", "café “quoted”"},
		{"UTF-8 byte order mark", MIMEText, "\xef\xbb\xbfhello", "hello"},
		{"UTF-16LE", MIMEText, "\xff\xfeh\x00i\x00", "hi"},
		{"UTF-16BE", MIMEText, "\xfe\xff\x00h\x00i", "hi"},
		{"markdown verbatim", MIMEMarkdown, "# Title\n\nSee [docs](http://example.com).\n", "# Title\n\nSee [docs](http://example.com).\n"},
		{"declared with parameters", "text/plain; charset=utf-8", "x y", "x y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Extract(context.Background(), tt.mime, []byte(tt.in))
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			checkDocument(t, doc)
			if doc.Text != tt.want {
				t.Errorf("text = %q, want %q", doc.Text, tt.want)
			}
			if len(doc.Pages) != 1 || doc.Pages[0].Number != 0 {
				t.Errorf("pages = %+v, want one page numbered 0", doc.Pages)
			}
		})
	}
}

func TestExtractHTML(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "title, blocks, script and style",
			in: `<!DOCTYPE html><html><head><title> The  Title </title><style>p{color:red}</style>
<script>var hidden = "script text";</script><meta name="x" content="y"></head>
<body><h1>Heading</h1><p>First   paragraph
 with <b>bold</b> and <a href="http://example.com">a link</a>.</p>
<noscript>enable scripts</noscript><template><p>template</p></template>
<ul><li>one</li><li>two</li></ul><div>Tom &amp; Jerry &lt;3 &eacute;t&eacute;</div></body></html>`,
			want: "The Title\n\nHeading\n\nFirst paragraph with bold and a link.\n\none\ntwo\n\nTom & Jerry <3 été",
		},
		{
			name: "table rows and cells",
			in:   "<table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>",
			want: "Name Value\na 1",
		},
		{
			name: "pre keeps its spacing",
			in:   "<p>Code:</p><pre>if x {\n    y()\n}</pre><p>after</p>",
			want: "Code:\n\nif x {\n    y()\n}\n\nafter",
		},
		{
			name: "hidden elements",
			in:   `<p>shown</p><p hidden>not shown</p><span aria-hidden="true">icon</span><input type="hidden" value="v"><p>end</p>`,
			want: "shown\n\nend",
		},
		{
			name: "line breaks",
			in:   "<p>one<br>two<br/>three</p>",
			want: "one\ntwo\nthree",
		},
		{
			name: "fragment without html element",
			in:   "just <em>some</em> text",
			want: "just some text",
		},
		{
			name: "declared legacy encoding",
			in:   "<html><head><meta charset=\"koi8-r\"></head><body><p>\xf0\xd2\xc9\xd7\xc5\xd4</p></body></html>",
			want: "Привет",
		},
		{
			name: "invalid UTF-8 and NUL",
			in:   "<p>café: bad \xff byte and nul\x00</p>",
			want: "café: bad \ufffd byte and nul",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Extract(context.Background(), MIMEHTML, []byte(tt.in))
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			checkDocument(t, doc)
			if doc.Text != tt.want {
				t.Errorf("text = %q\nwant   %q", doc.Text, tt.want)
			}
		})
	}
}

func TestExtractErrors(t *testing.T) {
	tests := []struct {
		name string
		mime string
		in   string
		want error
	}{
		{"unsupported type", "image/png", "\x89PNG", ErrUnsupported},
		{"empty text", MIMEText, "", ErrNoText},
		{"blank text", MIMEText, " \n\t\n", ErrNoText},
		{"html without visible text", MIMEHTML, "<html><head><script>x()</script></head><body> </body></html>", ErrNoText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Extract(context.Background(), tt.mime, []byte(tt.in)); !errors.Is(err, tt.want) {
				t.Errorf("Extract error = %v, want %v", err, tt.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Extract(ctx, MIMEText, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
}

// checkDocument verifies the invariants every Document must hold: valid
// UTF-8 without NUL, and pages that tile the text in order.
func checkDocument(t testing.TB, doc *Document) {
	t.Helper()
	if !utf8.ValidString(doc.Text) {
		t.Fatalf("text is not valid UTF-8: %q", doc.Text)
	}
	if strings.IndexByte(doc.Text, 0) >= 0 {
		t.Fatalf("text holds a NUL byte")
	}
	if len(doc.Pages) == 0 {
		t.Fatalf("document has no pages")
	}
	pos := 0
	for i, p := range doc.Pages {
		if p.Start != pos || p.End < p.Start {
			t.Fatalf("page %d span [%d,%d) does not continue at %d", i, p.Start, p.End, pos)
		}
		pos = p.End
	}
	if n := utf8.RuneCountInString(doc.Text); pos != n {
		t.Fatalf("pages end at %d, text has %d runes", pos, n)
	}
}

// TestExtractPDF checks the dispatch to the PDF engine: pages keep their
// numbers and spans, and each kind of PDF error matches this package's
// sentinel of the same kind with the engine's message.
func TestExtractPDF(t *testing.T) {
	doc, err := Extract(context.Background(), "application/pdf; x=y", pdftest.Pages([]string{"First page."}, []string{"Second page."}))
	if err != nil {
		t.Fatal(err)
	}
	checkDocument(t, doc)
	if len(doc.Pages) != 2 || doc.Pages[1].Number != 2 || !strings.Contains(doc.Text, "Second page.") {
		t.Errorf("document %+v", doc)
	}

	graphics := pdftest.New()
	graphics.Page("0 0 m 100 100 l S")
	tests := []struct {
		name      string
		data      []byte
		want, pdf error
		message   string
	}{
		{"not a PDF", []byte("plain words"), ErrCorrupt, pdf.ErrCorrupt, "no %PDF- header"},
		{"scanned", graphics.Bytes(), ErrNoText, pdf.ErrNoText, "no extractable text (scanned PDF?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Extract(context.Background(), MIMEPDF, tt.data)
			if !errors.Is(err, tt.want) || !errors.Is(err, tt.pdf) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("Extract error = %v, want %v and %v saying %q", err, tt.want, tt.pdf, tt.message)
			}
		})
	}
}

func TestCleanMessages(t *testing.T) {
	if got := CleanMessage("bad \x00\xff\nname"); got != `bad \x00`+"\uFFFD name" {
		t.Errorf("CleanMessage = %q", got)
	}
	_, err := DetectType(strings.Repeat("n\x00\xff", 2000)+".xyz", "", nil)
	if !errors.Is(err, ErrUnsupported) || len(err.Error()) > 1024 || !utf8.ValidString(err.Error()) || strings.ContainsRune(err.Error(), 0) {
		t.Errorf("DetectType error for a hostile name: %q", err)
	}
	_, err = Extract(context.Background(), MIMEPDF, []byte("%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages (\x00\xff\x1b) >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF"))
	if !errors.Is(err, ErrCorrupt) || CleanMessage(err.Error()) != err.Error() {
		t.Errorf("Extract error is not clean: %q", err)
	}
}

func TestTextLimit(t *testing.T) {
	text := []byte(strings.Repeat("words of text\n", 100))
	if _, err := (Limits{MaxTextBytes: 1000}).Extract(context.Background(), MIMEText, text); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1000 bytes (the text limit)") {
		t.Errorf("text over the limit: %v", err)
	}
	if _, err := (Limits{MaxTextBytes: 1000}).Extract(context.Background(), MIMEPDF, pdftest.Pages([]string{string(text[:1400])})); !errors.Is(err, ErrTooLarge) || !errors.Is(err, pdf.ErrTooLarge) {
		t.Errorf("PDF text over the limit: %v", err)
	}
	if _, err := (Limits{}).Extract(context.Background(), MIMEText, text); err != nil {
		t.Errorf("default limits: %v", err)
	}
}

// zipHead returns the first local file header of a ZIP file holding one
// stored entry name with content, as the start of a file.
func zipHead(name, content string) string {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	f, err := w.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
	if err != nil {
		panic(err)
	}
	f.Write([]byte(content))
	w.Close()
	return b.String()
}
