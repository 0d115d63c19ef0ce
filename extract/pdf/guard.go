package pdf

import (
	"bytes"
	"errors"
	"fmt"
)

// The PDF package trusts the numbers in a file's cross-reference data: a
// /Prev chain that loops, or an object stream that /Extends itself, makes it
// loop forever, and a huge /Size, /W, /Index or /N makes it allocate or spin
// without bound. Uploads are untrusted, so checkStructure reads those numbers
// first and refuses files whose values no honest file has.

// maxXrefSections bounds the /Prev chain (one section per incremental save).
const maxXrefSections = 1024

// maxObjectNumber is the largest object number PDF allows.
const maxObjectNumber = 8388607

var errStructure = errors.New("damaged cross-reference data")

// checkStructure returns an error describing the first implausible value in
// the cross-reference chain or the object streams of data.
func checkStructure(data []byte) error {
	// Objects are at least a few bytes each, even compressed in object
	// streams, so counts far beyond the file size are fabricated.
	bound := int64(len(data))*8 + 1<<16
	if bound > maxObjectNumber+1 {
		bound = maxObjectNumber + 1
	}
	i := bytes.LastIndex(data, []byte("startxref"))
	if i < 0 {
		// The PDF package reports this case itself.
		return nil
	}
	l := lexer{b: data, pos: i + len("startxref")}
	t := l.next()
	if t.kind != tokNumber {
		return nil
	}
	seen := make(map[int64]bool)
	for off := int64(t.num); ; {
		if off < 0 || off >= int64(len(data)) {
			return fmt.Errorf("%w: section offset %d outside the file", errStructure, off)
		}
		if seen[off] {
			return fmt.Errorf("%w: /Prev chain loops at offset %d", errStructure, off)
		}
		if len(seen) >= maxXrefSections {
			return fmt.Errorf("%w: more than %d sections", errStructure, maxXrefSections)
		}
		seen[off] = true
		trailer, err := checkXrefSection(data, off, bound)
		if err != nil {
			return err
		}
		prev, ok := trailer["Prev"]
		if !ok || prev.kind != tokNumber {
			break
		}
		off = int64(prev.num)
	}
	return checkObjectStreams(data, bound)
}

// checkXrefSection checks the table or stream at off and returns its trailer
// (or stream) dictionary.
func checkXrefSection(data []byte, off, bound int64) (map[string]operand, error) {
	l := lexer{b: data, pos: int(off)}
	t := l.next()
	if t.kind == tokKeyword && t.text == "xref" {
		for {
			t = l.next()
			if t.kind == tokKeyword && t.text == "trailer" {
				break
			}
			n := l.next()
			if t.kind != tokNumber || n.kind != tokNumber {
				// Malformed tables are the PDF package's to report.
				return nil, nil
			}
			if t.num < 0 || n.num < 0 || t.num+n.num > float64(bound) {
				return nil, fmt.Errorf("%w: table section %g+%g too large", errStructure, t.num, n.num)
			}
			for k := 0; k < int(n.num)*3; k++ {
				if l.next().kind == tokEOF {
					return nil, nil
				}
			}
		}
		if l.next().kind != tokDictOpen {
			return nil, nil
		}
		d := l.readDict()
		return d, checkSize(d, bound)
	}
	// An xref stream: "n g obj << ... >>".
	if l.next().kind != tokNumber || l.next().kind != tokKeyword || l.next().kind != tokDictOpen {
		return nil, nil
	}
	d := l.readDict()
	if err := checkSize(d, bound); err != nil {
		return nil, err
	}
	total := 0.0
	for _, w := range d["W"].arr {
		if w.kind != tokNumber || w.num < 0 || w.num > 8 {
			return nil, fmt.Errorf("%w: xref stream field width %g", errStructure, w.num)
		}
		total += w.num
	}
	if _, ok := d["W"]; ok && total == 0 {
		return nil, fmt.Errorf("%w: xref stream entries of width 0", errStructure)
	}
	idx := d["Index"].arr
	for k := 0; k+1 < len(idx); k += 2 {
		if idx[k].num < 0 || idx[k+1].num < 0 || idx[k].num+idx[k+1].num > float64(bound) {
			return nil, fmt.Errorf("%w: xref stream section %g+%g too large", errStructure, idx[k].num, idx[k+1].num)
		}
	}
	return d, nil
}

