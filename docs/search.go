package docs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/mcpsearch/mcpsearch/docs/keyword"
	"github.com/mcpsearch/mcpsearch/extract"
)

// Search limits and defaults.
const (
	DefaultTopK   = 5
	MaxTopK       = 50
	MaxQueryRunes = 2000
)

// DefaultBM25K1 and DefaultBM25B are the BM25 parameters used unless
// Options sets others; see doc/documents.md (search quality) for how they
// were chosen.
const (
	DefaultBM25K1 = 0.9
	DefaultBM25B  = 0.4
)

// Ranking constants: 60 is the customary reciprocal rank fusion k.
const (
	rrfK = 60
	// hybridDepth is the minimum depth of each list fused by Hybrid.
	hybridDepth = 50
	// minEfSearch is pgvector's default hnsw.ef_search.
	minEfSearch = 40
	// maxEfSearch is the largest hnsw.ef_search pgvector accepts.
	maxEfSearch = 1000
)

// Mode selects how Search ranks chunks.
type Mode string

// Search modes.
const (
	// Hybrid fuses the Vector and Keyword rankings; the default.
	Hybrid Mode = "hybrid"
	// Vector ranks by cosine similarity of embeddings.
	Vector Mode = "vector"
	// Keyword ranks by Okapi BM25 over the chunks' words.
	Keyword Mode = "keyword"
)

// Modes returns the search modes, the default first.
func Modes() []Mode { return []Mode{Hybrid, Vector, Keyword} }

// Query is a search over one conversation's ready files.
type Query struct {
	// Text is what to look for: 1 to MaxQueryRunes characters.
	Text string
	// ConversationID selects the files searched.
	ConversationID string
	// TopK is the most chunks returned, at most MaxTopK: 0 means
	// DefaultTopK.
	TopK int
	// Threshold is the least cosine similarity, 0..1, a chunk needs in
	// Vector mode, and in Hybrid mode unless it matched keywords. Keyword
	// mode ignores it. nil means Store.DefaultThreshold, the similarity
	// that means "relevant" for the embedder in use.
	Threshold *float64
	// Mode is the ranking; "" means Hybrid.
	Mode Mode
	// SourceID, when set, restricts the search to the files of one source
	// of the conversation (a site crawled, a folder ingested: package
	// sources), with the rankings of the whole conversation: the hits are
	// the conversation's hits that are that source's. "" searches every
	// file.
	SourceID string
}

// Hit is a chunk found by Search.
type Hit struct {
	ChunkID  string
	FileID   string
	FileName string
	Content  string
	// Similarity is the cosine similarity of the chunk's embedding to the
	// query's, in every mode.
	Similarity float64
	// PageNumber is the PDF page the chunk starts on; 0 for formats without
	// pages. It equals PageStart.
	PageNumber int
	// PageStart and PageEnd are the PDF pages of the chunk's first and last
	// characters; 0 for formats without pages.
	PageStart int
	PageEnd   int
	// Score is the mode's ranking score: the reciprocal rank fusion score
	// in Hybrid mode (the keyword term alone where the vector ranking could
	// not change the hits and was not run), the cosine similarity in Vector
	// mode, the BM25 score in Keyword mode. Hits are ordered by it, highest
	// first.
	Score float64
	// CharStart and CharEnd are the chunk's rune offsets in the file's
	// extracted text.
	CharStart int
	CharEnd   int
	// Source is the URL the chunk's file was fetched from; "" for a file
	// uploaded directly.
	Source string
	// Location says where the chunk comes from in its format's own terms:
	// pages, slides, a sheet's cells, a heading path, OCR.
	Location extract.Location
}

// candidate is a chunk in one ranking, before its content is fetched.
type candidate struct {
	id, fileID string
	similarity float64
	score      float64
	keyword    bool
	// vector is set when the vector ranking computed similarity.
	vector bool
}

