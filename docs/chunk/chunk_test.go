package chunk

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/extract"
)

// textDoc wraps text as a document with one page numbered 0.
func textDoc(text string) *extract.Document {
	return &extract.Document{Text: text, Pages: []extract.Page{{Number: 0, Start: 0, End: utf8.RuneCountInString(text)}}}
}

// pagedDoc joins page texts the way the PDF extractor does: "\n\n" after each
// page but the last, owned by the page before it.
func pagedDoc(pages ...string) *extract.Document {
	doc := &extract.Document{}
	pos := 0
	for i, p := range pages {
		if i < len(pages)-1 {
			p += "\n\n"
		}
		n := utf8.RuneCountInString(p)
		doc.Text += p
		doc.Pages = append(doc.Pages, extract.Page{Number: i + 1, Start: pos, End: pos + n})
		pos += n
	}
	return doc
}

// checkChunks verifies the invariants every split must hold.
func checkChunks(t testing.TB, doc *extract.Document, o Options, chunks []Chunk) {
	t.Helper()
	o = o.normalised()
	runes := []rune(doc.Text)
	covered := make([]bool, len(runes))
	for i, c := range chunks {
		if c.Ordinal != i {
			t.Fatalf("chunk %d has ordinal %d", i, c.Ordinal)
		}
		if c.Start < 0 || c.End <= c.Start || c.End > len(runes) {
			t.Fatalf("chunk %d has span [%d,%d) in %d runes", i, c.Start, c.End, len(runes))
		}
		if got := string(runes[c.Start:c.End]); got != c.Content {
			t.Fatalf("chunk %d content %q != text span %q", i, c.Content, got)
		}
		if c.End-c.Start > o.Size {
			t.Fatalf("chunk %d is %d runes long, size is %d", i, c.End-c.Start, o.Size)
		}
		if isSpace(runes[c.Start]) || isSpace(runes[c.End-1]) {
			t.Fatalf("chunk %d is not trimmed: %q", i, c.Content)
		}
		if i > 0 {
			prev := chunks[i-1]
			if c.Start <= prev.Start || c.End <= prev.End {
				t.Fatalf("chunk %d [%d,%d) does not move forward from [%d,%d)", i, c.Start, c.End, prev.Start, prev.End)
			}
			if prev.End-c.Start > o.Overlap {
				t.Fatalf("chunks %d and %d overlap by %d runes, more than %d", i-1, i, prev.End-c.Start, o.Overlap)
			}
		}
		if want := pageAt(doc, c.Start); c.Page != want || c.PageStart != want {
			t.Fatalf("chunk %d starts on page %d but says page %d, page_start %d", i, want, c.Page, c.PageStart)
		}
		if want := pageAt(doc, c.End-1); c.PageEnd != want {
			t.Fatalf("chunk %d ends on page %d but says %d", i, want, c.PageEnd)
		}
		for k := c.Start; k < c.End; k++ {
			covered[k] = true
		}
	}
	for k, r := range runes {
		if !covered[k] && !isSpace(r) {
			t.Fatalf("rune %d (%q) is in no chunk", k, r)
		}
	}
}

func pageAt(doc *extract.Document, pos int) int {
	for _, p := range doc.Pages {
		if p.Start <= pos && pos < p.End {
			return p.Number
		}
	}
	return 0
}

func sentence(i int) string {
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}
	var b strings.Builder
	for k := 0; k < 6+i%5; k++ {
		if k > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(i+k)%len(words)])
	}
	b.WriteString(".")
	return b.String()
}

