package extract

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/cfb"
	"github.com/mcpsearch/mcpsearch/extract/internal/safetext"
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
	{"\x1f\x8b", "gzip archive"},
	{"\xfd7zXZ\x00", "xz archive"},
	{"7z\xbc\xaf\x27\x1c", "7-Zip archive"},
	{"Rar!\x1a\x07", "RAR archive"},
	{"\x7fELF", "executable"},
	{"\x00asm", "WebAssembly module"},
	{"OggS", "Ogg media"},
	{"ID3\x02", "MP3 audio"},
	{"ID3\x03", "MP3 audio"},
	{"ID3\x04", "MP3 audio"},
	{"fLaC", "FLAC audio"},
	{"%!PS", "PostScript document"},
}

// DetectType returns the media type to extract a file as, judging from its
// first bytes (head), its name and its declared type: one of the MIME*
// constants but the image types. It weighs, in order, the content (a PDF,
// RTF or OpenDocument header wins, a known binary format loses), the file
// name's extension, the declared media type, and finally a sniff of head
// for HTML or text. Anything else returns an error wrapping ErrUnsupported.
//
// The first bytes of a ZIP file do not always tell a Word document from a
// workbook: DetectType then trusts the extension or declared type, and
// Extract reads the file as what its content turns out to be. Detect, given
// the whole file, looks inside containers and is exact; it also says why a
// legacy or password-protected Office file is refused.
func DetectType(fileName string, declaredMIME string, head []byte) (string, error) {
	if len(head) > SniffLen {
		head = head[:SniffLen]
	}
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return MIMEPDF, nil
	case bytes.HasPrefix(head, []byte(`{\rtf`)):
		return MIMERTF, nil
	case bytes.HasPrefix(head, []byte(cfb.Signature)):
		return "", fmt.Errorf("%w: %s", ErrUnsupported, cfbAdvice(cfb.Unknown))
	case archive.IsZip(head):
		return detectZipHead(fileName, declaredMIME, head)
	}
	if kind := imageKind(head); kind != "" {
		return "", fmt.Errorf("%w: %s image", ErrUnsupported, kind)
	}
	for _, sig := range binarySignatures {
		if bytes.HasPrefix(head, []byte(sig.prefix)) {
			return "", fmt.Errorf("%w: %s", ErrUnsupported, sig.kind)
		}
	}
	if isMediaContainer(head) {
		return "", fmt.Errorf("%w: audio, video or image container", ErrUnsupported)
	}

	switch ext := strings.ToLower(path.Ext(fileName)); ext {
	case ".pdf":
		return MIMEPDF, nil
	case ".txt", ".text", ".log":
		return MIMEText, nil
	case ".csv":
		return MIMECSV, nil
	case ".tsv", ".tab":
		return MIMETSV, nil
	case ".md", ".markdown", ".mdown", ".mkd":
		return MIMEMarkdown, nil
	case ".html", ".htm", ".xhtml":
		return MIMEHTML, nil
	case ".rtf":
		// An RTF file starts with {\rtf; one that does not is read as
		// what its bytes look like below.
	}

	switch mt := normaliseMIME(declaredMIME); mt {
	case MIMEPDF, MIMEText, MIMEMarkdown, MIMEHTML, MIMECSV, MIMETSV:
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

// Detect returns the media type to extract a file as, like DetectType but
// from the whole file, r of size bytes: it opens ZIP containers to tell
// DOCX, PPTX, XLSX, ODT, ODP, ODS and EPUB apart by their content, whatever
// their name, and reads the directory of a legacy compound file to say what
// it is and what to do ("save it as .docx", "remove the password").
// Images are refused as with DetectType; Limits.Detect accepts them when
// OCR can read them.
//
// Upload handlers, the ingest command and the URL fetcher call it (or
// Limits.Detect) once they have the file; reading the container's
// directory costs a few reads at the end of the file.
func Detect(fileName, declaredMIME string, r io.ReaderAt, size int64) (string, error) {
	return Limits{}.Detect(fileName, declaredMIME, r, size)
}

// Detect is the package's Detect, which with l.OCR set to an engine that
// can run (not off, tesseract found) also accepts PNG, JPEG and TIFF
// images (MIMEPNG, MIMEJPEG, MIMETIFF), read through OCR; with an engine
// that cannot, it refuses them saying why ("reading images needs OCR: OCR
// is off").
func (l Limits) Detect(fileName, declaredMIME string, r io.ReaderAt, size int64) (string, error) {
	head := make([]byte, min(size, SniffLen))
	n, err := r.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("extract: read %s: %w", safetext.Message(fileName), err)
	}
	head = head[:n]
	switch {
	case archive.IsZip(head):
		a, err := archive.Open(r, size, l.archiveLimits())
		if err != nil {
			return "", safetext.Error(containerError(err))
		}
		mt, err := classifyZip(a)
		return mt, safetext.Error(err)
	case bytes.HasPrefix(head, []byte(cfb.Signature)):
		names, err := cfb.Names(r, size)
		if err != nil {
			return "", fmt.Errorf("%w: %s", ErrUnsupported, cfbAdvice(cfb.Unknown))
		}
		return "", fmt.Errorf("%w: %s", ErrUnsupported, cfbAdvice(cfb.Classify(names)))
	}
	if mt := imageMIME(head); mt != "" && l.OCR != nil {
		if err := l.OCR.Available(context.Background(), false); err != nil {
			return "", fmt.Errorf("%w: %s image: reading images needs OCR: %s", ErrUnsupported, imageKind(head), unavailableReason(err))
		}
		return mt, nil
	}
	return DetectType(fileName, declaredMIME, head)
}