// Search returns the conversation's chunks that best match q, best first.
// Only chunks embedded by the store's current embedder are searched, so
// vectors of different models are never compared; an unknown conversation
// yields no hits and no error.
//
//   - Vector: the chunks nearest to the query embedding by cosine distance.
//     A conversation of up to exactVectorChunks chunks is ranked exactly;
//     a larger one from the model's HNSW index for the chunks it covers
//     (on pgvector 0.8 and later with iterative index scans, hnsw.ef_search
//     the number of chunks fetched, at least 40, so the conversation
//     filter cannot starve the result; on older pgvector twice that, and
//     an exact scan of the conversation when the index returns too few)
//     and exactly for the chunks stored since the index was built (see
//     index.go). Chunks with similarity below Threshold are dropped. Score
//     is the similarity.
//   - Keyword: chunks holding any of the query's words, after PostgreSQL's
//     English text search normalisation (stemming, stop words), ranked by
//     Okapi BM25 (k1 0.9, b 0.4) over the conversation's in-process
//     inverted index (see keyword.go), with document frequencies and
//     lengths of the conversation's chunks; a word repeated in the query
//     counts as often as it occurs. Threshold does not apply; Similarity is
//     still reported. Score is the BM25 score. A query made only of stop
//     words matches nothing.
//   - Hybrid: reciprocal rank fusion (k = 60) of the Vector and Keyword
//     rankings, each taken max(50, 4 × TopK) deep. A chunk is kept when it
//     matched keywords or its similarity reaches Threshold. Score is the
//     fused score. Where the vector ranking cannot change the hits (the
//     keyword ranking found at least TopK chunks and the vector weight is
//     too small to reorder them, see keywordDecides: the hashing embedder's
//     0.01 up to TopK 17) it is not run: the hits are the same, and their
//     Score is the keyword ranking's term alone. The keyword ranking runs
//     in the process while PostgreSQL runs the vector ranking.
//
// With SourceID set, both rankings keep the chunks of the source's files
// only, read from its pages with the conversation's counters (a cost that
// grows with the source's pages, not the conversation's): the keyword
// index skips the other files as it scores (see keyword.Index.SearchFiles),
// and pgvector ranks the source's chunks exactly, found through their
// files, when they are few (up to exactVectorChunks, estimated from the
// conversation's chunks per file), through the HNSW index otherwise,
// each chunk it finds looked up among the source's pages.
//
// Errors wrap ErrEmptyQuery (no text), ErrInvalidArgument (text over
// MaxQueryRunes characters, a conversation id CheckConversationID refuses,
// threshold outside 0..1, TopK outside 0..MaxTopK, unknown mode, a
// source_id that is not one of the conversation's sources),
// ErrUnavailable or the embedder's error.
func (s *Store) Search(ctx context.Context, q Query) ([]Hit, error) {
	q, err := s.checkQuery(q)
	if err != nil {
		return nil, err
	}
	return s.search(ctx, q, searchRun{k: q.TopK, fetch: true})
}

// MaxRankDepth is the deepest ranking Rank returns.
const MaxRankDepth = 1000

// Rank is Search returning up to depth hits (at most MaxRankDepth) rather
// than q.TopK, which it ignores: evaluation measures recall deeper than a
// tool call may ask for. It returns the ranking alone: each hit's ChunkID,
// FileID and Score, and its Similarity where the vector ranking computed
// it (Vector and Hybrid modes; 0 for a chunk only the keyword ranking
// found); the other fields are left empty, so that a ranking hundreds deep
// costs about what a search of a few hits does.
func (s *Store) Rank(ctx context.Context, q Query, depth int) ([]Hit, error) {
	if depth < 1 || depth > MaxRankDepth {
		return nil, fmt.Errorf("docs: rank: %w: depth %d is outside 1..%d", ErrInvalidArgument, depth, MaxRankDepth)
	}
	q.TopK = 0
	q, err := s.checkQuery(q)
	if err != nil {
		return nil, err
	}
	return s.search(ctx, q, searchRun{k: depth})
}

// searchRun is what search is asked for.
type searchRun struct {
	// k is the most hits returned.
	k int
	// fetch asks for the hits' text and places, as Search returns them;
	// without it search returns the ranking alone, as Rank does.
	fetch bool
	// bothRankings runs Hybrid's vector ranking even where the keyword
	// ranking decides the hits alone (see keywordDecides), so that tests
	// can compare the two.
	bothRankings bool
}