func TestSplitBoundaries(t *testing.T) {
	var paragraphs []string
	for p := 0; p < 12; p++ {
		var ss []string
		for k := 0; k < 5; k++ {
			ss = append(ss, sentence(p*5+k))
		}
		paragraphs = append(paragraphs, strings.Join(ss, " "))
	}
	var sentences []string
	for k := 0; k < 80; k++ {
		sentences = append(sentences, sentence(k))
	}
	words := strings.Repeat("lorem ipsum dolor sit amet consectetur ", 80)

	tests := []struct {
		name string
		doc  *extract.Document
		opts Options
		// check tests each chunk but the last.
		check func(t *testing.T, c Chunk, runes []rune)
	}{
		{
			name: "ends at paragraph breaks",
			doc:  textDoc(strings.Join(paragraphs, "\n\n")),
			opts: Options{Size: 1000, Overlap: 100},
			check: func(t *testing.T, c Chunk, runes []rune) {
				if string(runes[c.End:c.End+2]) != "\n\n" {
					t.Errorf("chunk %d ends mid-paragraph: %q", c.Ordinal, tail(c.Content))
				}
			},
		},
		{
			name: "ends at sentence ends",
			doc:  textDoc(strings.Join(sentences, " ")),
			opts: Options{Size: 300, Overlap: 50},
			check: func(t *testing.T, c Chunk, runes []rune) {
				if !strings.HasSuffix(c.Content, ".") {
					t.Errorf("chunk %d ends mid-sentence: %q", c.Ordinal, tail(c.Content))
				}
			},
		},
		{
			name: "ends between words",
			doc:  textDoc(words),
			opts: Options{Size: 200, Overlap: 40},
			check: func(t *testing.T, c Chunk, runes []rune) {
				if !isSpace(runes[c.End]) || (c.Start > 0 && !isSpace(runes[c.Start-1])) {
					t.Errorf("chunk %d cuts a word: %q", c.Ordinal, c.Content)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunks := Split(tt.doc, tt.opts)
			checkChunks(t, tt.doc, tt.opts, chunks)
			if len(chunks) < 3 {
				t.Fatalf("got %d chunks, want several", len(chunks))
			}
			runes := []rune(tt.doc.Text)
			for _, c := range chunks[:len(chunks)-1] {
				tt.check(t, c, runes)
			}
			// Overlap is used: each chunk starts before the previous ends.
			for i := 1; i < len(chunks); i++ {
				if chunks[i].Start >= chunks[i-1].End {
					t.Errorf("chunk %d does not overlap chunk %d", i, i-1)
				}
			}
		})
	}
}

func tail(s string) string {
	r := []rune(s)
	if len(r) > 30 {
		r = r[len(r)-30:]
	}
	return string(r)
}

func TestSplitSmallCases(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{"empty", "", nil},
		{"blank", " \n\t \n", nil},
		{"short text trimmed", "\n  Hello, world.  \n", []string{"Hello, world."}},
		{"one long word is cut hard", strings.Repeat("x", 250), []string{strings.Repeat("x", 100), strings.Repeat("x", 100), strings.Repeat("x", 50)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Size: 100, Overlap: 20}
			doc := textDoc(tt.text)
			chunks := Split(doc, opts)
			checkChunks(t, doc, opts, chunks)
			var got []string
			for _, c := range chunks {
				got = append(got, c.Content)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Errorf("chunks = %q, want %q", got, tt.want)
			}
		})
	}
	if got := Split(nil, DefaultOptions()); got != nil {
		t.Errorf("Split(nil) = %v", got)
	}
}