func checkSize(d map[string]operand, bound int64) error {
	if s, ok := d["Size"]; ok && s.kind == tokNumber && (s.num < 0 || s.num > float64(bound)) {
		return fmt.Errorf("%w: /Size %g", errStructure, s.num)
	}
	return nil
}

// checkObjectStreams checks the header of every object stream: its object
// count, and that no chain of /Extends references loops.
func checkObjectStreams(data []byte, bound int64) error {
	extends := make(map[int64]int64)
	for from := 0; ; {
		i := bytes.Index(data[from:], []byte("/ObjStm"))
		if i < 0 {
			break
		}
		at := from + i
		from = at + len("/ObjStm")
		num, dict, ok := enclosingObject(data, at)
		if !ok {
			continue
		}
		if n, ok := dict["N"]; ok && (n.kind != tokNumber || n.num < 0 || n.num > float64(bound)) {
			return fmt.Errorf("%w: object stream holds %g objects", errStructure, n.num)
		}
		if ext, ok := dict["Extends"]; ok && len(ext.arr) == 0 && ext.kind == tokNumber {
			extends[num] = int64(ext.num)
		}
	}
	for start := range extends {
		seen := map[int64]bool{}
		for n, ok := start, true; ok; n, ok = extends[n] {
			if seen[n] {
				return fmt.Errorf("%w: object stream %d extends itself", errStructure, start)
			}
			seen[n] = true
		}
	}
	return nil
}

// enclosingObject finds the "n g obj <<" header before data[at] and reads its
// dictionary. References in the dictionary read as their object number.
func enclosingObject(data []byte, at int) (int64, map[string]operand, bool) {
	lo := at - 4096
	if lo < 0 {
		lo = 0
	}
	j := bytes.LastIndex(data[lo:at], []byte("obj"))
	if j < 0 {
		return 0, nil, false
	}
	j += lo
	// Walk back over "n g " to the object number.
	k := j
	for fields := 0; k > 0 && fields < 2; {
		k--
		for k > 0 && isPDFSpace(data[k]) {
			k--
		}
		for k > 0 && data[k-1] >= '0' && data[k-1] <= '9' {
			k--
		}
		fields++
	}
	l := lexer{b: data, pos: k}
	n := l.next()
	if n.kind != tokNumber || l.next().kind != tokNumber {
		return 0, nil, false
	}
	if t := l.next(); t.kind != tokKeyword || t.text != "obj" || l.next().kind != tokDictOpen {
		return 0, nil, false
	}
	return int64(n.num), l.readDict(), true
}

// readDict reads dictionary entries up to the closing ">>", keeping each
// top-level value; a reference "n g R" keeps n.
func (l *lexer) readDict() map[string]operand {
	d := make(map[string]operand)
	key := ""
	var vals []operand
	flush := func() {
		if key != "" && len(vals) > 0 {
			d[key] = vals[0]
		}
		vals = vals[:0]
	}
	for {
		t := l.next()
		switch t.kind {
		case tokEOF, tokDictClose:
			flush()
			return d
		case tokName:
			if key == "" || len(vals) > 0 {
				flush()
				key = t.text
				continue
			}
			vals = append(vals, operand{kind: tokName, text: t.text})
		case tokArrayOpen:
			vals = append(vals, operand{kind: tokArrayOpen, arr: l.array(0)})
		case tokDictOpen:
			l.dict(0)
			vals = append(vals, operand{kind: tokDictOpen})
		case tokKeyword:
			// "R" ends a reference; its number is already the value.
		default:
			vals = append(vals, operand{kind: t.kind, num: t.num, text: t.text})
		}
	}
}
