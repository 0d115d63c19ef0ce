package ocr

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseMode(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Mode
		ok   bool
	}{{"", ModeAuto, true}, {"auto", ModeAuto, true}, {" OFF ", ModeOff, true}, {"force", ModeForce, true}, {"always", "", false}} {
		got, err := ParseMode(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseMode(%q) = %q, %v", tt.in, got, err)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		opts Options
		ok   bool
	}{
		{Options{}, true},
		{Options{Mode: ModeForce, Languages: []string{"eng", "deu", "script/Latin"}, DPI: 300, Workers: 2}, true},
		{Options{Mode: "sometimes"}, false},
		{Options{Languages: []string{"eng;rm -rf"}}, false},
		{Options{Languages: []string{"-l"}}, false},
		{Options{DPI: 20}, false},
		{Options{DPI: 5000}, false},
		{Options{Workers: -1}, false},
	}
	for _, tt := range tests {
		if err := tt.opts.Validate(); (err == nil) != tt.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", tt.opts, err, tt.ok)
		}
	}
}

func TestNilEngine(t *testing.T) {
	var e *Engine
	if e.Enabled() || e.Mode() != ModeOff {
		t.Error("the nil engine is enabled")
	}
	if err := e.Available(context.Background(), false); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "OCR is off") {
		t.Errorf("Available = %v", err)
	}
	if s := e.Probe(context.Background()); s.Available {
		t.Errorf("Probe = %+v", s)
	}
}

func TestMissingTesseract(t *testing.T) {
	e, err := New(Options{Tesseract: filepath.Join(t.TempDir(), "tesseract")})
	if err != nil {
		t.Fatal(err)
	}
	s := e.Probe(context.Background())
	if s.Available || !strings.Contains(s.Reason, "tesseract program is not installed") {
		t.Errorf("Probe = %+v", s)
	}
	if _, err := e.Image(context.Background(), []byte("\x89PNG")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Image = %v, want ErrUnavailable", err)
	}
	if _, err := e.OpenPDF(context.Background(), []byte("%PDF-1.4")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("OpenPDF = %v, want ErrUnavailable", err)
	}
}

// fakeTools writes shell scripts standing in for tesseract, pdftoppm and
// pdfinfo: tesseract lists eng and deu and runs recognise (a shell
// command) on a page.
func fakeTools(t *testing.T, recognise string) Options {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return Options{
		Tesseract: write("tesseract", `case "$1" in
--version) echo "tesseract 5.3.0"; exit 0;;
--list-langs) echo 'List of available languages in "/x/" (3):'; echo deu; echo eng; echo osd; exit 0;;
esac
cat >/dev/null
`+recognise),
		Pdftoppm: write("pdftoppm", "cat "+pngFile(t, dir)),
		Pdfinfo:  write("pdfinfo", `echo "Page    1 size: 612 x 792 pts (letter)"; echo "Page    2 size: 14400 x 14400 pts"`),
	}
}

func TestProbeLanguages(t *testing.T) {
	opts := fakeTools(t, "echo text")
	opts.Languages = []string{"eng", "fra"}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s := e.Probe(context.Background())
	if !s.Available || !s.Renderer || !slices.Equal(s.Languages, []string{"eng"}) || !slices.Equal(s.Missing, []string{"fra"}) ||
		!slices.Equal(s.Installed, []string{"deu", "eng"}) || s.Version != "tesseract 5.3.0" {
		t.Errorf("Probe = %+v", s)
	}
	opts.Languages = []string{"fra"}
	e, _ = New(opts)
	if s := e.Probe(context.Background()); s.Available || !strings.Contains(s.Reason, "none of the languages fra is installed") {
		t.Errorf("Probe without the language = %+v", s)
	}
}

func TestPageTimeout(t *testing.T) {
	opts := fakeTools(t, "sleep 60")
	opts.PageTimeout = 300 * time.Millisecond
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := e.OpenPDF(context.Background(), []byte("%PDF-1.4"))
	if err != nil {
		t.Fatal(err)
	}
	defer doc.Close()
	start := time.Now()
	_, err = doc.Page(context.Background(), 1)
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("Page = %v, want a time-out", err)
	}
	// The fake sleeps a minute: anything near that means the process was
	// waited for rather than killed.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the time-out took %s", took)
	}
}

