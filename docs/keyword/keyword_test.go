package keyword

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

var params = Params{K1: 0.9, B: 0.4}

// encodeTSVector returns lexemes, with their numbers of positions, as a
// tsvector in PostgreSQL's binary form (see parseTSVector). A count of 0
// writes the lexeme without positions, which PostgreSQL reads as one.
func encodeTSVector(lexemes map[string]int) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(lexemes)))
	for _, lex := range slices.Sorted(maps.Keys(lexemes)) {
		out = append(out, lex...)
		out = append(out, 0)
		out = binary.BigEndian.AppendUint16(out, uint16(lexemes[lex]))
		for p := range lexemes[lex] {
			out = binary.BigEndian.AppendUint16(out, uint16(p+1))
		}
	}
	return out
}

// chunk is a synthetic chunk: its id and lexeme counts.
type chunk struct {
	id      uuid.UUID
	lexemes map[string]int
}

// synthChunks returns n chunks of random lexemes from a small vocabulary,
// some repeated.
func synthChunks(r *rand.Rand, n int) []chunk {
	out := make([]chunk, n)
	for i := range n {
		out[i] = chunk{id: uuid.New(), lexemes: map[string]int{}}
		for range r.IntN(40) {
			out[i].lexemes[fmt.Sprintf("w%d", int(r.ExpFloat64()*30))] += 1 + r.IntN(2)
		}
	}
	return out
}

func postingsOf(t testing.TB, chunks []chunk) []byte {
	t.Helper()
	b := NewBuilder()
	for _, c := range chunks {
		if err := b.Add(c.id, encodeTSVector(c.lexemes)); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// file is a synthetic file: its chunks and model.
type file struct {
	id     uuid.UUID
	model  string
	chunks []chunk
}

func (f file) keyword(t testing.TB) File {
	return File{ID: f.id, Model: f.model, Postings: postingsOf(t, f.chunks)}
}

// bruteForce ranks the chunks of the live files by Okapi BM25 computed from
// their lexeme counts, as Search must.
func bruteForce(files []file, terms []Term, model string, depth int) []Hit {
	var all []chunk
	models := map[uuid.UUID]string{}
	owners := map[uuid.UUID]uuid.UUID{}
	for _, f := range files {
		for _, c := range f.chunks {
			all = append(all, c)
			models[c.id] = f.model
			owners[c.id] = f.id
		}
	}
	if len(all) == 0 {
		return nil
	}
	var total float64
	for _, c := range all {
		for _, n := range c.lexemes {
			total += float64(n)
		}
	}
	avgdl := max(total/float64(len(all)), 1)
	var hits []Hit
	for _, c := range all {
		if models[c.id] != model {
			continue
		}
		var dl float64
		for _, n := range c.lexemes {
			dl += float64(n)
		}
		score, matched := 0.0, false
		for _, t := range terms {
			tf := float64(c.lexemes[t.Lexeme])
			if tf == 0 {
				continue
			}
			matched = true
			df := 0
			for _, o := range all {
				if o.lexemes[t.Lexeme] > 0 {
					df++
				}
			}
			idf := math.Log(1 + (float64(len(all))-float64(df)+0.5)/(float64(df)+0.5))
			score += float64(t.Count) * idf * (params.K1 + 1) * tf / (tf + params.K1*(1-params.B+params.B*dl/avgdl))
		}
		if matched {
			hits = append(hits, Hit{ID: c.id, File: owners[c.id], Score: score})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return bytes.Compare(hits[i].ID[:], hits[j].ID[:]) < 0
	})
	if len(hits) > depth {
		hits = hits[:depth]
	}
	return hits
}

func sameHits(got, want []Hit) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].File != want[i].File || math.Abs(got[i].Score-want[i].Score) > 1e-9*max(1, math.Abs(want[i].Score)) {
			return false
		}
	}
	return true
}

func queries() [][]Term {
	var qs [][]Term
	for i := range 40 {
		qs = append(qs, []Term{{fmt.Sprintf("w%d", i), 1}},
			[]Term{{fmt.Sprintf("w%d", i), 2}, {fmt.Sprintf("w%d", i/3), 1}, {"absent", 1}})
	}
	return qs
}

func checkRankings(t *testing.T, name string, ix *Index, live []file, models ...string) {
	t.Helper()
	for _, m := range models {
		for _, q := range queries() {
			got := ix.Search(q, m, 1000, params)
			want := bruteForce(live, q, m, 1000)
			if !sameHits(got, want) {
				t.Fatalf("%s, model %s, query %v:\n got %v\nwant %v", name, m, q, got, want)
			}
			checkFiltered(t, name, ix, live, q, m, want)
		}
	}
}

