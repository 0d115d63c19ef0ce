package crawl

import (
	"bytes"
	"errors"
	"mime"
	"net/url"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract"
)

// skippedExts are the extensions of links that are not requested: images,
// audio, video, fonts, style sheets, scripts, archives and executables,
// which no reader turns into text. Any other link is requested and its
// content decides what it is.
var skippedExts = map[string]bool{
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".svg": true, ".ico": true,
	".bmp": true, ".avif": true, ".heic": true, ".tif": true, ".tiff": true,
	".mp3": true, ".wav": true, ".ogg": true, ".flac": true, ".m4a": true, ".aac": true,
	".mp4": true, ".webm": true, ".mkv": true, ".avi": true, ".mov": true, ".m4v": true, ".wmv": true,
	".woff": true, ".woff2": true, ".ttf": true, ".otf": true, ".eot": true,
	".css": true, ".js": true, ".mjs": true, ".map": true, ".wasm": true,
	".zip": true, ".gz": true, ".tgz": true, ".bz2": true, ".xz": true, ".7z": true, ".rar": true, ".tar": true,
	".exe": true, ".dmg": true, ".msi": true, ".deb": true, ".rpm": true, ".apk": true, ".iso": true, ".jar": true,
}

// skippedDeclared reports declared types whose body is not worth reading:
// media no reader turns into text.
func skippedDeclared(mt string) bool {
	for _, p := range []string{"image/", "audio/", "video/", "font/"} {
		if strings.HasPrefix(mt, p) {
			return true
		}
	}
	return false
}

// textTypes are the declared types under which a body that reads as text
// is taken as a document; text under another type (CSS, JavaScript, JSON,
// XML) is not one.
var textTypes = map[string]bool{
	"": true, "text/plain": true, "text/html": true, "application/xhtml+xml": true,
	"text/markdown": true, "text/x-markdown": true, "text/csv": true, "application/csv": true,
	"text/tab-separated-values": true, "application/octet-stream": true, "binary/octet-stream": true,
	"application/unknown": true, "application/binary": true, "application/pdf": true,
}

var errNotDocument = errors.New("not a document")

// contentType decides how a body is read: by its content first, so that
// a link named .pdf answered with a web page is read as HTML and a page
// named .html holding a PDF as a PDF; then, for text, by the declared type
// and the name (Markdown, CSV, TSV). It returns one of the extract.MIME*
// types but the images, or an error wrapping errNotDocument saying what
// the body is.
func contentType(declared string, u *url.URL, body []byte) (string, error) {
	mt := mediaType(declared)
	t, err := extract.Detect("", "", bytes.NewReader(body), int64(len(body)))
	if err != nil {
		if len(bytes.TrimSpace(body)) == 0 {
			return "", errorf(errNotDocument, "empty body")
		}
		return "", errorf(errNotDocument, "%s", strings.TrimPrefix(err.Error(), extract.ErrUnsupported.Error()+": "))
	}
	if t != extract.MIMEText {
		return t, nil
	}
	// Text: the declared type and the name say which kind.
	if !textTypes[mt] {
		return "", errorf(errNotDocument, "%s", mt)
	}
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return extract.MIMEHTML, nil
	case mt == "text/markdown" || mt == "text/x-markdown":
		return extract.MIMEMarkdown, nil
	case mt == "text/csv" || mt == "application/csv":
		return extract.MIMECSV, nil
	case mt == "text/tab-separated-values":
		return extract.MIMETSV, nil
	}
	switch extOf(u) {
	case ".md", ".markdown", ".mdown", ".mkd":
		return extract.MIMEMarkdown, nil
	case ".csv":
		return extract.MIMECSV, nil
	case ".tsv", ".tab":
		return extract.MIMETSV, nil
	case ".html", ".htm", ".xhtml":
		return extract.MIMEHTML, nil
	}
	return extract.MIMEText, nil
}

// mediaType returns the lower-cased media type of a Content-Type value.
func mediaType(declared string) string {
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil {
		mt, _, _ = strings.Cut(declared, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}