// TestSplitPages checks that a page end near the size limit ends the chunk,
// that the next chunk does not reach back into the previous page, and that
// chunks carry the page they start on.
func TestSplitPages(t *testing.T) {
	page1 := strings.Repeat("words on the first page ", 36) // 864 runes
	page2 := strings.Repeat("second page sentence here. ", 30)
	page3 := "short third page"
	doc := pagedDoc(page1, page2, page3)
	opts := Options{Size: 1000, Overlap: 150}
	chunks := Split(doc, opts)
	checkChunks(t, doc, opts, chunks)
	if chunks[0].End != utf8.RuneCountInString(strings.TrimSpace(page1)) {
		t.Errorf("first chunk ends at %d, not at the end of page 1", chunks[0].End)
	}
	if chunks[1].Start != doc.Pages[1].Start || chunks[1].Page != 2 {
		t.Errorf("second chunk starts at %d on page %d, want %d on page 2", chunks[1].Start, chunks[1].Page, doc.Pages[1].Start)
	}
	last := chunks[len(chunks)-1]
	if !strings.HasSuffix(last.Content, page3) {
		t.Errorf("last chunk %q lacks page 3", last.Content)
	}
	// A chunk that starts on page 2 and runs into page 3 is cited as page 2.
	for _, c := range chunks {
		if c.Start < doc.Pages[2].Start && c.End > doc.Pages[2].Start && c.Page != 2 {
			t.Errorf("chunk spanning pages 2 and 3 says page %d", c.Page)
		}
	}
}

// TestSplitPageRanges checks the page range of chunks that run across page
// ends: a chunk holding the last lines of page 7 and then page 8 reports
// pages 7 to 8, and one within a page reports that page twice.
func TestSplitPageRanges(t *testing.T) {
	// Page 7 ends with four short lines after a long passage, so that the
	// chunk holding them finds no page end in its second half and runs on
	// into page 8.
	long := strings.Repeat("A sentence of the long passage on page seven. ", 40)
	tail := "Line one.\nLine two.\nLine three.\nLine four."
	pages := []string{"one", "two", "three", "four", "five", "six", long + "\n\n" + tail, strings.Repeat("Page eight goes on. ", 20)}
	doc := pagedDoc(pages...)
	opts := Options{Size: 600, Overlap: 0}
	chunks := Split(doc, opts)
	checkChunks(t, doc, opts, chunks)
	var ranges [][2]int
	spans := false
	for _, c := range chunks {
		ranges = append(ranges, [2]int{c.PageStart, c.PageEnd})
		if strings.Contains(c.Content, "Line four.") {
			if c.PageStart != 7 || c.PageEnd != 8 || c.Page != 7 || !strings.Contains(c.Content, "Page eight") {
				t.Errorf("chunk %q reports pages %d-%d (page %d), want 7-8 (page 7)", c.Content, c.PageStart, c.PageEnd, c.Page)
			}
			spans = true
		}
	}
	if !spans {
		t.Fatalf("no chunk holds the end of page 7: %v", ranges)
	}
	// The short pages 1 to 6 share the first chunk with the start of page 7.
	if first := ranges[0]; first != [2]int{1, 7} {
		t.Errorf("first chunk covers pages %v, want 1-7", first)
	}

	text := textDoc(strings.Repeat("No pages here. ", 100))
	for _, c := range Split(text, opts) {
		if c.Page != 0 || c.PageStart != 0 || c.PageEnd != 0 {
			t.Errorf("chunk of a document without pages reports pages %d-%d", c.PageStart, c.PageEnd)
		}
	}
}

func TestSplitUnicodeOffsets(t *testing.T) {
	text := strings.Repeat("Ελληνικά κείμενα με τόνους. 日本語の文です。 ", 40)
	doc := textDoc(text)
	opts := Options{Size: 120, Overlap: 30}
	checkChunks(t, doc, opts, Split(doc, opts))
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		opts Options
		ok   bool
	}{
		{DefaultOptions(), true},
		{Options{Size: 100, Overlap: 0}, true},
		{Options{Size: 100, Overlap: 49}, true},
		{Options{Size: 100, Overlap: 50}, false},
		{Options{Size: 99, Overlap: 0}, false},
		{Options{Size: 1000, Overlap: -1}, false},
		{Options{}, false},
	}
	for _, tt := range tests {
		err := tt.opts.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidOptions)) {
			t.Errorf("%+v.Validate() = %v, want ok %v", tt.opts, err, tt.ok)
		}
	}
	if got := (Options{}).normalised(); got != DefaultOptions() {
		t.Errorf("zero options normalise to %+v", got)
	}
	if err := (Options{Size: 5, Overlap: 900}).normalised().Validate(); err != nil {
		t.Errorf("clamped options are invalid: %v", err)
	}
}