// search runs a checked query: it reads what it needs of the conversation
// (one round trip, whatever its size), asks the keyword index and pgvector
// for their rankings, at once, fuses them, and, with run.fetch set,
// fetches the hits' text and places. A search that fetches sends three
// round trips when it ranks vectors (the counters, the vector ranking, the
// hits) and two when it does not.
func (s *Store) search(ctx context.Context, q Query, run searchRun) ([]Hit, error) {
	emb := s.Embedder()
	out, err := emb.Embed(ctx, []string{q.Text})
	if err != nil {
		return nil, fmt.Errorf("docs: search: embed query: %w", err)
	}
	if err := checkVectors(emb, 1, out); err != nil {
		return nil, fmt.Errorf("docs: search: %w", err)
	}
	m := modelSpec{name: emb.Model(), dims: emb.Dimensions()}
	k := run.k

	var vectorDepth, keywordDepth int
	switch q.Mode {
	case Vector:
		vectorDepth = k
	case Keyword:
		keywordDepth = k
	case Hybrid:
		keywordDepth, vectorDepth = hybridDepths(k)
	}
	conv, terms, err := s.conversationState(ctx, q, m.name, keywordDepth > 0)
	if err != nil {
		return nil, err
	}
	if conv.chunks == 0 || (conv.source != nil && len(conv.source.files) == 0) {
		return []Hit{}, nil
	}
	if len(terms) == 0 {
		keywordDepth = 0
	}
	weight := s.VectorWeight()
	rankKeywords := func() ([]candidate, error) {
		if keywordDepth == 0 {
			return nil, nil
		}
		return s.keywordRanking(ctx, q.ConversationID, conv, terms, m.name, keywordDepth, conv.source)
	}
	var kl []candidate
	var keywords chan rankingResult
	switch {
	case q.Mode == Hybrid && run.fetch && !run.bothRankings && keywordDecides(k, k, weight):
		// The keyword ranking may make the vector ranking needless:
		// rank keywords first and see.
		if kl, err = rankKeywords(); err != nil {
			return nil, err
		}
		if keywordDecides(len(kl), k, weight) {
			vectorDepth = 0
		}
	case vectorDepth > 0 && keywordDepth > 0:
		// The keyword ranking runs in this process while PostgreSQL
		// runs the vector ranking.
		keywords = make(chan rankingResult, 1)
		go func() {
			list, err := rankKeywords()
			keywords <- rankingResult{list, err}
		}()
	default:
		if kl, err = rankKeywords(); err != nil {
			return nil, err
		}
	}

	qv := pgvector.NewVector(out[0])
	var vl []candidate
	var db batcher = s.pool
	inTx := false
	if vectorDepth > 0 {
		iterative, err := s.iterativeScan(ctx)
		if err != nil {
			return nil, err
		}
		// The vector ranking and the hits' details are read in one
		// snapshot: a file re-embedded or deleted between them would
		// otherwise be ranked and not found. The ranking's batch begins
		// the transaction and the details' batch ends it.
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, dbError("docs: search", err)
		}
		defer func() {
			if conn.Conn().PgConn().TxStatus() != 'I' {
				_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			}
			conn.Release()
		}()
		db, inTx = conn, true
		p := vectorPlan{model: m, query: qv, conversationID: q.ConversationID, depth: vectorDepth, conv: conv,
			exactChunks: s.exactChunks, iterative: iterative, source: conv.source}
		if vl, err = p.rank(ctx, conn); err != nil {
			return nil, err
		}
	}
	if keywords != nil {
		r := <-keywords
		if r.err != nil {
			return nil, r.err
		}
		kl = r.list
	}

	var ranked []candidate
	switch q.Mode {
	case Vector:
		for _, c := range vl {
			if c.similarity >= *q.Threshold {
				c.score = c.similarity
				ranked = append(ranked, c)
			}
		}
	case Keyword:
		ranked = kl
	case Hybrid:
		ranked = fuse(vl, kl, weight, *q.Threshold)
	}
	if len(ranked) > k {
		ranked = ranked[:k]
	}
	if !run.fetch {
		hits := make([]Hit, len(ranked))
		for i, c := range ranked {
			hits[i] = Hit{ChunkID: c.id, FileID: c.fileID, Similarity: c.similarity, Score: c.score}
		}
		return hits, nil
	}
	return details(ctx, db, inTx, q.ConversationID, m, qv, ranked)
}

// rankingResult is a ranking computed on another goroutine.
type rankingResult struct {
	list []candidate
	err  error
}

