package docs

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"
)

// Search limits and defaults.
const (
	DefaultTopK   = 5
	MaxTopK       = 50
	MaxQueryRunes = 2000
)

// Ranking constants. BM25's k1 and b are the values that ranked best on the
// project's evaluation sets; 60 is the customary reciprocal rank fusion k.
const (
	bm25K1 = 0.9
	bm25B  = 0.4
	rrfK   = 60
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
	// mode ignores it.
	Threshold float64
	// Mode is the ranking; "" means Hybrid.
	Mode Mode
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
	// pages.
	PageNumber int
	// Score is the mode's ranking score: the reciprocal rank fusion score
	// in Hybrid mode, the cosine similarity in Vector mode, the BM25 score
	// in Keyword mode. Hits are ordered by it, highest first.
	Score float64
	// CharStart and CharEnd are the chunk's rune offsets in the file's
	// extracted text.
	CharStart int
	CharEnd   int
}

// candidate is a chunk in one ranking, before its content is fetched.
type candidate struct {
	id         string
	similarity float64
	score      float64
	keyword    bool
}

// Search returns the conversation's chunks that best match q, best first.
// Only chunks embedded by the store's current embedder are searched, so
// vectors of different models are never compared; an unknown conversation
// yields no hits and no error.
//
//   - Vector: the chunks nearest to the query embedding by cosine distance,
//     from the model's HNSW index (hnsw.ef_search is twice the number of
//     chunks fetched, at least 40; on
//     pgvector 0.8 and later with iterative index scans, so the conversation
//     filter cannot starve the result; on older pgvector an exact scan of
//     the conversation when the index returns too few). Chunks with
//     similarity below Threshold are dropped. Score is the similarity.
//   - Keyword: chunks holding any of the query's words, after PostgreSQL's
//     English text search normalisation (stemming, stop words), found with
//     the full-text GIN index and ranked by Okapi BM25 (k1 0.9, b 0.4) with
//     document frequencies and lengths of the conversation's chunks.
//     Threshold does not apply; Similarity is still reported. Score is the
//     BM25 score. A query made only of stop words matches nothing.
//   - Hybrid: reciprocal rank fusion (k = 60) of the Vector and Keyword
//     rankings, each taken max(50, 4 × TopK) deep. A chunk is kept when it
//     matched keywords or its similarity reaches Threshold. Score is the
//     fused score.
//
// Errors wrap ErrEmptyQuery (no text), ErrInvalidArgument (text over
// MaxQueryRunes characters, a conversation id CheckConversationID refuses,
// threshold outside 0..1, TopK outside 0..MaxTopK, unknown mode), ErrUnavailable or the embedder's error.
func (s *Store) Search(ctx context.Context, q Query) ([]Hit, error) {
	q, err := checkQuery(q)
	if err != nil {
		return nil, err
	}
	emb := s.Embedder()
	out, err := emb.Embed(ctx, []string{q.Text})
	if err != nil {
		return nil, fmt.Errorf("docs: search: embed query: %w", err)
	}
	if err := checkVectors(emb, 1, out); err != nil {
		return nil, fmt.Errorf("docs: search: %w", err)
	}
	qv := pgvector.NewVector(out[0])
	m := modelSpec{name: emb.Model(), dims: emb.Dimensions()}

	iterative, err := s.iterativeScan(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	var vectorDepth, keywordDepth int
	switch q.Mode {
	case Vector:
		vectorDepth = q.TopK
	case Keyword:
		keywordDepth = q.TopK
	case Hybrid:
		vectorDepth = max(hybridDepth, 4*q.TopK)
		keywordDepth = vectorDepth
	}
	vl, kl, err := rankings(ctx, tx, m, qv, q, vectorDepth, keywordDepth, iterative)
	if err != nil {
		return nil, err
	}
	var ranked []candidate
	switch q.Mode {
	case Vector:
		for _, c := range vl {
			if c.similarity >= q.Threshold {
				c.score = c.similarity
				ranked = append(ranked, c)
			}
		}
	case Keyword:
		ranked = kl
	case Hybrid:
		ranked = fuse(vl, kl, s.opts.VectorWeight, q.Threshold)
	}
	if len(ranked) > q.TopK {
		ranked = ranked[:q.TopK]
	}
	hits, err := details(ctx, tx, ranked)
	if err != nil {
		return nil, err
	}
	return hits, nil
}

// modelSpec names the embedding model searched.
type modelSpec struct {
	name string
	dims int
}

// checkQuery validates q and fills in defaults.
func checkQuery(q Query) (Query, error) {
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
	if math.IsNaN(q.Threshold) || q.Threshold < 0 || q.Threshold > 1 {
		return q, fmt.Errorf("docs: search: %w: threshold %v is outside 0..1", ErrInvalidArgument, q.Threshold)
	}
	switch {
	case q.TopK < 0:
		return q, fmt.Errorf("docs: search: %w: top_k %d is negative", ErrInvalidArgument, q.TopK)
	case q.TopK == 0:
		q.TopK = DefaultTopK
	case q.TopK > MaxTopK:
		return q, fmt.Errorf("docs: search: %w: top_k %d is above the limit; send 1 to %d", ErrInvalidArgument, q.TopK, MaxTopK)
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

// rankings returns the vector ranking (up to vectorDepth chunks, most
// similar first) and the keyword ranking (up to keywordDepth chunks, best
// BM25 score first) of the conversation's chunks of model m; a depth of 0
// skips that ranking. The index settings and both queries go to the server
// in one round trip.
func rankings(ctx context.Context, tx pgx.Tx, m modelSpec, qv pgvector.Vector, q Query, vectorDepth, keywordDepth int, iterative bool) (vector, keyword []candidate, err error) {
	b := &pgx.Batch{}
	// JIT compilation costs hundreds of milliseconds and pays off only for
	// long analytical queries; a BM25 ranking over many candidates has a
	// cost estimate that would trigger it for nothing.
	b.Queue("SET LOCAL jit = off")
	if vectorDepth > 0 {
		b.Queue(fmt.Sprintf("SET LOCAL hnsw.ef_search = %d", min(maxEfSearch, max(minEfSearch, 2*vectorDepth))))
		if iterative {
			// relaxed_order lets the index scan continue past ef_search
			// until enough rows pass the conversation filter; results may
			// come slightly out of order and are sorted below.
			b.Queue("SET LOCAL hnsw.iterative_scan = relaxed_order")
		}
		b.Queue(vectorSQL(m), qv, q.ConversationID, vectorDepth)
	}
	if keywordDepth > 0 {
		b.Queue(fmt.Sprintf(keywordSQL, vectorExpr(m.dims), vectorType(m.dims), modelLiteral(m.name)),
			q.Text, q.ConversationID, qv, bm25K1, bm25B, keywordDepth)
	}
	br := tx.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = dbError("docs: search", cerr)
		}
	}()
	if _, err := br.Exec(); err != nil {
		return nil, nil, dbError("docs: search", err)
	}
	if vectorDepth > 0 {
		settings := 1
		if iterative {
			settings++
		}
		for range settings {
			if _, err := br.Exec(); err != nil {
				return nil, nil, dbError("docs: search", err)
			}
		}
		rows, err := br.Query()
		if vector, err = collectCandidates(rows, err, false); err != nil {
			return nil, nil, err
		}
	}
	if keywordDepth > 0 {
		rows, err := br.Query()
		if keyword, err = collectCandidates(rows, err, true); err != nil {
			return nil, nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, dbError("docs: search", err)
	}
	if vectorDepth > 0 && !iterative && len(vector) < vectorDepth {
		// Without iterative scans the index yields at most ef_search rows
		// before the conversation filter; a short answer may be the
		// filter's doing, so rank the conversation's chunks exactly.
		rows, err := tx.Query(ctx, exactVectorSQL(m), qv, q.ConversationID, vectorDepth)
		if vector, err = collectCandidates(rows, err, false); err != nil {
			return nil, nil, err
		}
	}
	slices.SortStableFunc(vector, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.similarity, a.similarity), strings.Compare(a.id, b.id))
	})
	return vector, keyword, nil
}