// randomDoc builds text from a small alphabet rich in boundaries, split into
// pages at random points.
func randomDoc(r *rand.Rand, n int) *extract.Document {
	alphabet := []rune("abcdefgh  ..!?\n\n\t é日")
	runes := make([]rune, n)
	for i := range runes {
		runes[i] = alphabet[r.IntN(len(alphabet))]
	}
	doc := &extract.Document{Text: string(runes)}
	pos := 0
	for num := 1; pos < n; num++ {
		end := pos + r.IntN(n/3+1)
		if end > n || r.IntN(4) == 0 {
			end = n
		}
		doc.Pages = append(doc.Pages, extract.Page{Number: num, Start: pos, End: end})
		pos = end
	}
	return doc
}

func TestSplitRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		doc := randomDoc(r, r.IntN(3000))
		opts := Options{Size: 100 + r.IntN(400)}
		opts.Overlap = r.IntN(opts.Size / 2)
		checkChunks(t, doc, opts, Split(doc, opts))
	}
}

// FuzzSplit checks the chunk invariants on arbitrary text, page splits and
// options.
func FuzzSplit(f *testing.F) {
	f.Add("Hello world. This is a test.\n\nNew paragraph here!", 100, 20, 10)
	f.Add(strings.Repeat("word ", 300), 120, 59, 0)
	f.Add(strings.Repeat("x", 500), 100, 0, 250)
	f.Fuzz(func(t *testing.T, text string, size, overlap, pageCut int) {
		text = strings.ToValidUTF8(text, "\uFFFD")
		doc := textDoc(text)
		if n := utf8.RuneCountInString(text); pageCut > 0 && pageCut < n {
			doc.Pages = []extract.Page{{Number: 1, Start: 0, End: pageCut}, {Number: 2, Start: pageCut, End: n}}
		}
		opts := Options{Size: size % 5000, Overlap: overlap % 5000, Sentences: pageCut%2 == 0}
		checkChunks(t, doc, opts, Split(doc, opts))
	})
}

// BenchmarkSplit reports throughput on prose-like text with paragraphs, in
// ASCII and with accented letters.
func BenchmarkSplit(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 4<<20 {
		for k := 0; k < 6; k++ {
			sb.WriteString(sentence(sb.Len()))
			sb.WriteByte(' ')
		}
		sb.WriteString("\n\n")
	}
	for _, c := range []struct{ name, text string }{
		{"ascii", sb.String()},
		{"accents", strings.ReplaceAll(sb.String(), "e", "é")},
	} {
		doc := textDoc(c.text)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc.Text)))
			b.ReportAllocs()
			for b.Loop() {
				Split(doc, DefaultOptions())
			}
		})
	}
}

// TestRuneText checks the rune index against a []rune of the same text,
// in random jumps and steps both ways, on ASCII text, text of several
// scripts and text with invalid bytes.
func TestRuneText(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, text := range []string{
		strings.Repeat("plain ascii text. ", 500),
		strings.Repeat("Grüße, 日本語の文章 and ascii. ", 400),
		"a\xffb\xc3c" + strings.Repeat("é", 1000) + "\xe6\x97",
		"",
	} {
		rt := newRuneText(text)
		runes := []rune(text)
		if rt.n != len(runes) {
			t.Fatalf("%d runes, want %d", rt.n, len(runes))
		}
		if len(runes) == 0 {
			continue
		}
		p := 0
		for range 20000 {
			switch r.IntN(4) {
			case 0:
				p = r.IntN(len(runes))
			case 1:
				p = min(p+1, len(runes)-1)
			case 2:
				p = max(p-1, 0)
			default:
				p = min(p+r.IntN(2*markEvery), len(runes)-1)
			}
			if got := rt.at(p); got != runes[p] {
				t.Fatalf("rune %d: %q, want %q", p, got, runes[p])
			}
			end := min(p+r.IntN(3*markEvery), len(runes))
			if got := rt.slice(p, end); got != string(runes[p:end]) {
				t.Fatalf("runes [%d,%d): %q, want %q", p, end, got, string(runes[p:end]))
			}
		}
	}
}