func TestPageText(t *testing.T) {
	e, err := New(fakeTools(t, `printf 'Line one  \n\n\n\nLine two\f'`))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := e.OpenPDF(context.Background(), []byte("%PDF-1.4"))
	if err != nil {
		t.Fatal(err)
	}
	path := doc.path
	text, err := doc.Page(context.Background(), 1)
	if err != nil || text != "Line one\n\nLine two" {
		t.Errorf("Page = %q, %v", text, err)
	}
	// A page too large for the pixel limit at the configured resolution is
	// rendered at a lower one.
	if dpi := doc.dpiFor(2); dpi >= DefaultDPI || dpi < 30 {
		t.Errorf("dpi for a 200-inch page = %d", dpi)
	}
	if dpi := doc.dpiFor(1); dpi != DefaultDPI {
		t.Errorf("dpi for a letter page = %d", dpi)
	}
	if err := doc.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the PDF's copy is left: %v", err)
	}
}

// tiff returns a little-endian TIFF header with one image directory per
// page, each declaring width and height.
func tiff(pages int, width, height uint32) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.WriteString("II*\x00")
	binary.Write(&b, le, uint32(8))
	for i := 0; i < pages; i++ {
		off := uint32(b.Len())
		binary.Write(&b, le, uint16(2))
		for _, e := range [][3]uint32{{256, 4, width}, {257, 4, height}} {
			binary.Write(&b, le, uint16(e[0]))
			binary.Write(&b, le, uint16(e[1]))
			binary.Write(&b, le, uint32(1))
			binary.Write(&b, le, e[2])
		}
		next := uint32(0)
		if i < pages-1 {
			next = off + 2 + 24 + 4
		}
		binary.Write(&b, le, next)
	}
	return b.Bytes()
}

func TestImageLimits(t *testing.T) {
	e, err := New(Options{MaxPages: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.checkPixels(pngHeader(100000, 100000)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("checkPixels of a 100,000 x 100,000 PNG = %v", err)
	}
	if n, err := e.checkTIFF(tiff(3, 2480, 3508)); n != 3 || err != nil {
		t.Errorf("checkTIFF of 3 A4 pages = %d, %v", n, err)
	}
	if _, err := e.checkTIFF(tiff(4, 100, 100)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("checkTIFF of 4 pages with a limit of 3 = %v", err)
	}
	if _, err := e.checkTIFF(tiff(1, 100000, 100000)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("checkTIFF of a huge page = %v", err)
	}
	loop := tiff(2, 10, 10)
	binary.LittleEndian.PutUint32(loop[len(loop)-4:], 8)
	if _, err := e.checkTIFF(loop); err == nil {
		t.Error("checkTIFF of a looping directory chain succeeded")
	}
}

// TestRealTesseract recognises a page rendered by pdftoppm, when the
// programs are installed (always in CI, which sets MCPSEARCH_REQUIRE_OCR).
func TestRealTesseract(t *testing.T) {
	e, err := New(Options{DPI: 150})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Available(context.Background(), true); err != nil {
		if os.Getenv("MCPSEARCH_REQUIRE_OCR") == "1" {
			t.Fatalf("OCR is required: %v", err)
		}
		t.Skipf("OCR is not available: %v", err)
	}
	s := e.Probe(context.Background())
	t.Logf("%s, languages %v", s.Version, s.Installed)
	if !slices.Contains(s.Languages, "eng") {
		t.Fatalf("eng is not installed: %+v", s)
	}
	png, err := exec.Command("pdftoppm", "-r", "150", "-gray", "-png", "-f", "1", "-l", "1", "../testdata/formats/contract.pdf").Output()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := e.Image(context.Background(), png)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 1 || !strings.Contains(pages[0], "Harbour Library Trust") {
		t.Errorf("Image = %q", pages)
	}
}

// pngFile writes a small gray PNG in dir and returns its path.
func pngFile(t *testing.T, dir string) string {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "page.png")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pngHeader returns the signature and header chunk of a PNG image of
// width x height pixels: all a decoder reads to learn its size.
func pngHeader(width, height uint32) []byte {
	var chunk bytes.Buffer
	chunk.WriteString("IHDR")
	binary.Write(&chunk, binary.BigEndian, width)
	binary.Write(&chunk, binary.BigEndian, height)
	chunk.Write([]byte{8, 0, 0, 0, 0})
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	binary.Write(&b, binary.BigEndian, uint32(chunk.Len()-4))
	b.Write(chunk.Bytes())
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk.Bytes()))
	return b.Bytes()
}

func TestParseLanguages(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{{"", nil}, {"eng", []string{"eng"}}, {"eng+deu", []string{"eng", "deu"}}, {" eng, fra ,deu ", []string{"eng", "fra", "deu"}}} {
		if got := ParseLanguages(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseLanguages(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
