// Package archive opens the ZIP containers of office files and e-books
// within limits: entries per archive, bytes one entry and all entries read
// may inflate to, and the inflation ratio, so that a zip bomb is refused
// from its directory, before anything is inflated, and with bounded memory.
package archive

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

// Default limits.
const (
	// DefaultMaxEntries bounds the entries of one archive. A book with
	// its images or a workbook with hundreds of sheets holds a few
	// thousand.
	DefaultMaxEntries = 20000
	// DefaultMaxEntryBytes bounds what one entry may inflate to.
	DefaultMaxEntryBytes = 512 << 20
	// DefaultMaxTotalBytes bounds what all the entries read from one
	// archive may inflate to.
	DefaultMaxTotalBytes = 1 << 30
	// BombRatio and bombFloor define a zip bomb: an entry of more than
	// bombFloor bytes that inflates more than BombRatio times. Office XML
	// compresses 5 to 50 times; deflate cannot pass about 1,030.
	BombRatio = 200
	bombFloor = 8 << 20
)

// Limits bound an archive. Zero fields take the defaults.
type Limits struct {
	MaxEntries    int
	MaxEntryBytes int64
	MaxTotalBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	return l
}

// Archive is an open ZIP file. Entry names are matched without regard to
// case or to a leading slash or backslashes, as the Open Packaging
// Conventions match part names.
type Archive struct {
	z      *zip.Reader
	byName map[string]*zip.File
	lim    Limits
	// read is the sum of the declared sizes of the entries opened, which
	// the ZIP reader enforces as upper bounds.
	read int64
}

// IsZip reports whether data starts like a ZIP file.
func IsZip(head []byte) bool {
	return bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06"))
}

// Open reads the directory of the ZIP file r of size bytes. It fails with
// textdoc.ErrTooLarge when the archive holds more entries than allowed
// (before reading the directory), and textdoc.ErrCorrupt when it is no
// readable ZIP file.
func Open(r io.ReaderAt, size int64, lim Limits) (*Archive, error) {
	lim = lim.withDefaults()
	n, err := countEntries(r, size)
	if err != nil {
		return nil, err
	}
	if n > uint64(lim.MaxEntries) {
		return nil, fmt.Errorf("%w: the archive holds %d entries, more than the limit of %d", textdoc.ErrTooLarge, n, lim.MaxEntries)
	}
	z, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		// Names with ".." are harmless here: nothing is written to disk.
		return nil, fmt.Errorf("%w: not a readable ZIP archive: %v", textdoc.ErrCorrupt, err)
	}
	if len(z.File) > lim.MaxEntries {
		return nil, fmt.Errorf("%w: the archive holds %d entries, more than the limit of %d", textdoc.ErrTooLarge, len(z.File), lim.MaxEntries)
	}
	a := &Archive{z: z, byName: make(map[string]*zip.File, len(z.File)), lim: lim}
	for _, f := range z.File {
		key := normalise(f.Name)
		if _, dup := a.byName[key]; !dup {
			a.byName[key] = f
		}
	}
	return a, nil
}

// countEntries reads the entry count from the end of central directory
// record (or its ZIP64 form) without reading the directory itself.
func countEntries(r io.ReaderAt, size int64) (uint64, error) {
	const eocdLen, maxComment = 22, 65535
	tail := min(size, eocdLen+maxComment)
	buf := make([]byte, tail)
	if _, err := r.ReadAt(buf, size-tail); err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("%w: reading the ZIP directory: %v", textdoc.ErrCorrupt, err)
	}
	i := bytes.LastIndex(buf, []byte("PK\x05\x06"))
	if i < 0 || len(buf)-i < eocdLen {
		return 0, fmt.Errorf("%w: not a readable ZIP archive: no end of central directory (truncated?)", textdoc.ErrCorrupt)
	}
	n := uint64(binary.LittleEndian.Uint16(buf[i+10:]))
	if n != 0xffff || i < 20 || string(buf[i-20:i-16]) != "PK\x06\x07" {
		return n, nil
	}
	// A ZIP64 locator points to the ZIP64 record, which holds the count.
	off := int64(binary.LittleEndian.Uint64(buf[i-20+8:]))
	rec := make([]byte, 56)
	if off < 0 || off > size-56 {
		return 0, fmt.Errorf("%w: ZIP64 directory record out of the file", textdoc.ErrCorrupt)
	}
	if _, err := r.ReadAt(rec, off); err != nil || string(rec[:4]) != "PK\x06\x06" {
		return 0, fmt.Errorf("%w: unreadable ZIP64 directory record", textdoc.ErrCorrupt)
	}
	return binary.LittleEndian.Uint64(rec[32:]), nil
}