// batcher sends statements and batches of them: a pool, or one of its
// connections when the statements share a transaction.
type batcher interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// keywordDecides reports whether Hybrid's first k hits are the keyword
// ranking's first k, in its order, whatever the vector ranking, when the
// keyword ranking found keywordHits chunks and the vector ranking weighs
// vectorWeight. Hybrid then need not rank vectors at all.
//
// A chunk's fused score is 1/(rrfK+r) for its keyword rank r plus
// w/(rrfK+v) for its vector rank v, each term 0 without that rank. The chunk
// at keyword rank r <= k scores at least 1/(rrfK+r); any chunk below it in
// the keyword ranking, or absent from it, scores at most 1/(rrfK+r+1) plus
// the vector ranking's best term, w/(rrfK+1). So the first k keyword hits
// keep their order and stay ahead of every other chunk when
// 1/(rrfK+r) - 1/(rrfK+r+1) > w/(rrfK+1) for every r <= k; the left side
// shrinks as r grows, so r = k decides. Chunks that matched keywords are
// kept whatever the threshold, so it changes nothing. With the hashing
// embedder's weight, 0.01, this holds up to k = 17 (see weight.go).
//
// The hits are the same, in the same order, with the same similarity (the
// details compute it for every hit); their Score lacks the vector term, at
// most w/(rrfK+1).
func keywordDecides(keywordHits, k int, vectorWeight float64) bool {
	if keywordHits < k {
		return false
	}
	gap := 1/float64(rrfK+k) - 1/float64(rrfK+k+1)
	// The margin keeps rounding out of the comparison: the scores are
	// sums of two terms in float64.
	return gap-vectorWeight/float64(rrfK+1) > 1e-12
}

// hybridDepths is how deep Hybrid takes the keyword and the vector
// rankings it fuses for k hits. For a tool call's few hits both are four
// times k, so that a chunk ranked modestly by both lists is not missed. For
// Rank's deep rankings the keyword list is k and a half deep, and the vector
// list half as deep as k (200 at least): an index scan costs in proportion
// to the chunks it returns, where the keyword ranking costs the same at any
// depth, and at those depths the vector list's tail, weighed as
// reciprocal ranks, moves the fused order little.
func hybridDepths(k int) (keyword, vector int) {
	if k <= MaxTopK {
		d := max(hybridDepth, 4*k)
		return d, d
	}
	return k + k/2, max(4*MaxTopK, k/2)
}

// convState is what a search needs to know of a conversation first, all of
// it kept up to date as files are written (see writes.go).
type convState struct {
	// chunks counts the conversation's chunks, of every model.
	chunks int64
	// generation changes with every change to the chunks; epoch names the
	// conversation's incarnation; an index older than removalFloor must be
	// rebuilt (see keywords.go).
	generation, epoch, removalFloor int64
	// floor is the write number up to which chunks belong to a deleted
	// incarnation of the conversation (0: none).
	floor int64
	// watermark is the last write the model's vector index covers; -1
	// when the model has no index (see index.go).
	watermark int64
	// covered estimates the conversation's chunks of the model that the
	// index covers.
	covered int64
	// source is the source the search is restricted to; nil for none.
	source *sourceFiles
}

// sourceFiles are the files of one source of a conversation.
type sourceFiles struct {
	id    string
	files []uuid.UUID
	// chunks estimates their chunks, from the conversation's chunks per
	// ready file: it decides how vectors are ranked, each way complete.
	chunks int64
}