// checkFiltered checks SearchFiles against want, the ranking of every
// live file, for every other live file and a file the index never held:
// the hits of those files, in want's order and with want's scores, to the
// depth asked for.
func checkFiltered(t *testing.T, name string, ix *Index, live []file, q []Term, model string, want []Hit) {
	t.Helper()
	only := []uuid.UUID{uuid.New()}
	in := map[uuid.UUID]bool{}
	for i, f := range live {
		if i%2 == 1 {
			only = append(only, f.id)
			in[f.id] = true
		}
	}
	var of []Hit
	for _, h := range want {
		if in[h.File] {
			of = append(of, h)
		}
	}
	for _, depth := range []int{1000, 3} {
		got := ix.SearchFiles(q, model, depth, params, only)
		w := of[:min(depth, len(of))]
		if !sameHits(got, w) {
			t.Fatalf("%s, model %s, query %v, files %v, depth %d:\n got %v\nwant %v", name, model, q, only, depth, got, w)
		}
	}
	if got := ix.SearchFiles(q, model, 1000, params, nil); len(got) != 0 {
		t.Fatalf("%s: SearchFiles of no file found %v", name, got)
	}
}

// TestSearchIsOkapiBM25 checks rankings against BM25 computed directly,
// through additions one file at a time and in bulk, merges, removals and
// files moving to another model.
func TestSearchIsOkapiBM25(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	var files []file
	for i, n := range []int{3, 1, 0, 17, 130, 2, 40, 1, 1, 1, 5, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1} {
		files = append(files, file{id: uuid.New(), model: []string{"a", "b"}[i%5/4], chunks: synthChunks(r, n)})
	}
	refresh := func(ix *Index, gen int64, added []file, removed []uuid.UUID) {
		t.Helper()
		ch := Changes{Generation: gen, Removed: removed}
		for _, f := range added {
			ch.Added = append(ch.Added, f.keyword(t))
		}
		if err := ix.Refresh(gen, func(have int64) (Changes, error) { return ch, nil }); err != nil {
			t.Fatal(err)
		}
	}

	bulk := New(1)
	refresh(bulk, 1, files, nil)
	checkRankings(t, "bulk, segmented", bulk, files, "a", "b")
	if _, err := bulk.Merge(); err != nil {
		t.Fatal(err)
	}
	if n := bulk.Segments(); n > maxSegments {
		t.Errorf("%d files read at once merged into %d segments", len(files), n)
	}
	checkRankings(t, "bulk, merged", bulk, files, "a", "b")

	grown := New(1)
	for i, f := range files {
		refresh(grown, int64(i+1), []file{f}, nil)
		if _, err := grown.Merge(); err != nil {
			t.Fatal(err)
		}
	}
	checkRankings(t, "one file at a time, merged as they came", grown, files, "a", "b")
	if grown.Segments() >= len(files) {
		t.Errorf("%d segments for %d files added one by one: no merge happened", grown.Segments(), len(files))
	}

	// Remove two files, one of them merged with others; move one to the
	// other model (it is sent again with the new model).
	live := slices.Clone(files)
	gone := []uuid.UUID{live[4].id, live[9].id}
	live = slices.Delete(live, 9, 10)
	live = slices.Delete(live, 4, 5)
	moved := live[3]
	moved.model = "b"
	live[3] = moved
	gen := int64(len(files) + 1)
	refresh(grown, gen, []file{moved}, gone)
	checkRankings(t, "after removals and a move", grown, live, "a", "b")
	if _, err := grown.Merge(); err != nil {
		t.Fatal(err)
	}
	checkRankings(t, "merged after removals", grown, live, "a", "b")
	if got, want := grown.Chunks(), chunksOf(live); got != want {
		t.Errorf("%d live chunks; want %d", got, want)
	}
	// The same changes again (another search refreshed meanwhile) change
	// nothing.
	refresh(grown, gen, []file{moved}, gone)
	checkRankings(t, "changes applied twice", grown, live, "a", "b")
}

func chunksOf(files []file) int {
	n := 0
	for _, f := range files {
		n += len(f.chunks)
	}
	return n
}

