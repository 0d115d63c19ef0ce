// Package cfb lists the streams of a Compound File Binary file (the OLE2
// container of legacy .doc, .xls and .ppt files, and of password-protected
// Office Open XML files), enough to say what a file is and what to do with
// it. The container is read by github.com/richardlehane/mscfb through a
// reader that bounds what it may read, so a hostile directory, FAT or DIFAT
// chain costs tens of megabytes at most; no stream's data is read.
package cfb

import (
	"errors"
	"fmt"
	"io"

	"github.com/richardlehane/mscfb"
)

// Signature starts every compound file.
const Signature = "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

const (
	// maxReadBytes bounds what reading the header, the DIFAT, the
	// directory and the FAT links of their chains may read, and so what
	// mscfb allocates (a few times what it reads; under 64 MB for the
	// hostile files of TestNamesBounded): a directory of at most some
	// 32,000 entries with 512-byte sectors, 58,000 with 4 KiB ones, where
	// Office files hold a few dozen.
	maxReadBytes = 8 << 20
	// minReadCharge is what each read costs at least, so that following a
	// chain one 4-byte FAT link at a time is bounded like reading sectors.
	minReadCharge = 512
)

// ErrFormat reports a file that is not a readable compound file.
var ErrFormat = errors.New("not a readable compound file")

// errBudget reports a file whose structures need more reading than
// maxReadBytes.
var errBudget = errors.New("the directory and its chains exceed the read limit")

// Names returns the names of the storages and streams in the directory of
// the compound file r of size bytes, in the order of the directory's tree.
func Names(r io.ReaderAt, size int64) (names []string, err error) {
	defer func() {
		// The bytes are an upload's: a reader's slip on a file no test
		// foresaw refuses the file rather than the server.
		if p := recover(); p != nil {
			names, err = nil, fmt.Errorf("%w: %v", ErrFormat, p)
		}
	}()
	br := &boundedReader{r: r, size: size, budget: maxReadBytes}
	doc, err := mscfb.New(br)
	if err != nil {
		if br.exceeded {
			return nil, fmt.Errorf("%w: %w", ErrFormat, errBudget)
		}
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	names = make([]string, 0, len(doc.File))
	for _, f := range doc.File {
		if f.Name != "" {
			names = append(names, f.Name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: empty directory", ErrFormat)
	}
	return names, nil
}

// boundedReader reads r of size bytes for mscfb within budget bytes. A
// file that ends inside its last sector reads as if padded with zeros.
type boundedReader struct {
	r        io.ReaderAt
	size     int64
	budget   int64
	exceeded bool
}

func (b *boundedReader) ReadAt(p []byte, off int64) (int, error) {
	b.budget -= int64(max(len(p), minReadCharge))
	if b.budget < 0 {
		b.exceeded = true
		return 0, errBudget
	}
	if off < 0 || off >= b.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), b.size-off)
	n, err := b.r.ReadAt(p[:want], off)
	if int64(n) < want {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	}
	clear(p[n:])
	return len(p), nil
}

// Kind says what a compound file holds, from the names of its streams.
type Kind int

// The kinds Classify tells apart.
const (
	Unknown Kind = iota
	// Encrypted is a password-protected Office Open XML file (or a legacy
	// file with RC4 encryption marked by an EncryptionInfo stream).
	Encrypted
	Word
	Excel
	PowerPoint
	Outlook
)

// Classify returns the kind of file whose directory names are names.
func Classify(names []string) Kind {
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	switch {
	case has["EncryptedPackage"]:
		return Encrypted
	case has["WordDocument"]:
		return Word
	case has["Workbook"], has["Book"]:
		return Excel
	case has["PowerPoint Document"]:
		return PowerPoint
	case has["__properties_version1.0"]:
		return Outlook
	}
	return Unknown
}