// conversationState reads the conversation's counters and the watermark of
// model's vector index and, with withTerms set, the query's lexemes with
// their counts, in one round trip: a few index lookups, whatever the
// conversation's size.
func (s *Store) conversationState(ctx context.Context, q Query, model string, withTerms bool) (convState, []keyword.Term, error) {
	b := &pgx.Batch{}
	b.Queue(`
		SELECT s.chunk_count, s.generation, s.epoch, s.removal_floor, s.write_floor,
		       coalesce(v.watermark, -1), coalesce(m.covered, 0), s.ready_files
		FROM conversation_stats s
		LEFT JOIN conversation_models m ON m.conversation_id = s.conversation_id AND m.embedding_model = $2
		LEFT JOIN vector_indexes v ON v.embedding_model = $2
		WHERE s.conversation_id = $1`, q.ConversationID, model)
	if withTerms {
		b.Queue(`SELECT lexeme, cardinality(positions) FROM unnest(to_tsvector('english', $1::text))`, q.Text)
	}
	if q.SourceID != "" {
		// The source's files, read from its pages alone (a file may
		// hold the pages of several of its URLs): whatever their status
		// or model, since the rankings hold only what they may find,
		// and through the pages' key, whatever the plan, so that a
		// small source costs little in a large conversation.
		b.Queue(`SELECT EXISTS (SELECT FROM sources WHERE conversation_id = $1 AND id = $2::uuid)`, q.ConversationID, q.SourceID)
		b.Queue(`
			SELECT DISTINCT file_id FROM source_pages
			WHERE conversation_id = $1 AND source_id = $2::uuid AND file_id IS NOT NULL`, q.ConversationID, q.SourceID)
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	st := convState{watermark: -1}
	var readyFiles int64
	err := br.QueryRow().Scan(&st.chunks, &st.generation, &st.epoch, &st.removalFloor, &st.floor, &st.watermark, &st.covered, &readyFiles)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, nil, dbError("docs: search", err)
	}
	var terms []keyword.Term
	if withTerms {
		rows, err := br.Query()
		if err != nil {
			return st, nil, dbError("docs: search", err)
		}
		terms, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyword.Term, error) {
			var t keyword.Term
			err := r.Scan(&t.Lexeme, &t.Count)
			return t, err
		})
		if err != nil {
			return st, nil, dbError("docs: search", err)
		}
	}
	if q.SourceID != "" {
		if st.source, err = readSourceFiles(br, q); err != nil {
			return st, nil, err
		}
		st.source.chunks = int64(len(st.source.files)) * st.chunks / max(readyFiles, 1)
	}
	if err := br.Close(); err != nil {
		return st, nil, dbError("docs: search", err)
	}
	return st, terms, nil
}