func TestStale(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	a := file{id: uuid.New(), model: "m", chunks: synthChunks(r, 10)}
	b := file{id: uuid.New(), model: "m", chunks: synthChunks(r, 11)}
	ix := New(0)
	apply := func(ch Changes) {
		t.Helper()
		if err := ix.Refresh(ch.Generation, func(int64) (Changes, error) { return ch, nil }); err != nil {
			t.Fatal(err)
		}
	}
	apply(Changes{Generation: 1, Added: []File{a.keyword(t), b.keyword(t)}})
	if ix.Stale() {
		t.Error("an index without removals is stale")
	}
	apply(Changes{Generation: 2, Removed: []uuid.UUID{a.id}})
	if ix.Stale() {
		t.Error("stale with 10 of 21 chunks removed")
	}
	apply(Changes{Generation: 3, Removed: []uuid.UUID{b.id}})
	if !ix.Stale() {
		t.Error("not stale with every chunk removed")
	}
	if hits := ix.Search([]Term{{"w1", 1}}, "m", 10, params); len(hits) != 0 {
		t.Errorf("removed chunks found: %v", hits)
	}
}

func TestMergePlan(t *testing.T) {
	t.Parallel()
	ones := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	for _, c := range []struct {
		name  string
		sizes []int32
		start int
		due   bool
	}{
		{"empty", nil, 0, false},
		{"seven small", ones(7), 0, false},
		{"eight small", ones(8), 0, true},
		{"a large one, then eight small", append([]int32{100_000}, ones(8)...), 1, true},
		{"a large one, then seven small", append([]int32{100_000}, ones(7)...), 0, false},
		{"eight of eight", []int32{64, 8, 8, 8, 8, 8, 8, 8, 8}, 1, true},
		{"seven of eight and small ones", []int32{8, 8, 8, 8, 8, 8, 8, 1, 1}, 0, false},
		{"seven of eight and eight small ones", []int32{8, 8, 8, 8, 8, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1}, 7, true},
		{"more than the most segments", append(ones(7), []int32{8, 8, 8, 8, 8, 8, 8, 64, 64, 64, 64, 64, 64, 64, 512, 512, 512, 512, 512, 512, 512, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 32768, 32768, 32768, 32768, 32768, 32768, 32768, 300_000, 300_000, 300_000, 300_000, 300_000, 300_000, 300_000, 3_000_000, 3_000_000, 3_000_000, 3_000_000, 3_000_000, 3_000_000, 3_000_000, 30_000_000, 30_000_000, 30_000_000, 30_000_000, 30_000_000, 30_000_000, 30_000_000, 300_000_000, 300_000_000}...), 0, true},
		{"many small after a merge", append([]int32{5000}, ones(100)...), 1, true},
		{"a thousand files of a hundred", func() []int32 {
			s := make([]int32, 1000)
			for i := range s {
				s[i] = 100
			}
			return s
		}(), 0, true},
	} {
		start, due := mergePlan(c.sizes)
		if due != c.due || (due && start != c.start) {
			t.Errorf("%s: mergePlan = %d, %v; want %d, %v", c.name, start, due, c.start, c.due)
		}
	}
}

