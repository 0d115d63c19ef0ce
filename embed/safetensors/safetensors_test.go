package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func f32Bytes(xs ...float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func encode(t *testing.T, tensors []Tensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	b := encode(t, []Tensor{
		{Name: "embeddings", DType: F32, Shape: []int{2, 3}, Data: f32Bytes(1, 2, 3, -4, 5.5, 6)},
		{Name: "mapping", DType: I8, Shape: []int{3}, Data: []byte{1, 0xff, 0x80}},
		{Name: "half", DType: F16, Shape: []int{4}, Data: []byte{0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0x00, 0x7c}},
	})
	if (len(b)-8-3*4*2-3-8)%8 != 0 {
		t.Errorf("header not padded to 8 bytes")
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["format"] != "pt" {
		t.Errorf("metadata = %v", f.Metadata)
	}
	if got := f.Names(); !slices.Equal(got, []string{"embeddings", "half", "mapping"}) {
		t.Errorf("Names() = %v", got)
	}
	e, _ := f.Tensor("embeddings")
	got, err := e.Float64s()
	if err != nil || !slices.Equal(got, []float64{1, 2, 3, -4, 5.5, 6}) || !slices.Equal(e.Shape, []int{2, 3}) {
		t.Errorf("embeddings = %v %v %v", got, e.Shape, err)
	}
	m, _ := f.Tensor("mapping")
	ints, err := m.Ints()
	if err != nil || !slices.Equal(ints, []int64{1, -1, -128}) {
		t.Errorf("mapping = %v %v", ints, err)
	}
	h, _ := f.Tensor("half")
	hs, err := h.Float64s()
	if err != nil || !slices.Equal(hs, []float64{1, -2, math.Ldexp(1, -24), math.Inf(1)}) {
		t.Errorf("half = %v %v", hs, err)
	}
	if _, err := m.Float64s(); err == nil {
		t.Error("Float64s of an I8 tensor: no error")
	}
	if _, err := e.Ints(); err == nil {
		t.Error("Ints of an F32 tensor: no error")
	}
}

// TestHalf checks every half-precision value against the definition.
func TestHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		sign := 1.0
		if h&0x8000 != 0 {
			sign = -1
		}
		exp, mant := (h>>10)&0x1f, h&0x3ff
		var want float64
		switch {
		case exp == 0:
			want = sign * math.Ldexp(float64(mant), -24)
		case exp == 31 && mant == 0:
			want = math.Inf(int(sign))
		case exp == 31:
			want = math.NaN()
		default:
			want = sign * math.Ldexp(1+float64(mant)/1024, exp-15)
		}
		got := float64(HalfToFloat32(uint16(h)))
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) || math.Signbit(got) != math.Signbit(want) && !math.IsNaN(want) {
			t.Fatalf("HalfToFloat32(%#04x) = %v, want %v", h, got, want)
		}
	}
}

func TestCorrupt(t *testing.T) {
	good := encode(t, []Tensor{
		{Name: "a", DType: F32, Shape: []int{2}, Data: f32Bytes(1, 2)},
		{Name: "b", DType: F32, Shape: []int{1}, Data: f32Bytes(3)},
	})
	header := func(h string) []byte {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
		return append(append(n[:], h...), f32Bytes(1, 2, 3)...)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "shorter than the header length"},
		{"truncated data", good[:len(good)-1], "outside the"},
		{"huge header length", append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, good[8:]...), "does not fit"},
		{"not JSON", header(`{"a":`), "header"},
		{"unknown dtype", header(`{"a":{"dtype":"F8","shape":[3],"data_offsets":[0,12]}}`), `unknown dtype "F8"`},
		{"shape and size disagree", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}}`), "needs 8 bytes"},
		{"overlap", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`), "starts at byte 4"},
		{"hole", header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`), "starts at byte 8"},
		{"data left over", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`), "cover 8 of 12"},
		{"negative shape", header(`{"a":{"dtype":"F32","shape":[-3],"data_offsets":[0,12]}}`), "shape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse: %v, want ErrFormat mentioning %q", err, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	var buf bytes.Buffer
	if err := Encode(&buf, []Tensor{{Name: "a", DType: F16, Shape: []int{2, 1}, Data: []byte{0, 0x3c, 0, 0}}}, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		for _, n := range file.Names() {
			tn, _ := file.Tensor(n)
			_, _ = tn.Float64s()
			_, _ = tn.Ints()
		}
	})
}