// readSourceFiles reads the answers to conversationState's statements on
// q's source: whether it is the conversation's, and its ready files.
func readSourceFiles(br pgx.BatchResults, q Query) (*sourceFiles, error) {
	var known bool
	if err := br.QueryRow().Scan(&known); err != nil {
		return nil, dbError("docs: search", err)
	}
	if !known {
		return nil, fmt.Errorf("docs: search: %w: source_id %s is not a source of conversation %q: list_sources gives its sources' ids",
			ErrInvalidArgument, q.SourceID, q.ConversationID)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	files, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	return &sourceFiles{id: q.SourceID, files: files}, nil
}

// modelSpec names the embedding model searched.
type modelSpec struct {
	name string
	dims int
}

// checkQuery validates q and fills in defaults; the Threshold it returns is
// never nil.
func (s *Store) checkQuery(q Query) (Query, error) {
	if strings.TrimSpace(q.Text) == "" {
		return q, fmt.Errorf("docs: search: %w", ErrEmptyQuery)
	}
	if n := utf8.RuneCountInString(q.Text); n > MaxQueryRunes {
		return q, fmt.Errorf("docs: search: %w: the query is %d characters long; the limit is %d", ErrInvalidArgument, n, MaxQueryRunes)
	}
	if !utf8.ValidString(q.Text) || strings.ContainsRune(q.Text, 0) {
		return q, fmt.Errorf("docs: search: %w: the query is not valid UTF-8 text", ErrInvalidArgument)
	}
	conv, err := CheckConversationID(q.ConversationID)
	if err != nil {
		return q, err
	}
	q.ConversationID = conv
	if q.Threshold != nil {
		if t := *q.Threshold; math.IsNaN(t) || t < 0 || t > 1 {
			return q, fmt.Errorf("docs: search: %w: threshold %v is outside 0..1", ErrInvalidArgument, t)
		}
	}
	if q.Threshold == nil {
		t := s.DefaultThreshold()
		q.Threshold = &t
	}
	switch {
	case q.TopK < 0:
		return q, fmt.Errorf("docs: search: %w: top_k %d is negative", ErrInvalidArgument, q.TopK)
	case q.TopK == 0:
		q.TopK = DefaultTopK
	case q.TopK > MaxTopK:
		return q, fmt.Errorf("docs: search: %w: top_k %d is above the limit; send 1 to %d", ErrInvalidArgument, q.TopK, MaxTopK)
	}
	if q.SourceID = strings.TrimSpace(q.SourceID); q.SourceID != "" {
		id, err := uuid.Parse(q.SourceID)
		if err != nil {
			return q, fmt.Errorf("docs: search: %w: source_id %q is not a source id: list_sources gives them", ErrInvalidArgument, clipRunes(q.SourceID, 80))
		}
		q.SourceID = id.String()
	}
	switch q.Mode {
	case "":
		q.Mode = Hybrid
	case Hybrid, Vector, Keyword:
	default:
		return q, fmt.Errorf("docs: search: %w: unknown mode %q (want hybrid, vector or keyword)", ErrInvalidArgument, q.Mode)
	}
	return q, nil
}

// iterativeScan reports whether the server's pgvector supports
// hnsw.iterative_scan (0.8.0 and later).
func (s *Store) iterativeScan(ctx context.Context) (bool, error) {
	if s.forceExactFallback {
		return false, nil
	}
	v, err := s.pgvectorVersion(ctx)
	if err != nil {
		return false, err
	}
	return versionAtLeast(v, 0, 8), nil
}

// versionAtLeast reports whether a "major.minor[.patch]" version is at least
// major.minor.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// exactVectorChunks is the largest conversation whose vector ranking is
// computed exactly, over every chunk, rather than from the HNSW index. An
// index scan filtered to a small part of a large table is approximate twice
// (graph and filter) and may come back short; an exact scan of a few
// thousand chunks found through the conversation's b-tree index is fast and
// complete.
const exactVectorChunks = 2000

// vectorPlan is a vector ranking to run: the model and query vector, the
// conversation and what the search knows of it, and how deep.
type vectorPlan struct {
	model          modelSpec
	query          pgvector.Vector
	conversationID string
	depth          int
	conv           convState
	// exactChunks is the largest conversation ranked exactly; iterative
	// says pgvector scans its index iteratively (0.8 and later).
	exactChunks int64
	iterative   bool
	// source restricts the ranking to its files; nil for none.
	source *sourceFiles
}

// filter returns the condition the plan's statements add on the chunks of
// a source, and the arguments of the statements: the query vector, the
// conversation, the depth and, with a source, $4: its files when they are
// ranked exactly (indexed false), its id otherwise.
func (p vectorPlan) filter(indexed bool) (string, []any) {
	args := []any{p.query, p.conversationID, p.depth}
	switch {
	case p.source == nil:
		return "", args
	case indexed:
		return sourceFilter, append(args, p.source.id)
	}
	return sourceFilesFilter, append(args, p.source.files)
}

// sourceFilesFilter keeps the chunks of the files $4: a source's few
// chunks are found through their files' index. The statements that hold
// it are planned for their values (plan_cache_mode, see rank), so that the
// planner counts the files.
const sourceFilesFilter = ` AND file_id = ANY($4::uuid[])`

// sourceFilter keeps the chunks of the files of source $4 of conversation
// $2: the chunks an index scan finds are looked up among the source's
// pages, rather than a large source's files sent with each statement.
const sourceFilter = ` AND file_id IN (SELECT file_id FROM source_pages WHERE conversation_id = $2 AND source_id = $4::uuid)`

// rank returns the conversation's chunks of the plan's model most similar
// to the query, up to its depth, most similar first. A conversation of
// which the model's index covers more than exactChunks chunks is ranked
// through the index for those and exactly for the fresh ones (see
// index.go); any other exactly. The statements go to the server in one
// round trip, which begins the read-only transaction the search's later
// statements on db share: db must be one connection.
func (p vectorPlan) rank(ctx context.Context, db batcher) (vector []candidate, err error) {
	// The index serves only a conversation of which it covers more than
	// exactChunks chunks: for fewer, an exact scan is as fast, and a
	// filtered index scan would look for them among the whole model's.
	indexed := p.conv.covered > p.exactChunks && p.conv.watermark >= 0
	if p.source != nil && p.source.chunks <= p.exactChunks {
		// A source's few chunks are ranked exactly, found by their
		// files whatever the conversation's size.
		indexed = false
	}
	where, args := p.filter(indexed)
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	settings := 1
	if p.source != nil {
		// A plan made once for any list of files would fit few.
		settings++
		b.Queue("SET LOCAL plan_cache_mode = force_custom_plan")
	}
	if indexed {
		// On a distributed database (Citus) the settings below must
		// reach the worker that runs the search: Citus sends a
		// transaction's SET LOCAL commands along when this is 'local'.
		// Elsewhere it is a placeholder setting nothing reads.
		settings++
		b.Queue("SET LOCAL citus.propagate_set_commands = 'local'")
		settings++
		// An iterative scan goes on past ef_search while too few rows
		// passed the filter, so the list needs no more than its depth;
		// without it, twice the depth leaves room for the filter.
		ef := 2 * p.depth
		if p.iterative {
			ef = p.depth
		}
		b.Queue(fmt.Sprintf("SET LOCAL hnsw.ef_search = %d", min(maxEfSearch, max(minEfSearch, ef))))
		// At a depth of 50 or more the planner prices a sort of the
		// whole conversation below the index scan, and is wrong by an
		// order of magnitude on a large one.
		settings++
		b.Queue("SET LOCAL enable_seqscan = off")
		if p.iterative {
			// relaxed_order lets the index scan continue past ef_search
			// until enough rows pass the conversation filter; results may
			// come slightly out of order and are sorted below.
			// A conversation just over exactChunks in a database of
			// millions of chunks passes the filter once in several
			// hundred tuples: scan far enough to fill the list.
			settings += 2
			b.Queue("SET LOCAL hnsw.iterative_scan = relaxed_order")
			b.Queue("SET LOCAL hnsw.max_scan_tuples = 200000")
		}
		b.Queue(vectorSQL(p.model, p.conv.watermark, p.conv.floor, where), args...)
		b.Queue(exactVectorSQL(p.model, max(p.conv.watermark, p.conv.floor), where), args...)
	} else {
		b.Queue(exactVectorSQL(p.model, p.conv.floor, where), args...)
	}
	br := db.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = dbError("docs: search", cerr)
		}
	}()
	for range settings {
		if _, err := br.Exec(); err != nil {
			return nil, dbError("docs: search", err)
		}
	}
	rows, err := br.Query()
	if vector, err = collectCandidates(rows, err); err != nil {
		return nil, err
	}
	short := len(vector) < p.depth
	if indexed {
		rows, err := br.Query()
		fresh, err := collectCandidates(rows, err)
		if err != nil {
			return nil, err
		}
		vector = append(vector, fresh...)
	}
	if err := br.Close(); err != nil {
		return nil, dbError("docs: search", err)
	}
	if indexed && !p.iterative && short {
		// Without iterative scans the index yields at most ef_search rows
		// before the conversation filter; a short answer may be the
		// filter's doing, so rank the conversation's chunks exactly.
		rows, err := db.Query(ctx, exactVectorSQL(p.model, p.conv.floor, where), args...)
		if vector, err = collectCandidates(rows, err); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(vector, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.similarity, a.similarity), strings.Compare(a.id, b.id))
	})
	if len(vector) > p.depth {
		vector = vector[:p.depth]
	}
	return vector, nil
}