// TestTieredMergesBoundTheSegments adds one-chunk files one at a time,
// merging after each as the cache would, and checks that the segments stay
// few and each chunk is copied a few times, not at every merge.
func TestTieredMergesBoundTheSegments(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	ix := New(0)
	const files = 3000
	for i := range files {
		f := file{id: uuid.New(), model: "m", chunks: synthChunks(r, 1)}
		ch := Changes{Generation: int64(i + 1), Added: []File{f.keyword(t)}}
		if err := ix.Refresh(ch.Generation, func(int64) (Changes, error) { return ch, nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.Merge(); err != nil {
			t.Fatal(err)
		}
		if n := ix.Segments(); n > 7*5+1 {
			t.Fatalf("%d segments after %d files", n, i+1)
		}
	}
	// Read at once, as a first search does, they merge in one pass.
	bulk := New(0)
	ch := Changes{Generation: 1}
	for range files {
		f := file{id: uuid.New(), model: "m", chunks: synthChunks(r, 1)}
		ch.Added = append(ch.Added, f.keyword(t))
	}
	if err := bulk.Refresh(1, func(int64) (Changes, error) { return ch, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := bulk.Merge(); err != nil {
		t.Fatal(err)
	}
	if n := bulk.Segments(); n != 1 {
		t.Errorf("%d one-chunk files read at once merged into %d segments; want 1", files, n)
	}
}

// TestRefreshReadsOnce checks that searches finding an index behind at the
// same time read the changes once.
func TestRefreshReadsOnce(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	f := file{id: uuid.New(), model: "m", chunks: synthChunks(r, 20)}
	ix := New(0)
	var reads atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			err := ix.Refresh(5, func(have int64) (Changes, error) {
				reads.Add(1)
				return Changes{Generation: 5, Added: []File{f.keyword(t)}}, nil
			})
			if err != nil {
				t.Error(err)
			}
			ix.Search([]Term{{"w1", 1}}, "m", 10, params)
		})
	}
	wg.Wait()
	if reads.Load() != 1 {
		t.Errorf("changes read %d times; want once", reads.Load())
	}
	if ix.Chunks() != 20 {
		t.Errorf("%d chunks; want 20", ix.Chunks())
	}
	// A failed read changes nothing and is returned.
	boom := errors.New("database down")
	if err := ix.Refresh(6, func(int64) (Changes, error) { return Changes{}, boom }); !errors.Is(err, boom) {
		t.Errorf("Refresh = %v; want the read's error", err)
	}
	if ix.Generation() != 5 {
		t.Errorf("generation %d after a failed read; want 5", ix.Generation())
	}
}

// TestMalformedPostings checks that postings cut short or altered are
// refused or read, never crashing a search or a merge, and that a merge
// refuses any cut.
func TestMalformedPostings(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	good := postingsOf(t, synthChunks(r, 40))
	qs := [][]Term{{{"w0", 1}, {"w1", 2}}, {{"w3", 1}, {"w20", 1}}}
	// load searches b as a segment, then merged with another file, and
	// reports whether the index and the merge accepted it.
	load := func(b []byte) (added, merged bool) {
		t.Helper()
		ix := New(0)
		ch := Changes{Generation: 1, Added: []File{{ID: uuid.New(), Model: "m", Postings: b}, {ID: uuid.New(), Model: "m", Postings: good}}}
		if err := ix.Refresh(1, func(int64) (Changes, error) { return ch, nil }); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("refused with %v; want ErrMalformed", err)
			}
			return false, false
		}
		for _, q := range qs {
			ix.Search(q, "m", 10, params)
		}
		m, err := mergeSegments(ix.segments)
		if err != nil {
			return true, false
		}
		ix.segments = []segment{m}
		for _, q := range qs {
			ix.Search(q, "m", 10, params)
		}
		return true, true
	}
	if _, ok := load(good); !ok {
		t.Fatal("well-formed postings refused")
	}
	for cut := range len(good) {
		if _, merged := load(good[:cut]); merged {
			t.Fatalf("postings cut to %d of %d bytes accepted", cut, len(good))
		}
	}
	if added, _ := load(append([]byte{Format + 1}, good[1:]...)); added {
		t.Error("postings of an unknown format accepted")
	}
	if err := Check(append([]byte{Format + 1}, good[1:]...)); !errors.Is(err, ErrMalformed) {
		t.Errorf("Check(unknown format) = %v; want ErrMalformed", err)
	}
	for i := range len(good) {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			bad := slices.Clone(good)
			bad[i] ^= x
			load(bad)
		}
	}
}

// TestMergeIsOneBuild checks that merged segments hold the very bytes of
// the postings of all their chunks built as one file.
func TestMergeIsOneBuild(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	var all []chunk
	var segs []segment
	base := int32(0)
	for _, n := range []int{3, 1, 17, 130, 2, 40} {
		cs := synthChunks(r, n)
		all = append(all, cs...)
		sg, err := parse(postingsOf(t, cs))
		if err != nil {
			t.Fatal(err)
		}
		sg.base = base
		base += sg.n
		segs = append(segs, sg)
	}
	one, err := parse(postingsOf(t, all))
	if err != nil {
		t.Fatal(err)
	}
	merged, err := mergeSegments(segs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(merged.terms, one.terms) || !bytes.Equal(merged.blocks, one.blocks) || merged.nterms != one.nterms || merged.n != one.n {
		t.Errorf("merged %d terms in %d bytes; want %d in %d", merged.nterms, len(merged.terms), one.nterms, len(one.terms))
	}
}

func TestParseTSVectorTruncated(t *testing.T) {
	t.Parallel()
	raw := encodeTSVector(map[string]int{"it's": 2, "back\\slash": 1, "ünïcödé": 0})
	got := map[string]int{}
	if err := parseTSVector(raw, func(l []byte, c int) { got[string(l)] = c }); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"it's": 2, "back\\slash": 1, "ünïcödé": 1}; !maps.Equal(got, want) {
		t.Errorf("parsed %v; want %v", got, want)
	}
	for cut := range len(raw) {
		if err := parseTSVector(raw[:cut], func([]byte, int) {}); err == nil {
			t.Errorf("tsvector cut to %d of %d bytes accepted", cut, len(raw))
		}
	}
}

