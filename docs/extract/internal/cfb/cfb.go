// Package cfb lists the streams of a Compound File Binary file (the OLE2
// container of legacy .doc, .xls and .ppt files, and of password-protected
// Office Open XML files), enough to say what a file is and what to do with
// it. It reads the directory only, within bounds, and never a stream's data.
package cfb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf16"
)

// Signature starts every compound file.
const Signature = "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

// maxDirEntries bounds the directory read; Office files hold a few dozen.
const maxDirEntries = 1 << 16

const (
	endOfChain = 0xfffffffe
	freeSect   = 0xffffffff
	maxRegSect = 0xfffffffa
)

// ErrFormat reports a file that is not a readable compound file.
var ErrFormat = errors.New("not a readable compound file")

// Names returns the names of the storages and streams in the directory of
// the compound file r of size bytes, in directory order.
func Names(r io.ReaderAt, size int64) ([]string, error) {
	hdr := make([]byte, 512)
	if _, err := r.ReadAt(hdr, 0); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	if !bytes.HasPrefix(hdr, []byte(Signature)) {
		return nil, fmt.Errorf("%w: no signature", ErrFormat)
	}
	shift := binary.LittleEndian.Uint16(hdr[0x1e:])
	if shift != 9 && shift != 12 {
		return nil, fmt.Errorf("%w: sector shift %d", ErrFormat, shift)
	}
	f := &file{r: r, size: size, sector: int64(1) << shift}
	f.sectors = uint32(min((size+f.sector-1)/f.sector, 1<<31))
	if err := f.readFAT(hdr); err != nil {
		return nil, err
	}
	return f.directory(binary.LittleEndian.Uint32(hdr[0x30:]))
}

type file struct {
	r       io.ReaderAt
	size    int64
	sector  int64
	sectors uint32 // sectors the file can hold
	fat     []uint32
}

// read returns sector n.
func (f *file) read(n uint32) ([]byte, error) {
	if n > maxRegSect || n >= f.sectors {
		return nil, fmt.Errorf("%w: sector %d out of the file", ErrFormat, n)
	}
	b := make([]byte, f.sector)
	off := (int64(n) + 1) * f.sector
	if _, err := f.r.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: sector %d: %v", ErrFormat, n, err)
	}
	return b, nil
}

// readFAT loads the sector allocation table from the sectors the header
// and the DIFAT chain list, each at most once.
func (f *file) readFAT(hdr []byte) error {
	perSector := int(f.sector / 4)
	var fatSectors []uint32
	for i := 0; i < 109; i++ {
		s := binary.LittleEndian.Uint32(hdr[0x4c+4*i:])
		if s <= maxRegSect {
			fatSectors = append(fatSectors, s)
		}
	}
	next := binary.LittleEndian.Uint32(hdr[0x44:])
	seen := map[uint32]bool{}
	for next <= maxRegSect {
		if seen[next] || len(seen) > int(f.sectors) {
			return fmt.Errorf("%w: the DIFAT chain loops", ErrFormat)
		}
		seen[next] = true
		b, err := f.read(next)
		if err != nil {
			return err
		}
		for i := 0; i < perSector-1; i++ {
			if s := binary.LittleEndian.Uint32(b[4*i:]); s <= maxRegSect {
				fatSectors = append(fatSectors, s)
			}
		}
		next = binary.LittleEndian.Uint32(b[4*(perSector-1):])
	}
	if len(fatSectors) > int(f.sectors) {
		return fmt.Errorf("%w: more FAT sectors than the file holds", ErrFormat)
	}
	f.fat = make([]uint32, 0, len(fatSectors)*perSector)
	for _, s := range fatSectors {
		b, err := f.read(s)
		if err != nil {
			return err
		}
		for i := 0; i < perSector; i++ {
			f.fat = append(f.fat, binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return nil
}

// directory follows the directory chain from start and returns the names of
// its entries.
func (f *file) directory(start uint32) ([]string, error) {
	var names []string
	seen := map[uint32]bool{}
	for s := start; s != endOfChain; {
		if s == freeSect || seen[s] {
			break
		}
		if len(names) >= maxDirEntries {
			return nil, fmt.Errorf("%w: more than %d directory entries", ErrFormat, maxDirEntries)
		}
		seen[s] = true
		b, err := f.read(s)
		if err != nil {
			return nil, err
		}
		for off := 0; off+128 <= len(b); off += 128 {
			e := b[off : off+128]
			kind := e[66]
			if kind != 1 && kind != 2 && kind != 5 {
				continue
			}
			n := int(binary.LittleEndian.Uint16(e[64:]))
			if n < 2 || n > 64 {
				continue
			}
			u := make([]uint16, n/2-1)
			for i := range u {
				u[i] = binary.LittleEndian.Uint16(e[2*i:])
			}
			names = append(names, string(utf16.Decode(u)))
		}
		if int(s) >= len(f.fat) {
			break
		}
		s = f.fat[s]
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: empty directory", ErrFormat)
	}
	return names, nil
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
