package extract

import (
	"bytes"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/docs/extract/internal/safetext"
)

// SniffLen is how many leading bytes of a file DetectType looks at; passing
// more is harmless.
const SniffLen = 1024

// binarySignatures are leading bytes of common formats that are not text.
// Matching one makes a file unsupported whatever its name claims, so an image
// renamed to .txt is refused instead of being indexed as noise.
var binarySignatures = []struct {
	prefix string
	kind   string
}{
	{"\x89PNG\r\n\x1a\n", "PNG image"},
	{"\xff\xd8\xff", "JPEG image"},
	{"GIF87a", "GIF image"},
	{"GIF89a", "GIF image"},
	{"II*\x00", "TIFF image"},
	{"MM\x00*", "TIFF image"},
	{"PK\x03\x04", "ZIP archive or office document"},
	{"PK\x05\x06", "ZIP archive"},
	{"\x1f\x8b", "gzip archive"},
	{"\xfd7zXZ\x00", "xz archive"},
	{"7z\xbc\xaf\x27\x1c", "7-Zip archive"},
	{"Rar!\x1a\x07", "RAR archive"},
	{"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "legacy office document"},
	{"\x7fELF", "executable"},
	{"\x00asm", "WebAssembly module"},
	{"OggS", "Ogg media"},
	{"ID3\x02", "MP3 audio"},
	{"ID3\x03", "MP3 audio"},
	{"ID3\x04", "MP3 audio"},
	{"fLaC", "FLAC audio"},
	{"%!PS", "PostScript document"},
	{"{\\rtf", "RTF document"},
}

// DetectType returns the media type to extract a file as: one of MIMEPDF,
// MIMEText, MIMEMarkdown or MIMEHTML. It weighs, in order, the content
// (head, the file's first bytes: a PDF header wins, a known binary format
// loses), the file name's extension, the declared media type, and finally a
// sniff of head for HTML or text. Anything else returns an error wrapping
// ErrUnsupported.
func DetectType(fileName string, declaredMIME string, head []byte) (string, error) {
	if len(head) > SniffLen {
		head = head[:SniffLen]
	}
	if bytes.HasPrefix(head, []byte("%PDF-")) {
		return MIMEPDF, nil
	}
	for _, sig := range binarySignatures {
		if bytes.HasPrefix(head, []byte(sig.prefix)) {
			return "", fmt.Errorf("%w: %s", ErrUnsupported, sig.kind)
		}
	}
	if isMediaContainer(head) {
		return "", fmt.Errorf("%w: audio, video or image container", ErrUnsupported)
	}

	switch strings.ToLower(path.Ext(fileName)) {
	case ".pdf":
		return MIMEPDF, nil
	case ".txt", ".text", ".log", ".csv", ".tsv":
		return MIMEText, nil
	case ".md", ".markdown", ".mdown", ".mkd":
		return MIMEMarkdown, nil
	case ".html", ".htm", ".xhtml":
		return MIMEHTML, nil
	}

	switch mt := normaliseMIME(declaredMIME); mt {
	case MIMEPDF, MIMEText, MIMEMarkdown, MIMEHTML:
		return mt, nil
	}

	if looksLikeHTML(head) {
		return MIMEHTML, nil
	}
	if looksLikeText(head) {
		return MIMEText, nil
	}
	name := fileName
	if name == "" {
		name = declaredMIME
	}
	// The name comes from the upload: quoted, and bounded in length.
	return "", safetext.Error(fmt.Errorf("%w: %q", ErrUnsupported, name))
}

// isMediaContainer recognises RIFF (WAV, AVI, WebP) and ISO base media
// (MP4, MOV, HEIC) files, whose signatures are not at offset zero.
func isMediaContainer(head []byte) bool {
	if len(head) >= 12 && string(head[:4]) == "RIFF" {
		return true
	}
	return len(head) >= 12 && string(head[4:8]) == "ftyp"
}

// looksLikeHTML reports whether head starts, after a byte order mark and
// blank space, with a tag that only HTML documents start with.
func looksLikeHTML(head []byte) bool {
	s := bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	s = bytes.TrimLeft(s, " \t\r\n\f")
	if len(s) > 64 {
		s = s[:64]
	}
	lower := strings.ToLower(string(s))
	for _, p := range []string{"<!doctype html", "<html", "<head", "<body"} {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	return false
}

// looksLikeText reports whether head reads as text: UTF-16 with a byte order
// mark, or UTF-8 (possibly cut mid-character at the end) with few control
// characters.
func looksLikeText(head []byte) bool {
	if len(head) == 0 {
		return false
	}
	if bytes.HasPrefix(head, []byte("\xfe\xff")) || bytes.HasPrefix(head, []byte("\xff\xfe")) {
		return true
	}
	controls, invalid := 0, 0
	for i := 0; i < len(head); {
		r, n := utf8.DecodeRune(head[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			// A rune cut by the end of head is not evidence of binary data.
			if len(head)-i >= utf8.UTFMax {
				invalid++
			}
		case r < 0x20 && r != '\n' && r != '\r' && r != '\t' && r != '\f':
			controls++
		}
		i += n
	}
	// Legacy single-byte text (Latin-1, Windows-1252) is invalid UTF-8 but
	// still text; binary data also carries many control bytes.
	return controls*20 <= len(head) && invalid*4 <= len(head)
}