func TestCacheBudget(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 14))
	build := func() *Index {
		ix := New(0)
		f := file{id: uuid.New(), model: "m", chunks: synthChunks(r, 200)}
		ch := Changes{Generation: 1, Added: []File{f.keyword(t)}}
		if err := ix.Refresh(1, func(int64) (Changes, error) { return ch, nil }); err != nil {
			t.Fatal(err)
		}
		return ix
	}
	one := build()
	c := NewCache(3*one.Bytes()+one.Bytes()/2, nil)
	ixs := []*Index{one, build(), build(), build()}
	for i, ix := range ixs {
		if !c.Put(fmt.Sprint(i), ix) {
			t.Fatalf("index %d not cached", i)
		}
	}
	if c.Get("0") != nil {
		t.Error("the least recently used index was kept past the budget")
	}
	for i := 1; i < 4; i++ {
		if c.Get(fmt.Sprint(i)) != ixs[i] {
			t.Errorf("index %d evicted", i)
		}
	}
	if c.UsedBytes() > 3*one.Bytes()+one.Bytes()/2 {
		t.Errorf("%d bytes used over a budget of %d", c.UsedBytes(), 3*one.Bytes()+one.Bytes()/2)
	}
	small := NewCache(one.Bytes()/2, nil)
	if small.Put("x", one) || small.Get("x") != nil {
		t.Error("an index over the whole budget was cached")
	}
	c.Drop("2", nil)
	if c.Get("2") != nil {
		t.Error("Drop kept the index")
	}
}

// TestMergeInTheBackground checks that the cache merges an index it
// holds, off the search path, and that searches during the merge rank as
// after it.
func TestMergeInTheBackground(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 16))
	var files []file
	ch := Changes{Generation: 1}
	for range 300 {
		f := file{id: uuid.New(), model: "m", chunks: synthChunks(r, 1+r.IntN(3))}
		files = append(files, f)
		ch.Added = append(ch.Added, f.keyword(t))
	}
	ix := New(0)
	if err := ix.Refresh(1, func(int64) (Changes, error) { return ch, nil }); err != nil {
		t.Fatal(err)
	}
	c := NewCache(0, nil)
	before := ix.Bytes()
	if !c.Put("c", ix) {
		t.Fatal("not cached")
	}
	var wg sync.WaitGroup
	wg.Go(func() { checkRankings(t, "during the merge", ix, files, "m") })
	wg.Wait()
	c.Wait()
	if ix.Segments() != 1 {
		t.Errorf("%d segments after the background merge; want 1", ix.Segments())
	}
	if c.UsedBytes() >= before {
		t.Errorf("the cache counts %d bytes after the merge, %d before", c.UsedBytes(), before)
	}
	checkRankings(t, "after the merge", ix, files, "m")
}

// BenchmarkIndex measures, in process, a first search of a conversation of
// ten 100-chunk files (their postings parsed and searched as segments), the
// merge of those segments that follows it off the search path, a search of
// the merged index, and the same for 1,000 one-chunk files:
//
//	go test -run '^$' -bench BenchmarkIndex ./docs/keyword/
func BenchmarkIndex(b *testing.B) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, shape := range []struct {
		name         string
		files, chunk int
	}{{"10x100", 10, 100}, {"1000x1", 1000, 1}} {
		var files []File
		for range shape.files {
			f := file{id: uuid.New(), model: "m", chunks: synthChunks(r, shape.chunk)}
			files = append(files, f.keyword(b))
		}
		qs := queries()
		build := func(b *testing.B) *Index {
			ix := New(0)
			ch := Changes{Generation: 1, Added: files}
			if err := ix.Refresh(1, func(int64) (Changes, error) { return ch, nil }); err != nil {
				b.Fatal(err)
			}
			return ix
		}
		b.Run(shape.name+"/first-search", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				build(b).Search(qs[i%len(qs)], "m", 20, params)
			}
		})
		b.Run(shape.name+"/merge", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				ix := build(b)
				b.StartTimer()
				if _, err := ix.Merge(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(shape.name+"/search-merged", func(b *testing.B) {
			ix := build(b)
			if _, err := ix.Merge(); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				ix.Search(qs[i%len(qs)], "m", 20, params)
			}
		})
	}
}