// vectorSQL selects a conversation's chunks of model m by cosine distance to
// $1, with $2 the conversation and $3 the limit. The ORDER BY expression and
// the WHERE predicate repeat the index's definition (see EnsureModelIndex) so
// that the planner can use it.
func vectorSQL(m modelSpec) string {
	return fmt.Sprintf(`
		SELECT id::text, 1 - (%[1]s <=> $1::vector::%[2]s)
		FROM chunks
		WHERE embedding_model = %[3]s AND conversation_id = $2
		ORDER BY %[1]s <=> $1::vector::%[2]s
		LIMIT $3`, vectorExpr(m.dims), vectorType(m.dims), modelLiteral(m.name))
}

// exactVectorSQL is vectorSQL computed over every chunk of the conversation:
// the distances are materialised before they are ordered, so the HNSW index
// cannot serve the ORDER BY.
func exactVectorSQL(m modelSpec) string {
	return fmt.Sprintf(`
		WITH d AS MATERIALIZED (
			SELECT id, %[1]s <=> $1::vector::%[2]s AS distance
			FROM chunks
			WHERE embedding_model = %[3]s AND conversation_id = $2
		)
		SELECT id::text, 1 - distance FROM d ORDER BY distance LIMIT $3`,
		vectorExpr(m.dims), vectorType(m.dims), modelLiteral(m.name))
}

