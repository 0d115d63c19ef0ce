package extract

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/safetext"
)

// Kinds of archive Unpack reads: a folder of documents sent as one file.
const (
	ArchiveZip   = "zip"
	ArchiveTarGz = "tar.gz"
)

// ArchiveOf reports the kind of archive of documents r, of size bytes,
// is: ArchiveZip for a ZIP file that is not itself a document (Office,
// OpenDocument, EPUB: those are read as one file), ArchiveTarGz for a
// gzip-compressed tar file; "" for anything else.
func (l Limits) ArchiveOf(r io.ReaderAt, size int64) string {
	head := make([]byte, min(size, 512))
	n, _ := r.ReadAt(head, 0)
	head = head[:n]
	switch {
	case archive.IsZip(head):
		a, err := archive.Open(r, size, l.archiveLimits())
		if err != nil || documentZip(a) {
			// A damaged ZIP file is left to Detect, which says why.
			return ""
		}
		return ArchiveZip
	case bytes.HasPrefix(head, []byte("\x1f\x8b")):
		zr, err := gzip.NewReader(io.NewSectionReader(r, 0, size))
		if err != nil {
			return ""
		}
		defer zr.Close()
		// A tar header is 512 bytes with "ustar" at 257 (POSIX and GNU).
		block := make([]byte, 512)
		if _, err := io.ReadFull(zr, block); err != nil || !bytes.HasPrefix(block[257:], []byte("ustar")) {
			return ""
		}
		return ArchiveTarGz
	}
	return ""
}

// documentZip reports whether a ZIP file is a document: the entries that
// Office, OpenDocument and EPUB files are known by.
func documentZip(a *archive.Archive) bool {
	for _, name := range []string{"mimetype", "[Content_Types].xml", "word/document.xml", "xl/workbook.xml",
		"ppt/presentation.xml", "META-INF/container.xml", "META-INF/manifest.xml"} {
		if a.Has(name) {
			return true
		}
	}
	return false
}

// Unpack calls each with every regular file of the archive r of size
// bytes, of kind (from ArchiveOf), in the archive's order for a tar file
// and by name for a ZIP file, within the limits documents' archives have:
// MaxArchiveEntries entries, MaxInflatedBytes in all (and per entry), and
// no ZIP entry inflating like a bomb. A limit passed stops it with an
// error wrapping ErrTooLarge, naming the limit. Folders, links and the
// files archivers add beside the documents (__MACOSX/, .DS_Store) are
// skipped. An error of each stops it and is returned.
func (l Limits) Unpack(kind string, r io.ReaderAt, size int64, each func(name string, size int64, r io.Reader) error) error {
	switch kind {
	case ArchiveZip:
		return l.unpackZip(r, size, each)
	case ArchiveTarGz:
		return l.unpackTarGz(r, size, each)
	}
	return fmt.Errorf("%w: not an archive of documents", ErrUnsupported)
}

func (l Limits) unpackZip(r io.ReaderAt, size int64, each func(string, int64, io.Reader) error) error {
	a, err := archive.Open(r, size, l.archiveLimits())
	if err != nil {
		return safetext.Error(containerError(err))
	}
	for _, name := range a.Names() {
		if strings.HasSuffix(name, "/") || skipEntry(name) {
			continue
		}
		rc, err := a.Open(name)
		if err != nil {
			return safetext.Error(containerError(err))
		}
		err = each(name, a.Size(name), rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (l Limits) unpackTarGz(r io.ReaderAt, size int64, each func(string, int64, io.Reader) error) error {
	lim := l.archiveLimits()
	if lim.MaxEntries <= 0 {
		lim.MaxEntries = archive.DefaultMaxEntries
	}
	zr, err := gzip.NewReader(bufio.NewReader(io.NewSectionReader(r, 0, size)))
	if err != nil {
		return fmt.Errorf("%w: damaged gzip file: %v", ErrUnsupported, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var entries int
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: damaged tar archive: %v", ErrUnsupported, err)
		}
		entries++
		if entries > lim.MaxEntries {
			return fmt.Errorf("%w: the archive holds more than %d entries, the limit", ErrTooLarge, lim.MaxEntries)
		}
		if h.Typeflag != tar.TypeReg || skipEntry(h.Name) {
			continue
		}
		switch {
		case h.Size > lim.MaxEntryBytes:
			return fmt.Errorf("%w: %s holds %d bytes, more than the limit of %d", ErrTooLarge, safetext.Message(h.Name), h.Size, lim.MaxEntryBytes)
		case total+h.Size > lim.MaxTotalBytes:
			return fmt.Errorf("%w: the archive unpacks to more than %d bytes (the limit)", ErrTooLarge, lim.MaxTotalBytes)
		}
		total += h.Size
		// A gzip stream inflates at most about 1,030 times; the total
		// bounds what a bomb can cost, the tar header each entry's size.
		if err := each(h.Name, h.Size, io.LimitReader(tr, h.Size)); err != nil {
			return err
		}
	}
}

// skipEntry reports the files archivers add beside the documents: macOS's
// resource forks and folder settings, and hidden files.
func skipEntry(name string) bool {
	name = strings.TrimLeft(strings.ReplaceAll(name, `\`, "/"), "/")
	if strings.HasPrefix(name, "__MACOSX/") {
		return true
	}
	base := path.Base(name)
	return strings.HasPrefix(base, ".") || base == "Thumbs.db" || base == "desktop.ini"
}