func normalise(name string) string {
	return strings.ToLower(strings.TrimLeft(strings.ReplaceAll(name, `\`, "/"), "/"))
}

// Names returns the names of the entries, sorted.
func (a *Archive) Names() []string {
	names := make([]string, 0, len(a.z.File))
	for _, f := range a.z.File {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	return names
}

// Has reports whether the archive holds the entry name.
func (a *Archive) Has(name string) bool {
	_, ok := a.byName[normalise(name)]
	return ok
}

// Size returns the declared inflated size of the entry name, 0 when there
// is none.
func (a *Archive) Size(name string) int64 {
	if f, ok := a.byName[normalise(name)]; ok {
		return int64(min(f.UncompressedSize64, 1<<62))
	}
	return 0
}

// Open opens the entry name for reading. Errors wrap fs.ErrNotExist,
// textdoc.ErrTooLarge (the entry or the archive's running total beyond
// the limits, or a zip bomb), textdoc.ErrUnsupported (an encrypted entry or
// an unknown compression method) or textdoc.ErrCorrupt; reads fail with
// textdoc.ErrCorrupt when the data is damaged.
func (a *Archive) Open(name string) (io.ReadCloser, error) {
	f, ok := a.byName[normalise(name)]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	if err := a.check(f); err != nil {
		return nil, err
	}
	rc, err := f.Open()
	if err != nil {
		if errors.Is(err, zip.ErrAlgorithm) {
			return nil, fmt.Errorf("%w: %s is compressed with method %d, which cannot be read", textdoc.ErrUnsupported, f.Name, f.Method)
		}
		return nil, fmt.Errorf("%w: %s: %v", textdoc.ErrCorrupt, f.Name, err)
	}
	a.read += int64(f.UncompressedSize64)
	return &entryReader{rc: rc, name: f.Name}, nil
}

// check applies the limits to an entry from its directory record. The
// ZIP reader fails an entry that inflates to more than its declared size,
// so the declared sizes bound the work.
func (a *Archive) check(f *zip.File) error {
	size := f.UncompressedSize64
	switch {
	case f.Flags&0x1 != 0:
		return fmt.Errorf("%w: %s is encrypted (a password-protected ZIP archive)", textdoc.ErrUnsupported, f.Name)
	case size > uint64(a.lim.MaxEntryBytes):
		return fmt.Errorf("%w: %s inflates to %d bytes, more than the limit of %d", textdoc.ErrTooLarge, f.Name, size, a.lim.MaxEntryBytes)
	case uint64(a.read)+size > uint64(a.lim.MaxTotalBytes):
		return fmt.Errorf("%w: the archive inflates to more than %d bytes (the limit)", textdoc.ErrTooLarge, a.lim.MaxTotalBytes)
	case size > bombFloor && size/max(f.CompressedSize64, 1) > BombRatio:
		return fmt.Errorf("%w: %s inflates %d times, from %d to %d bytes (a zip bomb?)", textdoc.ErrTooLarge, f.Name, size/max(f.CompressedSize64, 1), f.CompressedSize64, size)
	}
	return nil
}

// ReadAll returns the inflated bytes of the entry name; see Open.
func (a *Archive) ReadAll(name string) ([]byte, error) {
	rc, err := a.Open(name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// entryReader reports damage in an entry's data as textdoc.ErrCorrupt.
type entryReader struct {
	rc   io.ReadCloser
	name string
}

func (e *entryReader) Read(p []byte) (int, error) {
	n, err := e.rc.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %s: %v", textdoc.ErrCorrupt, e.name, err)
	}
	return n, err
}

func (e *entryReader) Close() error { return e.rc.Close() }

// Resolve returns the entry a relationship of the part from points to:
// target relative to from's folder, or from the root when it starts with a
// slash. URL escapes are decoded and fragments dropped.
func Resolve(from, target string) string {
	target, _, _ = strings.Cut(target, "#")
	if u, err := unescape(target); err == nil {
		target = u
	}
	target = strings.ReplaceAll(target, `\`, "/")
	if strings.HasPrefix(target, "/") {
		return strings.TrimPrefix(path.Clean(target), "/")
	}
	return strings.TrimPrefix(path.Clean(path.Join(path.Dir(from), target)), "/")
}

// unescape decodes %XX escapes, which part names may hold.
func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+3], "%02x", &v); err == nil {
				b.WriteByte(v)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

// CheckAll applies the limits to every entry from its directory record, as
// if all were to be read: for handing the archive to a reader that
// inflates every entry.
func (a *Archive) CheckAll() error {
	var total uint64
	for _, f := range a.z.File {
		if err := a.check(f); err != nil {
			return err
		}
		total += f.UncompressedSize64
		if total > uint64(a.lim.MaxTotalBytes) {
			return fmt.Errorf("%w: the archive inflates to more than %d bytes (the limit)", textdoc.ErrTooLarge, a.lim.MaxTotalBytes)
		}
	}
	return nil
}

// WriteSubset writes to w a ZIP file of the entries names, copied as they
// are stored, without inflating them: for handing a reader that inflates
// every entry only the entries it needs. Names the archive lacks are left
// out; the others are checked against the limits first.
func (a *Archive) WriteSubset(w io.Writer, names []string) error {
	zw := zip.NewWriter(w)
	for _, name := range names {
		f, ok := a.byName[normalise(name)]
		if !ok {
			continue
		}
		if err := a.check(f); err != nil {
			return err
		}
		hdr := f.FileHeader
		dst, err := zw.CreateRaw(&hdr)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", textdoc.ErrCorrupt, f.Name, err)
		}
		src, err := f.OpenRaw()
		if err != nil {
			return fmt.Errorf("%w: %s: %v", textdoc.ErrCorrupt, f.Name, err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			return fmt.Errorf("%w: %s: %v", textdoc.ErrCorrupt, f.Name, err)
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("%w: %v", textdoc.ErrCorrupt, err)
	}
	return nil
}

// Limit returns the bytes all entries read may inflate to.
func (a *Archive) Limit() int64 {
	return a.lim.MaxTotalBytes
}
