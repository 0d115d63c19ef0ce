package cfb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"unicode/utf16"
)

const (
	free    = 0xffffffff
	end     = 0xfffffffe
	fatSect = 0xfffffffd
)

var le = binary.LittleEndian

// header returns a version 3 (512-byte sectors, shift 9) or 4 (4 KiB,
// shift 12) header with no FAT, DIFAT or mini FAT, for a test to fill in.
func header(shift uint16) []byte {
	h := make([]byte, 512)
	copy(h, Signature)
	le.PutUint16(h[0x18:], 0x3e)
	le.PutUint16(h[0x1a:], 3)
	if shift == 12 {
		le.PutUint16(h[0x1a:], 4)
	}
	le.PutUint16(h[0x1c:], 0xfffe)
	le.PutUint16(h[0x1e:], shift)
	le.PutUint16(h[0x20:], 6)
	le.PutUint32(h[0x30:], end)
	le.PutUint32(h[0x38:], 4096)
	le.PutUint32(h[0x3c:], end)
	le.PutUint32(h[0x44:], end)
	for i := 0; i < 109; i++ {
		le.PutUint32(h[0x4c+4*i:], free)
	}
	return h
}

// entry writes a directory entry named name of type kind (1 storage, 2
// stream, 5 root) with the given child and right sibling.
func entry(e []byte, name string, kind byte, child, right uint32) {
	u := utf16.Encode([]rune(name))
	for j, c := range u {
		le.PutUint16(e[2*j:], c)
	}
	le.PutUint16(e[64:], uint16(2*len(u)+2))
	e[66] = kind
	le.PutUint32(e[68:], free)
	le.PutUint32(e[72:], right)
	le.PutUint32(e[76:], child)
	le.PutUint32(e[116:], end)
}

// small builds a compound file of 512-byte sectors (the header, one FAT
// sector, one directory sector) whose root holds streams.
func small(streams ...string) []byte {
	b := append(header(9), make([]byte, 1024)...)
	le.PutUint32(b[0x2c:], 1)
	le.PutUint32(b[0x30:], 1)
	le.PutUint32(b[0x4c:], 0)
	fat := b[512:1024]
	for i := range 128 {
		le.PutUint32(fat[4*i:], free)
	}
	le.PutUint32(fat[0:], fatSect)
	le.PutUint32(fat[4:], end)
	names := append([]string{"Root Entry"}, streams...)
	for i, n := range names {
		kind, child, right := byte(2), uint32(free), uint32(free)
		if i == 0 {
			kind = 5
			if len(names) > 1 {
				child = 1
			}
		} else if i+1 < len(names) {
			right = uint32(i + 1)
		}
		entry(b[1024+128*i:], n, kind, child, right)
	}
	return b
}

func TestNames(t *testing.T) {
	tests := []struct {
		name string
		file string // a fixture in extract/testdata/formats
		data []byte
		want Kind
		has  []string
	}{
		{name: "Word fixture", file: "contract.doc", want: Word, has: []string{"WordDocument", "1Table"}},
		{name: "Excel fixture", file: "budget.xls", want: Excel, has: []string{"Workbook"}},
		{name: "encrypted", data: small("EncryptionInfo", "EncryptedPackage"), want: Encrypted, has: []string{"EncryptedPackage"}},
		{name: "PowerPoint", data: small("PowerPoint Document", "Current User"), want: PowerPoint, has: []string{"Current User"}},
		{name: "Outlook", data: small("__properties_version1.0"), want: Outlook},
		{name: "unknown", data: small("Contents"), want: Unknown, has: []string{"Root Entry", "Contents"}},
		// A writer that leaves the unused end of the last sector out.
		{name: "short last sector", data: small("WordDocument")[:1024+2*128], want: Word},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.data
			if tt.file != "" {
				var err error
				if data, err = os.ReadFile(filepath.Join("..", "..", "testdata", "formats", tt.file)); err != nil {
					t.Fatal(err)
				}
			}
			names, err := Names(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("Names: %v", err)
			}
			for _, h := range tt.has {
				if !slices.Contains(names, h) {
					t.Errorf("Names = %q, want it to hold %q", names, h)
				}
			}
			if got := Classify(names); got != tt.want {
				t.Errorf("Classify(%q) = %d, want %d", names, got, tt.want)
			}
		})
	}
}