// collectCandidates reads rows of (id, similarity), or with keyword set
// (id, similarity, BM25 score).
func collectCandidates(rows pgx.Rows, err error, keyword bool) ([]candidate, error) {
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (candidate, error) {
		c := candidate{keyword: keyword}
		var sim *float64
		dest := []any{&c.id, &sim}
		if keyword {
			dest = append(dest, &c.score)
		}
		if err := r.Scan(dest...); err != nil {
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

// keywordSQL ranks a conversation's chunks by Okapi BM25. The query's words
// are normalised by to_tsvector('english'), like the chunks' tsv; their OR
// finds candidates through the GIN index; term frequencies come from the
// positions in each candidate's tsv (stored tsvectors carry weight D
// throughout, so setweight marks the query's lexemes and ts_filter keeps only
// them), document frequencies and the average length from term_stats and
// conversation_stats. IDF is
// ln(1 + (N - df + 0.5) / (df + 0.5)), which is never negative.
//
// %[1]s is the vector expression, %[2]s its type, %[3]s the model literal.
const keywordSQL = `
	WITH q AS (
		SELECT lexeme FROM unnest(to_tsvector('english', $1::text))
	), tq AS (
		-- Quote each lexeme for tsquery input: backslashes and quotes doubled.
		SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery AS query,
		       array_agg(lexeme) AS lexemes
		FROM q
	), st AS (
		SELECT chunk_count::float8 AS n,
		       greatest(total_tokens::float8 / greatest(chunk_count, 1), 1) AS avgdl
		FROM conversation_stats WHERE conversation_id = $2
	), idf AS MATERIALIZED (
		-- Materialised: computed once, not once per candidate.
		SELECT t.term, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf
		FROM term_stats t CROSS JOIN st
		WHERE t.conversation_id = $2 AND t.term IN (SELECT lexeme FROM q)
	), ranked AS (
		SELECT c.id,
		       sum(idf.idf * cardinality(u.positions) * ($4::float8 + 1)
		           / (cardinality(u.positions) + $4::float8 * (1 - $5::float8 + $5::float8 * c.token_count / st.avgdl))) AS score
		FROM chunks c CROSS JOIN tq CROSS JOIN st
		-- Only the query's lexemes: weighted A, then filtered, which is
		-- far cheaper than expanding the whole tsv.
		CROSS JOIN LATERAL unnest(ts_filter(setweight(c.tsv, 'A', tq.lexemes), '{a}')) u
		JOIN idf ON idf.term = u.lexeme
		WHERE c.conversation_id = $2 AND c.embedding_model = %[3]s AND c.tsv @@ tq.query
		GROUP BY c.id
		ORDER BY score DESC, c.id
		LIMIT $6
	)
	SELECT r.id::text, 1 - (%[1]s <=> $3::vector::%[2]s), r.score
	FROM ranked r JOIN chunks c ON c.id = r.id
	ORDER BY r.score DESC, r.id`

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
				f = &candidate{id: c.id, similarity: c.similarity}
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

// details fetches the content and file of ranked chunks, keeping their order.
func details(ctx context.Context, tx pgx.Tx, ranked []candidate) ([]Hit, error) {
	if len(ranked) == 0 {
		return []Hit{}, nil
	}
	ids := make([]string, len(ranked))
	for i, c := range ranked {
		ids[i] = c.id
	}
	rows, err := tx.Query(ctx, `
		SELECT c.id::text, c.file_id::text, f.file_name, c.content, c.page_number, c.char_start, c.char_end
		FROM chunks c JOIN files f ON f.id = c.file_id
		WHERE c.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Hit, error) {
		var h Hit
		err := r.Scan(&h.ChunkID, &h.FileID, &h.FileName, &h.Content, &h.PageNumber, &h.CharStart, &h.CharEnd)
		return h, err
	})
	if err != nil {
		return nil, dbError("docs: search", err)
	}
	byID := make(map[string]Hit, len(found))
	for _, h := range found {
		byID[h.ChunkID] = h
	}
	hits := make([]Hit, 0, len(ranked))
	for _, c := range ranked {
		h, ok := byID[c.id]
		if !ok {
			continue
		}
		h.Similarity = c.similarity
		h.Score = c.score
		hits = append(hits, h)
	}
	return hits, nil
}