// vectorSQL selects a conversation's chunks of model m written after floor
// and up to watermark by cosine distance to $1, with $2 the conversation and
// $3 the limit, and the condition where (sourceFilter, or ""). The ORDER BY
// expression and the WHERE predicate repeat the definition of the index of
// that watermark (see BuildIndex) so that the planner can use it.
func vectorSQL(m modelSpec, watermark, floor int64, where string) string {
	return fmt.Sprintf(`
		SELECT id::text, file_id::text, 1 - (%[1]s <=> $1::vector::%[2]s)
		FROM chunks
		WHERE embedding_model = %[3]s AND write_seq <= %[4]d AND conversation_id = $2 AND write_seq > %[5]d%[6]s
		ORDER BY %[1]s <=> $1::vector::%[2]s
		LIMIT $3`, vectorExpr(m.dims), vectorType(m.dims), modelLiteral(m.name), watermark, floor, where)
}

// exactVectorSQL is vectorSQL computed over every chunk of the conversation
// written after watermark (-1: every chunk), through the b-tree index on
// (conversation_id, embedding_model, write_seq), or of a source's files
// through the index on their ids: the distances are materialised before
// they are ordered, so an HNSW index cannot serve the ORDER BY.
func exactVectorSQL(m modelSpec, watermark int64, where string) string {
	return fmt.Sprintf(`
		WITH d AS MATERIALIZED (
			SELECT id, file_id, %[1]s <=> $1::vector::%[2]s AS distance
			FROM chunks
			WHERE conversation_id = $2 AND embedding_model = %[3]s AND write_seq > %[4]d%[5]s
		)
		SELECT id::text, file_id::text, 1 - distance FROM d ORDER BY distance LIMIT $3`,
		vectorExpr(m.dims), vectorType(m.dims), modelLiteral(m.name), watermark, where)
}