func TestNamesDamaged(t *testing.T) {
	loop := small("WordDocument")
	le.PutUint32(loop[512+4:], 1) // the directory sector's next is itself
	difatLoop := append(small("WordDocument"), make([]byte, 512)...)
	le.PutUint32(difatLoop[0x2c:], 1000)
	le.PutUint32(difatLoop[0x44:], 2) // a DIFAT sector whose next is itself
	le.PutUint32(difatLoop[0x48:], 3)
	le.PutUint32(difatLoop[len(difatLoop)-4:], 2)
	badShift := small("WordDocument")
	le.PutUint16(badShift[0x1e:], 10)
	outside := small("WordDocument")
	le.PutUint32(outside[0x30:], 1<<20)
	treeLoop := small("A", "B")
	le.PutUint32(treeLoop[1024+2*128+72:], 1) // B's right sibling is A
	tests := map[string][]byte{
		"no signature":            []byte("PK\x03\x04 not a compound file at all, long enough for a header"),
		"header only":             []byte(Signature + "garbage"),
		"bad sector shift":        badShift,
		"directory outside":       outside,
		"directory chain loops":   loop,
		"DIFAT chain loops":       difatLoop,
		"directory tree loops":    treeLoop,
		"root without any stream": small(),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			names, err := Names(bytes.NewReader(data), int64(len(data)))
			if name == "root without any stream" {
				// The root alone is a readable, empty container.
				if err != nil || Classify(names) != Unknown {
					t.Fatalf("Names = %q, %v", names, err)
				}
				return
			}
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("Names = %q, %v; want ErrFormat", names, err)
			}
			t.Log(err)
		})
	}
}

// synthetic is a compound file of size bytes computed on demand, so a test
// can hand the reader gigabytes without holding them: sector n's bytes are
// sector(n).
type synthetic struct {
	size   int64
	shift  uint16
	header []byte
	sector func(n uint32, b []byte)
	buf    []byte
}

func (s *synthetic) ReadAt(p []byte, off int64) (int, error) {
	ss := int64(1) << s.shift
	if s.buf == nil {
		s.buf = make([]byte, ss)
	}
	n := 0
	for n < len(p) && off < s.size {
		clear(s.buf)
		if off < ss {
			copy(s.buf, s.header)
		} else {
			s.sector(uint32(off/ss-1), s.buf)
		}
		src := s.buf[off%ss:]
		c := copy(p[n:], src)
		n += c
		off += int64(c)
	}
	if n < len(p) {
		return n, errors.New("EOF")
	}
	return n, nil
}

// TestNamesBounded hands the reader files of a gigabyte whose chains run
// through every sector, and checks that it gives up having allocated a
// few megabytes, not what following the chains to the end would take.
func TestNamesBounded(t *testing.T) {
	const size = 1 << 30

	// The DIFAT: a header announcing millions of DIFAT sectors, each
	// sector naming the next.
	difat := header(9)
	le.PutUint32(difat[0x2c:], 0xffffff00)
	le.PutUint32(difat[0x44:], 0)
	le.PutUint32(difat[0x48:], 30_000_000)
	difatBomb := &synthetic{size: size, shift: 9, header: difat, sector: func(n uint32, b []byte) {
		for i := 0; i < 127; i++ {
			le.PutUint32(b[4*i:], n)
		}
		le.PutUint32(b[508:], n+1)
	}}

	// The directory: 4 KiB sectors, 109 FAT sectors at the end of the
	// file each linking every sector to the next, and a directory that
	// starts at sector 0 and runs through the 111,616 sectors they cover,
	// 32 streams to a sector.
	const fatBase = size>>12 - 200
	dir := header(12)
	le.PutUint32(dir[0x2c:], 109)
	le.PutUint32(dir[0x30:], 0)
	for i := range 109 {
		le.PutUint32(dir[0x4c+4*i:], uint32(fatBase+i))
	}
	dirBomb := &synthetic{size: size, shift: 12, header: dir, sector: func(n uint32, b []byte) {
		if n >= fatBase {
			for i := range 1024 {
				le.PutUint32(b[4*i:], (n-fatBase)*1024+uint32(i)+1)
			}
			return
		}
		for i := range 32 {
			id := n*32 + uint32(i)
			entry(b[128*i:], "Stream", 2, free, id+1)
		}
		b[66] = 5
	}}

	for name, f := range map[string]*synthetic{"DIFAT": difatBomb, "directory": dirBomb} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			names, err := Names(f, f.size)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("Names = %d names, %v; want ErrFormat", len(names), err)
			}
			const bound = 64 << 20
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
				t.Errorf("Names allocated %d MB, want at most %d MB", alloc>>20, bound>>20)
			}
			t.Logf("%v; allocated %.1f MB", err, float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
		})
	}
}

// FuzzNames checks that no file, however damaged, panics Names or makes it
// fail with anything but ErrFormat.
func FuzzNames(f *testing.F) {
	f.Add(small("WordDocument", "1Table"))
	f.Add(small("EncryptionInfo", "EncryptedPackage"))
	if b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "formats", "budget.xls")); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		names, err := Names(bytes.NewReader(data), int64(len(data)))
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("Names error %v", err)
		}
		if err == nil && len(names) == 0 {
			t.Fatal("no names and no error")
		}
	})
}
