package docs

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/docs/keyword"
)

// Keyword ranking runs in the process, over an inverted index per
// conversation (package keyword), built from the keyword postings each ready
// file carries (files.keyword_postings, written in the transaction that
// stores its chunks).
//
// PostgreSQL stays the source of truth. Every change to a conversation's
// chunks gives it a new generation, in the write's transaction, from a
// sequence: a file made ready (or moved to another model) is stamped with
// it (files.ready_gen), a ready file deleted is logged with it
// (keyword_removals). A search reads the generation with the conversation's
// other counters; an index behind it reads what changed since its own, and
// only that: the files made ready and the files removed since. A file is
// thus searchable on every replica as soon as its transaction commits, at a
// cost that grows with the change, not with the conversation.
//
// An index is rebuilt from every file when it is of an earlier incarnation
// of the conversation (deleted and filled again: a new epoch), when the
// removals it would need were pruned, or when removed files hold more of it
// than live ones. Files stored before postings existed are read from their
// chunks' tsvectors instead, and the postings written back, so that the next
// build is fast; FillKeywordPostings does it for every file at once.

// keywordRanking ranks the conversation's chunks of model for terms, up to
// depth, bringing this process's index of it up to date first; with src,
// the chunks of its files only.
func (s *Store) keywordRanking(ctx context.Context, conv string, st convState, terms []keyword.Term, model string, depth int, src *sourceFiles) ([]candidate, error) {
	ix := s.keywords.Get(conv)
	if ix == nil || ix.Epoch() != st.epoch || ix.Generation() < st.removalFloor || ix.Stale() {
		ix = keyword.New(st.epoch)
	}
	err := ix.Refresh(st.generation, func(have int64) (keyword.Changes, error) {
		return s.readChanges(ctx, conv, have)
	})
	if err != nil {
		return nil, fmt.Errorf("docs: keyword index of %q: %w", conv, err)
	}
	// An index the cache does not keep serves this search only.
	s.keywords.Put(conv, ix)
	params := keyword.Params{K1: s.opts.BM25K1, B: s.opts.BM25B}
	var hits []keyword.Hit
	if src != nil {
		hits = ix.SearchFiles(terms, model, depth, params, src.files)
	} else {
		hits = ix.Search(terms, model, depth, params)
	}
	out := make([]candidate, len(hits))
	for i, h := range hits {
		out[i] = candidate{id: h.ID.String(), fileID: h.File.String(), score: h.Score, keyword: true}
	}
	return out, nil
}

// readChanges reads, in one snapshot, the conversation's generation, the
// ready files made ready or moved after generation have (every ready file
// for a new index, have -1) with their postings, and the files removed
// after it.
func (s *Store) readChanges(ctx context.Context, conv string, have int64) (keyword.Changes, error) {
	var ch keyword.Changes
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return ch, dbError("docs: keyword index", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	b := &pgx.Batch{}
	b.Queue(`SELECT coalesce((SELECT generation FROM conversation_stats WHERE conversation_id = $1), -1)`, conv)
	b.Queue(`
		SELECT f.id, f.embedding_model, f.keyword_postings FROM files f
		WHERE f.conversation_id = $1 AND f.status = 'ready' AND f.ready_gen > $2 AND `+visible+`
		ORDER BY f.id`, conv, have)
	b.Queue(`SELECT file_id FROM keyword_removals WHERE conversation_id = $1 AND generation > $2`, conv, max(have, 0))
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if err := br.QueryRow().Scan(&ch.Generation); err != nil {
		return ch, dbError("docs: keyword index", err)
	}
	rows, err := br.Query()
	if err != nil {
		return ch, dbError("docs: keyword index", err)
	}
	var legacy []uuid.UUID
	var f keyword.File
	var postings []byte
	for rows.Next() {
		if err := rows.Scan(&f.ID, &f.Model, &postings); err != nil {
			rows.Close()
			return ch, dbError("docs: keyword index", err)
		}
		f.Postings = postings
		if postings != nil {
			if err := keyword.Check(postings); err == nil {
				ch.Added = append(ch.Added, f)
				continue
			}
			// Postings of another format, as a newer build may write:
			// the chunks say the same.
			s.log.Warn("docs: keyword postings unreadable; reading the file's chunks instead", "file_id", f.ID, "error", err)
		}
		f.Postings = nil
		ch.Added = append(ch.Added, f)
		legacy = append(legacy, f.ID)
	}
	if err := rows.Err(); err != nil {
		return ch, dbError("docs: keyword index", err)
	}
	if have >= 0 {
		rows, err := br.Query()
		if err != nil {
			return ch, dbError("docs: keyword index", err)
		}
		if ch.Removed, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID]); err != nil {
			return ch, dbError("docs: keyword index", err)
		}
	}
	if err := br.Close(); err != nil {
		return ch, dbError("docs: keyword index", err)
	}
	if len(legacy) == 0 {
		return ch, nil
	}
	// In the same snapshot: the chunks of a ready file do not change.
	built, err := buildPostings(ctx, tx, conv, legacy)
	if err != nil {
		return ch, err
	}
	for i := range ch.Added {
		if p, ok := built[ch.Added[i].ID]; ok {
			ch.Added[i].Postings = p
		}
	}
	// Written back so that the next build reads them; not needed for this
	// search, whose index is being built: a failure only leaves the next
	// build as slow as this one.
	if _, err := savePostings(ctx, s.pool, conv, built); err != nil {
		s.log.Warn("docs: keyword postings not written back", "conversation_id", conv, "files", len(built), "error", err)
	}
	return ch, nil
}

// fillBatch is the number of files FillKeywordPostings reads at a time.
const fillBatch = 50

// FillKeywordPostings writes the keyword postings of every ready file that
// has none (files stored before migration 008), and returns how many it
// wrote. Searches write them too, for the files of the conversation
// searched; this does every file at once, as after an upgrade, so that no
// search pays for it. It may run while other processes serve and ingest;
// mcpsearch migrate runs it.
func FillKeywordPostings(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var afterConv string
	var after uuid.UUID
	total := 0
	for {
		// Every shard on a distributed database: an upgrade's one pass.
		rows, err := pool.Query(ctx, `
			SELECT conversation_id, id FROM files
			WHERE status = 'ready' AND keyword_postings IS NULL AND (conversation_id, id) > ($1, $2)
			ORDER BY conversation_id, id LIMIT $3`, afterConv, after, fillBatch)
		if err != nil {
			return total, dbError("docs: fill keyword postings", err)
		}
		var convs []string
		var ids []uuid.UUID
		var c string
		var id uuid.UUID
		if _, err := pgx.ForEachRow(rows, []any{&c, &id}, func() error {
			convs, ids = append(convs, c), append(ids, id)
			return nil
		}); err != nil {
			return total, dbError("docs: fill keyword postings", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		for c, ids := range byConversation(convs, ids) {
			built, err := buildPostings(ctx, pool, c, ids)
			if err != nil {
				return total, err
			}
			n, err := savePostings(ctx, pool, c, built)
			total += n
			if err != nil {
				return total, err
			}
		}
		afterConv, after = convs[len(convs)-1], ids[len(ids)-1]
	}
}
