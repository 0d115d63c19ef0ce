// Package safetensors reads the safetensors format: an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the tensors' bytes. Tensors are little-endian and row-major.
//
// The whole file is read into memory once; tensors are views of it, and the
// header is checked against the file so that a truncated or corrupt file is
// an error rather than a panic or garbage.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// ErrFormat means the data is not a valid safetensors file.
var ErrFormat = errors.New("invalid safetensors file")

// maxHeader bounds the JSON header, as the reference implementation does
// (100 MB), so that a corrupt length cannot ask for any amount of memory.
const maxHeader = 100 << 20

// DType is a tensor element type as the header spells it ("F32", "I8" ...).
type DType string

// Element types this package knows the size of.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	BOOL DType = "BOOL"
)

// Size returns the bytes of one element, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16, I16:
		return 2
	case I8, U8, BOOL:
		return 1
	}
	return 0
}

// Tensor is one named tensor of a File.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	// Data holds the elements, little-endian, row-major.
	Data []byte
}

// Len returns the number of elements.
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed safetensors file.
type File struct {
	// Metadata is the header's optional string map.
	Metadata map[string]string
	tensors  map[string]Tensor
}

// ReadFile reads and parses the file at path.
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > math.MaxInt-1 {
		return nil, fmt.Errorf("%w: %s is too large", ErrFormat, path)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	file, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return file, nil
}

type entryJSON struct {
	DType       DType   `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Parse parses a whole safetensors file held in b. The tensors refer to b.
func Parse(b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header length", ErrFormat, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, fmt.Errorf("%w: header length %d does not fit a file of %d bytes", ErrFormat, n, len(b))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	data := b[8+n:]
	f := &File{tensors: map[string]Tensor{}}
	type span struct {
		name       string
		start, end int64
	}
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return nil, fmt.Errorf("%w: __metadata__: %v", ErrFormat, err)
			}
			continue
		}
		var e entryJSON
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %v", ErrFormat, name, err)
		}
		size := e.DType.Size()
		if size == 0 {
			return nil, fmt.Errorf("%w: tensor %q has unknown dtype %q", ErrFormat, name, e.DType)
		}
		if len(e.DataOffsets) != 2 || e.DataOffsets[0] < 0 || e.DataOffsets[1] < e.DataOffsets[0] || e.DataOffsets[1] > int64(len(data)) {
			return nil, fmt.Errorf("%w: tensor %q has data offsets %v outside the %d data bytes", ErrFormat, name, e.DataOffsets, len(data))
		}
		elems := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && elems > math.MaxInt32*int64(1<<20)/int64(d)) {
				return nil, fmt.Errorf("%w: tensor %q has shape %v", ErrFormat, name, e.Shape)
			}
			elems *= int64(d)
		}
		if got := e.DataOffsets[1] - e.DataOffsets[0]; got != elems*int64(size) {
			return nil, fmt.Errorf("%w: tensor %q: shape %v of %s needs %d bytes, offsets give %d", ErrFormat, name, e.Shape, e.DType, elems*int64(size), got)
		}
		f.tensors[name] = Tensor{Name: name, DType: e.DType, Shape: e.Shape, Data: data[e.DataOffsets[0]:e.DataOffsets[1]:e.DataOffsets[1]]}
		spans = append(spans, span{name, e.DataOffsets[0], e.DataOffsets[1]})
	}
	// The format requires the tensors to tile the data exactly: no
	// overlap, no hole. A hole or an overlap means a corrupt header.
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var pos int64
	for _, s := range spans {
		if s.start != pos {
			return nil, fmt.Errorf("%w: tensor %q starts at byte %d, want %d", ErrFormat, s.name, s.start, pos)
		}
		pos = s.end
	}
	if pos != int64(len(data)) {
		return nil, fmt.Errorf("%w: tensors cover %d of %d data bytes", ErrFormat, pos, len(data))
	}
	return f, nil
}

// Tensor returns the named tensor.
func (f *File) Tensor(name string) (Tensor, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// Names lists the tensors, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.tensors))
	for n := range f.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Float64s decodes a tensor of F64, F32, F16 or BF16 elements.
func (t Tensor) Float64s() ([]float64, error) {
	n := t.Len()
	out := make([]float64, n)
	switch t.DType {
	case F64:
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
	case F32:
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	case F16:
		for i := range out {
			out[i] = float64(HalfToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:])))
		}
	case BF16:
		for i := range out {
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16))
		}
	default:
		return nil, fmt.Errorf("tensor %q: %s is not a float type", t.Name, t.DType)
	}
	return out, nil
}

// Ints decodes a tensor of I64, I32, I16, I8 or U8 elements.
func (t Tensor) Ints() ([]int64, error) {
	n := t.Len()
	out := make([]int64, n)
	switch t.DType {
	case I64:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
	case I32:
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	case I16:
		for i := range out {
			out[i] = int64(int16(binary.LittleEndian.Uint16(t.Data[2*i:])))
		}
	case I8:
		for i := range out {
			out[i] = int64(int8(t.Data[i]))
		}
	case U8:
		for i := range out {
			out[i] = int64(t.Data[i])
		}
	default:
		return nil, fmt.Errorf("tensor %q: %s is not an integer type", t.Name, t.DType)
	}
	return out, nil
}

// HalfToFloat32 converts an IEEE 754 half-precision value to float32,
// exactly (every half is a float32).
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: shift the mantissa up until its leading one is implicit.
	e := uint32(127 - 15 + 1)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// Encode writes a safetensors file holding tensors in the given order, for
// tests and tools that make models. The header is padded with spaces to a
// multiple of 8 bytes, as the reference writer does.
func Encode(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header := map[string]any{}
	if metadata != nil {
		header["__metadata__"] = metadata
	}
	var off int64
	for _, t := range tensors {
		if t.DType.Size() == 0 || int64(len(t.Data)) != int64(t.Len()*t.DType.Size()) {
			return fmt.Errorf("tensor %q: %d bytes for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		header[t.Name] = entryJSON{DType: t.DType, Shape: t.Shape, DataOffsets: []int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for (8+len(h))%8 != 0 {
		h = append(h, ' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}