// containerError keeps a limit's error as it is (the file is too large)
// and reads any other failure to open a container as an unsupported file.
func containerError(err error) error {
	if errors.Is(err, ErrTooLarge) {
		return err
	}
	return fmt.Errorf("%w: damaged ZIP archive or office document: %w", ErrUnsupported, err)
}

// detectZipHead judges a ZIP file from its first bytes: an OpenDocument
// file or an e-book names its type in a first entry "mimetype" stored
// uncompressed; Office Open XML files are told apart by the names of the
// entries whose headers the head holds, else by the extension or the
// declared type.
func detectZipHead(fileName, declaredMIME string, head []byte) (string, error) {
	names, mimetype := zipHeadEntries(head)
	if mimetype != "" {
		if mt, ok := odfTypes[mimetype]; ok {
			return mt, nil
		}
	}
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "word/"):
			return MIMEDOCX, nil
		case strings.HasPrefix(n, "xl/"):
			return MIMEXLSX, nil
		case strings.HasPrefix(n, "ppt/"):
			return MIMEPPTX, nil
		}
	}
	if mt := containerByName(fileName); mt != "" {
		return mt, nil
	}
	if mt := normaliseMIME(declaredMIME); isContainer(mt) {
		return mt, nil
	}
	return "", fmt.Errorf("%w: ZIP archive (not an Office, OpenDocument or EPUB file)", ErrUnsupported)
}

// zipHeadEntries walks the local file headers that lie wholly in head and
// returns their names, lower-cased, and the content of a stored "mimetype"
// entry.
func zipHeadEntries(head []byte) (names []string, mimetype string) {
	for p := 0; p+30 <= len(head) && string(head[p:p+4]) == "PK\x03\x04"; {
		method := binary.LittleEndian.Uint16(head[p+8:])
		csize := int(binary.LittleEndian.Uint32(head[p+18:]))
		nlen := int(binary.LittleEndian.Uint16(head[p+26:]))
		xlen := int(binary.LittleEndian.Uint16(head[p+28:]))
		if p+30+nlen > len(head) {
			break
		}
		name := strings.ToLower(string(head[p+30 : p+30+nlen]))
		names = append(names, name)
		data := p + 30 + nlen + xlen
		descriptor := binary.LittleEndian.Uint16(head[p+6:])&0x8 != 0
		if name == "mimetype" && method == 0 && data < len(head) {
			switch {
			case !descriptor && csize < 128 && data+csize <= len(head):
				mimetype = strings.TrimSpace(string(head[data : data+csize]))
			case descriptor:
				// The size follows the data: the content ends where
				// the next signature starts.
				rest := head[data:min(len(head), data+128)]
				if i := bytes.Index(rest, []byte("PK")); i >= 0 {
					mimetype = strings.TrimSpace(string(rest[:i]))
				}
			}
		}
		if descriptor {
			// The next header cannot be found without the size.
			break
		}
		p = data + csize
	}
	return names, mimetype
}

// imageKind names the image format head starts with, "" for none.
func imageKind(head []byte) string {
	switch imageMIME(head) {
	case MIMEPNG:
		return "PNG"
	case MIMEJPEG:
		return "JPEG"
	case MIMETIFF:
		return "TIFF"
	}
	for _, p := range []string{"GIF87a", "GIF89a"} {
		if bytes.HasPrefix(head, []byte(p)) {
			return "GIF"
		}
	}
	return ""
}

// imageMIME returns the media type of the images OCR reads, "" for others.
func imageMIME(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return MIMEPNG
	case bytes.HasPrefix(head, []byte("\xff\xd8\xff")):
		return MIMEJPEG
	case bytes.HasPrefix(head, []byte("II*\x00")), bytes.HasPrefix(head, []byte("MM\x00*")):
		return MIMETIFF
	}
	return ""
}

// cfbAdvice says what a compound file of kind is and what to do with it.
func cfbAdvice(kind cfb.Kind) string {
	switch kind {
	case cfb.Encrypted:
		return "password-protected Office document: open it, remove the password and save it again (as .docx, .xlsx or .pptx), then upload it"
	case cfb.Word:
		return "legacy Word 97-2003 document (.doc): save it as .docx (or PDF) and upload that"
	case cfb.Excel:
		return "legacy Excel 97-2003 workbook (.xls): save it as .xlsx (or CSV) and upload that"
	case cfb.PowerPoint:
		return "legacy PowerPoint 97-2003 presentation (.ppt): save it as .pptx (or PDF) and upload that"
	case cfb.Outlook:
		return "Outlook message (.msg): save it as text, HTML or PDF and upload that"
	}
	return "legacy or password-protected Office document (.doc, .xls, .ppt): save it as .docx, .xlsx or .pptx without a password and upload that"
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