// TestSplitSentences checks that with Options.Sentences every chunk begins
// and ends at a sentence, line or paragraph boundary, unless the sentence
// itself is longer than Size, on random prose with lists and long
// sentences, with and without overlap.
func TestSplitSentences(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		var b strings.Builder
		for b.Len() < 200+r.IntN(3000) {
			switch r.IntN(6) {
			case 0:
				b.WriteString("\n\n")
			case 1:
				b.WriteString("\n- list item " + sentence(r.IntN(50))[:10])
			case 2:
				// A sentence longer than most sizes.
				b.WriteString(strings.Repeat("long words ", 40) + "end. ")
			default:
				b.WriteString(sentence(r.IntN(50)) + " ")
			}
		}
		text := strings.TrimSpace(b.String())
		doc := textDoc(text)
		opts := Options{Size: 100 + r.IntN(400), Sentences: true}
		if i%2 == 1 {
			opts.Overlap = r.IntN(opts.Size / 2)
		}
		chunks := Split(doc, opts)
		checkChunks(t, doc, opts, chunks)
		runes := []rune(text)
		// boundary reports whether a sentence, line or the text begins at p.
		boundary := func(p int) bool {
			for p > 0 && runes[p-1] == ' ' {
				p--
			}
			return p == 0 || p == len(runes) || sentenceEndAt(runes, p) || runes[p-1] == '\n' || runes[p] == '\n'
		}
		// sentenceLen is the length of the sentence holding p.
		sentenceLen := func(p int) int {
			a, b := p, p
			for !boundary(a) {
				a--
			}
			for !boundary(b) {
				b++
			}
			return b - a
		}
		for _, c := range chunks {
			for _, p := range []int{c.Start, c.End} {
				// Only a sentence longer than Size may be cut.
				if !boundary(p) && sentenceLen(p) <= opts.Size {
					t.Fatalf("size %d overlap %d: chunk cuts a sentence of %d runes: %q", opts.Size, opts.Overlap, sentenceLen(p), c.Content)
				}
			}
		}
	}
	// A long sentence: cut at spaces, never inside a word.
	text := strings.Repeat("unbroken ", 100) + "end."
	for _, c := range Split(textDoc(text), Options{Size: 100, Sentences: true}) {
		for _, w := range strings.Fields(c.Content) {
			if w != "unbroken" && w != "end." {
				t.Fatalf("a word was cut: %q", w)
			}
		}
	}
	// The second half of the limit holds no sentence end: the chunk ends at
	// the first half's, not inside the long second sentence.
	text = "Short one. " + strings.Repeat("tail ", 30) + "done."
	got := Split(textDoc(text), Options{Size: 100, Sentences: true})
	if got[0].Content != "Short one." {
		t.Fatalf("first chunk %q, want the whole first sentence alone", got[0].Content)
	}
	if plain := Split(textDoc(text), Options{Size: 100}); plain[0].Content == "Short one." {
		t.Fatalf("without Sentences the chunk should fill its size: %q", plain[0].Content)
	}
}

// sentenceEndAt reports whether a sentence ends just before p in runes.
func sentenceEndAt(runes []rune, p int) bool {
	q := p - 1
	for q > 0 && isCloser(runes[q]) {
		q--
	}
	switch runes[q] {
	case '.', '!', '?', '…':
		return p < len(runes) && isSpace(runes[p])
	}
	return false
}