// collectCandidates reads rows of (id, file id, similarity).
func collectCandidates(rows pgx.Rows, err error) ([]candidate, error) {
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
		c := candidate{vector: true}
		var sim *float64
		if err := r.Scan(&c.id, &c.fileID, &sim); err != nil {
			return c, err
		}
		c.similarity = cleanSimilarity(sim)
		return c, nil
	})
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	return list, nil
}

// cleanSimilarity maps pgvector's NaN (a zero vector has no direction) and
// NULL to 0.
func cleanSimilarity(sim *float64) float64 {
	if sim == nil || math.IsNaN(*sim) {
		return 0
	}
	return *sim
}

// fuse merges a vector ranking and a keyword ranking by weighted reciprocal
// rank fusion: the keyword list adds 1 / (rrfK + rank) to a chunk's score
// and the vector list vectorWeight / (rrfK + rank), rank counting from 1.
// Chunks that matched no keyword need similarity >= threshold.
func fuse(vector, keyword []candidate, vectorWeight, threshold float64) []candidate {
	byID := make(map[string]*candidate, len(vector)+len(keyword))
	var order []*candidate
	add := func(list []candidate, weight float64) {
		for i, c := range list {
			f, ok := byID[c.id]
			if !ok {
				f = &candidate{id: c.id, fileID: c.fileID, similarity: c.similarity, vector: c.vector}
				byID[c.id] = f
				order = append(order, f)
			}
			f.score += weight / float64(rrfK+i+1)
			f.keyword = f.keyword || c.keyword
		}
	}
	add(vector, vectorWeight)
	add(keyword, 1)
	var out []candidate
	for _, f := range order {
		if f.keyword || f.similarity >= threshold {
			out = append(out, *f)
		}
	}
	slices.SortStableFunc(out, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.similarity, a.similarity), strings.Compare(a.id, b.id))
	})
	return out
}

// details fetches the content, file and similarity of ranked chunks,
// keeping their order. The similarity of chunks only the keyword ranking
// found is computed here, for the hits returned only. With inTx set, db is
// the connection whose transaction the vector ranking began, which the same
// round trip ends.
func details(ctx context.Context, db batcher, inTx bool, conv string, m modelSpec, qv pgvector.Vector, ranked []candidate) (hits []Hit, err error) {
	if len(ranked) == 0 {
		return []Hit{}, nil
	}
	ids := make([]string, len(ranked))
	for i, c := range ranked {
		ids[i] = c.id
	}
	b := &pgx.Batch{}
	b.Queue(fmt.Sprintf(`
		SELECT c.id::text, c.file_id::text, f.file_name, c.content, c.page_number, `+pageRange+`, c.char_start, c.char_end, f.source_url,
		       CASE WHEN c.embedding_model = %[3]s THEN 1 - (%[1]s <=> $2::vector::%[2]s) END
		FROM chunks c JOIN files f ON f.conversation_id = c.conversation_id AND f.id = c.file_id
		WHERE c.conversation_id = $3 AND c.id = ANY($1::uuid[])`, "(c.embedding::"+vectorType(m.dims)+")", vectorType(m.dims), modelLiteral(m.name)), ids, qv, conv)
	if inTx {
		b.Queue("ROLLBACK")
	}
	br := db.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = dbError("docs: search", cerr)
		}
	}()
	rows, err := br.Query()
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	byID := make(map[string]Hit, len(ranked))
	var h Hit
	var sim *float64
	var loc *string
	if _, err := pgx.ForEachRow(rows, []any{&h.ChunkID, &h.FileID, &h.FileName, &h.Content, &h.PageNumber, &h.PageStart, &h.PageEnd, &loc, &h.CharStart, &h.CharEnd, &h.Source, &sim}, func() error {
		h.Similarity = cleanSimilarity(sim)
		h.Location = chunkLocation(loc, h.PageStart, h.PageEnd)
		byID[h.ChunkID] = h
		return nil
	}); err != nil {
		return nil, dbError("docs: search", err)
	}
	hits = make([]Hit, 0, len(ranked))
	for _, c := range ranked {
		h, ok := byID[c.id]
		if !ok {
			continue
		}
		h.Score = c.score
		hits = append(hits, h)
	}
	return hits, nil
}
