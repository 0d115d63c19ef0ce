package pdf

import "strings"

// Fonts from the standard 14 may be used without a Widths array; readers are
// expected to know their metrics. Word gaps are found from glyph advances, so
// guessing one width for every glyph would scatter false spaces through words.
// These are the advance widths (in 1/1000 of the font size) of the printable
// ASCII characters, space (32) to tilde (126), in Helvetica and Times-Roman;
// bold and italic faces are close enough to their regular face for finding
// word gaps, and Courier is monospaced.

var helveticaASCII = [95]uint16{
	278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
	556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
	1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
	667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
	333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
	556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
}

var timesASCII = [95]uint16{
	250, 333, 408, 500, 500, 833, 778, 180, 333, 333, 500, 564, 250, 333, 250, 278,
	500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 278, 278, 564, 564, 564, 444,
	921, 722, 667, 667, 722, 611, 556, 722, 722, 333, 389, 722, 611, 889, 722, 722,
	556, 722, 667, 556, 611, 722, 722, 944, 722, 722, 611, 333, 278, 333, 469, 500,
	333, 444, 500, 444, 500, 444, 333, 500, 500, 278, 278, 500, 278, 778, 500, 500,
	500, 500, 333, 389, 278, 500, 500, 722, 500, 500, 444, 480, 200, 480, 541,
}

// fontMetrics estimates advance widths for a font without a Widths array.
type fontMetrics struct {
	ascii *[95]uint16
	fixed float64
	avg   float64
}

// standardMetrics picks metrics by the font's base name: Courier and other
// monospaced faces, Times and other serif faces, and Helvetica (and Arial,
// which shares its metrics) for everything else.
func standardMetrics(baseFont string) fontMetrics {
	if i := strings.IndexByte(baseFont, '+'); i >= 0 {
		baseFont = baseFont[i+1:]
	}
	name := strings.ToLower(baseFont)
	switch {
	case strings.Contains(name, "courier") || strings.Contains(name, "mono"):
		return fontMetrics{fixed: 0.6}
	case strings.Contains(name, "times") || strings.Contains(name, "serif") && !strings.Contains(name, "sans"):
		return fontMetrics{ascii: &timesASCII, avg: 0.5}
	case strings.Contains(name, "symbol") || strings.Contains(name, "dingbat"):
		return fontMetrics{fixed: 0.6}
	}
	return fontMetrics{ascii: &helveticaASCII, avg: 0.556}
}

// width returns the advance of the glyph whose text is t, in text space units
// per unit of font size.
func (m fontMetrics) width(t string) float64 {
	if m.fixed > 0 {
		return m.fixed
	}
	if len(t) == 1 && t[0] >= 32 && t[0] <= 126 {
		return float64(m.ascii[t[0]-32]) / 1000
	}
	return m.avg
}
