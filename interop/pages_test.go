package interop

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// pageServer serves the pages fetch_url reads in the tests, on loopback:
//
//	/libffi.html     a short real manual page (fetch/testdata)
//	/zlib.html       a long real page, read in parts
//	/manual.html     a page with sections (manualPage)
//	/report.pdf      a two-page PDF (pdfPage1, pdfPage2)
//	/metadata        a redirect to the cloud metadata address
//	/image.png       a PNG, a type fetch_url does not read
type pageServer struct {
	*httptest.Server
}

// manualPage is a manual page with navigation, a footer and three
// sections, each with a sentence of its own.
const manualPage = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Harbour tools manual</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/docs">Docs</a> | <a href="/blog">Blog</a></nav>
<main>
<h1>Harbour tools</h1>
<p>The harbour tools help the crew keep the station in order through the winter.</p>
<h2>Installation</h2>
<p>Run the installer from the harbour office and keep the manual near the radio.</p>
<h2>Usage</h2>
<p>Raise the signal flag before the tide turns, and log every ferry in the book.</p>
<ul><li>Check the lantern at dusk.</li><li>Sound the foghorn in fog.</li></ul>
<h2>Licence</h2>
<p>Free to use for every lighthouse keeper on the coast.</p>
</main>
<footer>Copyright the coastal station. All rights reserved.</footer>
</body></html>
`

// pngSignature starts every PNG file.
const pngSignature = "\x89PNG\r\n\x1a\n"

// metadataURL is where cloud instances serve their credentials; a redirect
// there must never be followed.
const metadataURL = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"

func newPageServer(t *testing.T) *pageServer {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "fetch", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	libffi, zlib := read("libffi-simple-example.html"), read("zlib-how.html")
	pdf := pdftest.Pages(pdfPage1, pdfPage2)
	mux := http.NewServeMux()
	serve := func(path, contentType string, body []byte) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.Write(body)
		})
	}
	serve("/libffi.html", "text/html; charset=utf-8", libffi)
	serve("/zlib.html", "text/html; charset=utf-8", zlib)
	serve("/manual.html", "text/html; charset=utf-8", []byte(manualPage))
	serve("/report.pdf", "application/pdf", pdf)
	serve("/image.png", "image/png", []byte(pngSignature+strings.Repeat("\x00", 64)))
	mux.HandleFunc("GET /metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, metadataURL, http.StatusFound)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return &pageServer{Server: s}
}
