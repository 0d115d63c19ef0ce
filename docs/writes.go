package docs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgvector/pgvector-go"

	"github.com/mcpsearch/mcpsearch/docs/chunk"
	"github.com/mcpsearch/mcpsearch/docs/keyword"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/pg"
)

// Every statement that writes files, their chunks, their stored bytes and
// the per-conversation counters those writes change is in this file.
//
// The counters (migration 009) are what searches, listings and the index
// policy read instead of summing over a conversation's files:
//
//   - conversation_stats, one row per conversation holding files: its
//     files by status, its ready chunks, its last upload, and its
//     generation, which every change to its chunks replaces (keyword
//     indexes compare it with their own);
//   - conversation_models, per conversation and embedding model: its
//     chunks, and how many of them the model's vector index covers.
//
// A write changes files first and the counters last: it locks the
// statistics rows of the conversations it touches just before it commits,
// never while files are read, extracted or embedded, and a batch of files
// is one write.
//
// Deleting a conversation locks its statistics row, takes a number from
// chunk_write_seq, its floor, records it in conversation_purges and removes
// the row; its rows are purged in the background (see purge.go). Every file
// takes a number from the same sequence when it is uploaded (upload_seq),
// every write of chunks one too (write_seq). A write reads the floors of
// its conversations after it has locked their rows, so every deletion that
// committed before is seen and none can commit until it does: a file it
// holds uploaded at or below a floor belongs to the deleted conversation,
// and the write takes that file's chunks back out and counts it nowhere.
// So the files and chunks numbered up to a floor are the deleted
// conversation's, the others the conversation's again.

// visible is the condition, on a row of files aliased f, under which the
// file is its conversation's: not uploaded before the conversation was
// deleted.
const visible = `NOT EXISTS (SELECT FROM conversation_purges p
	WHERE p.conversation_id = f.conversation_id AND f.upload_seq <= p.floor)`

// reclaimable returns the condition, on a row of files aliased f of the
// conversation the parameter conv names, under which an upload of the same
// bytes processes the file again rather than being its duplicate: it
// failed, or it is processing without a live claim and without stored
// bytes, as a synchronous Ingest of an older version left a file when its
// process stopped. The subquery names the conversation itself: Citus does
// not carry f's conversation into a subquery under OR, and would ask every
// shard.
func reclaimable(conv string) string {
	return `(f.status = 'failed' OR (f.status = 'processing'
	AND (f.claimed_until IS NULL OR f.claimed_until < now())
	AND NOT EXISTS (SELECT 1 FROM file_bytes b WHERE b.conversation_id = ` + conv + ` AND b.file_id = f.id)))`
}

// fileColumns is the select list scanFile reads, on files aliased f.
const fileColumns = `f.id::text, f.conversation_id, f.file_name, f.mime_type, f.sha256, f.status, f.error,
	f.embedding_model, f.size_bytes, f.chunk_count, f.page_count, f.source_url, f.note, f.created_at, f.updated_at,
	coalesce(f.job_id::text, '')`

// scanFile reads a row of fileColumns followed by the extra columns, if
// any, into extra.
func scanFile(row pgx.Row, extra ...any) (File, error) {
	var f File
	dest := []any{&f.ID, &f.ConversationID, &f.FileName, &f.MIMEType, &f.SHA256, &f.Status, &f.Error,
		&f.EmbeddingModel, &f.SizeBytes, &f.ChunkCount, &f.PageCount, &f.Source, &f.Note, &f.CreatedAt, &f.UpdatedAt, &f.JobID}
	err := row.Scan(append(dest, extra...)...)
	return f, err
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// nextWrite takes a number from chunk_write_seq.
func nextWrite(ctx context.Context, q querier) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT nextval('chunk_write_seq')`).Scan(&n); err != nil {
		return 0, dbError("docs: write number", err)
	}
	return n, nil
}

// ---- counters ----

// delta is what one write changes in a conversation's counters.
type delta struct {
	chunks, ready, processing, failed int64
	// uploads counts the files the write received: last_upload_at moves.
	uploads int64
	// models holds the change of chunks per embedding model, and covered
	// the change of those the model's vector index covers.
	models, covered map[string]int64
	// removed lists the ready files the write took out of the
	// conversation, for keyword indexes to take out too.
	removed []uuid.UUID
	// moved is set when files changed model without changing the
	// conversation's chunks.
	moved bool
}

func (d *delta) addChunks(model string, n, covered int64) {
	if d.models == nil {
		d.models, d.covered = map[string]int64{}, map[string]int64{}
	}
	d.chunks += n
	d.models[model] += n
	d.covered[model] += covered
}

// move counts one file leaving status from ("" for none) for status to (""
// for none).
func (d *delta) move(from, to string) {
	for _, c := range []struct {
		status string
		n      int64
	}{{from, -1}, {to, 1}} {
		switch c.status {
		case StatusReady:
			d.ready += c.n
		case StatusProcessing:
			d.processing += c.n
		case StatusFailed:
			d.failed += c.n
		}
	}
}

// keywordChange reports whether the conversation's keyword indexes must
// change: a new generation.
func (d *delta) keywordChange() bool {
	return d.chunks != 0 || len(d.removed) > 0 || d.moved
}

// deltas are a write's changes by conversation.
type deltas map[string]*delta

func (ds deltas) of(conversationID string) *delta {
	d, ok := ds[conversationID]
	if !ok {
		d = &delta{}
		ds[conversationID] = d
	}
	return d
}

// Each statement below names one conversation (conversation_id = $1): on
// a distributed database (Citus) a conversation's rows are on one node,
// and such a statement goes to that node alone. A write of several
// conversations sends one batch per conversation.

// lockConversations takes the locks of the statistics rows of convs in id
// order, creating the rows that do not exist (for a new conversation, or
// the new incarnation of a deleted one), and returns each conversation's
// floor: the highest deletion floor still being purged, 0 for none. It
// waits for a deletion in progress, and no deletion of these conversations
// can commit before the write does.
func lockConversations(ctx context.Context, tx pgx.Tx, convs []string) (map[string]int64, error) {
	convs = slices.Clone(convs)
	slices.Sort(convs)
	convs = slices.Compact(convs)
	floors := make(map[string]int64, len(convs))
	for _, c := range convs {
		floor, err := lockConversation(ctx, tx, c)
		if err != nil {
			return nil, err
		}
		floors[c] = floor
	}
	return floors, nil
}

// lockConversation locks the statistics row of conv, as lockConversations
// says, and returns its floor.
func lockConversation(ctx context.Context, tx pgx.Tx, conv string) (int64, error) {
	for range 5 {
		var locked bool
		err := tx.QueryRow(ctx, `SELECT true FROM conversation_stats WHERE conversation_id = $1 FOR UPDATE`, conv).Scan(&locked)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, dbError("docs: lock conversation", err)
		}
		if !locked {
			// A new row starts a new generation and epoch, taken from the
			// sequence here (on a distributed database the coordinator's
			// numbers, which grow in commit order); its floor tells
			// searches which chunks a deleted incarnation left.
			var gen, floor int64
			b := &pgx.Batch{}
			b.Queue(`SELECT nextval('conversation_generation_seq')`).QueryRow(func(r pgx.Row) error { return r.Scan(&gen) })
			b.Queue(`SELECT floor FROM conversation_purges WHERE conversation_id = $1`, conv).QueryRow(func(r pgx.Row) error {
				if err := r.Scan(&floor); err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				return nil
			})
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return 0, dbError("docs: lock conversation", err)
			}
			tag, err := tx.Exec(ctx, `
				INSERT INTO conversation_stats (conversation_id, chunk_count, generation, epoch, write_floor)
				VALUES ($1, 0, $2, $2, $3)
				ON CONFLICT (conversation_id) DO NOTHING`, conv, gen, floor)
			if err != nil {
				return 0, dbError("docs: lock conversation", err)
			}
			if tag.RowsAffected() == 0 {
				// Another write created it meanwhile: lock that one.
				continue
			}
			// get_chunk finds the conversation of an id through its key.
			if _, err := tx.Exec(ctx, `
				INSERT INTO conversation_keys (key, conversation_id) VALUES (conversation_key($1), $1)
				ON CONFLICT DO NOTHING`, conv); err != nil {
				return 0, dbError("docs: lock conversation", err)
			}
			// The row inserted is this transaction's: locked.
		}
		// Read after the lock, in a new snapshot: every deletion that
		// committed before it is seen.
		var floor int64
		err = tx.QueryRow(ctx, `SELECT floor FROM conversation_purges WHERE conversation_id = $1`, conv).Scan(&floor)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, dbError("docs: lock conversation", err)
		}
		return floor, nil
	}
	return 0, fmt.Errorf("docs: lock conversation %s: %w: it kept being deleted, try again", conv, ErrBusy)
}

// applyDeltas writes ds to the counters of the conversations the caller
// has locked (with lockConversations), and returns the new generation of
// each conversation whose keyword index must change. A conversation left
// without files loses its rows.
func applyDeltas(ctx context.Context, tx pgx.Tx, ds deltas) (map[string]int64, error) {
	convs := make([]string, 0, len(ds))
	for c := range ds {
		convs = append(convs, c)
	}
	slices.Sort(convs)
	gens := make(map[string]int64, len(convs))
	for _, c := range convs {
		gen, bumped, err := applyDelta(ctx, tx, c, ds[c])
		if err != nil {
			return nil, err
		}
		if bumped {
			gens[c] = gen
		}
	}
	return gens, nil
}

// applyDelta writes d to the counters of conv, in one batch, and returns
// its generation and whether it is a new one.
func applyDelta(ctx context.Context, tx pgx.Tx, conv string, d *delta) (int64, bool, error) {
	bump := d.keywordChange()
	var gen int64
	var empty bool
	// A new generation comes from a subquery: on a distributed database
	// the coordinator takes it (a volatile function cannot run in an
	// UPDATE there), and numbers keep growing in commit order, as the
	// caller holds the row's lock.
	err := tx.QueryRow(ctx, `
		UPDATE conversation_stats s
		SET chunk_count = s.chunk_count + $2,
		    ready_files = s.ready_files + $3,
		    processing_files = s.processing_files + $4,
		    failed_files = s.failed_files + $5,
		    last_upload_at = CASE WHEN $6::bigint > 0 THEN now() ELSE s.last_upload_at END,
		    generation = CASE WHEN $7::bool THEN (SELECT nextval('conversation_generation_seq')) ELSE s.generation END
		WHERE s.conversation_id = $1
		RETURNING s.generation, s.ready_files + s.processing_files + s.failed_files <= 0`,
		conv, d.chunks, d.ready, d.processing, d.failed, d.uploads, bump).Scan(&gen, &empty)
	if err != nil {
		return 0, false, dbError("docs: update statistics", err)
	}
	b := &pgx.Batch{}
	if len(d.models) > 0 {
		models := make([]string, 0, len(d.models))
		for m := range d.models {
			models = append(models, m)
		}
		slices.Sort(models)
		// Writers of one conversation hold its statistics row's lock, so
		// its models' rows are written by one at a time.
		for _, m := range models {
			k, cv := d.models[m], d.covered[m]
			b.Queue(`
				INSERT INTO conversation_models AS m (conversation_id, embedding_model, chunks, covered)
				VALUES ($1, $2, $3::bigint, least(greatest($4::bigint, 0), $3::bigint))
				ON CONFLICT (conversation_id, embedding_model) DO UPDATE
				SET chunks = m.chunks + $3::bigint,
				    covered = least(greatest(m.covered + $4::bigint, 0), m.chunks + $3::bigint),
				    last_write_at = CASE WHEN $3::bigint > 0 THEN excluded.last_write_at ELSE m.last_write_at END`,
				conv, m, k, cv)
		}
		b.Queue(`DELETE FROM conversation_models WHERE conversation_id = $1 AND chunks <= 0`, conv)
	}
	if len(d.removed) > 0 && !empty {
		b.Queue(`
			INSERT INTO keyword_removals (conversation_id, generation, file_id)
			SELECT $1::text, $2::bigint, f FROM unnest($3::uuid[]) AS f
			ON CONFLICT DO NOTHING`, conv, gen, d.removed)
		// Removals older than a day are pruned; a keyword index older
		// than the generation of the last one pruned is rebuilt.
		b.Queue(`
			WITH pruned AS (
				DELETE FROM keyword_removals
				WHERE conversation_id = $1 AND removed_at < now() - interval '1 day'
				RETURNING generation)
			UPDATE conversation_stats s SET removal_floor = greatest(s.removal_floor, p.g + 1)
			FROM (SELECT max(generation) AS g FROM pruned) p
			WHERE s.conversation_id = $1 AND p.g IS NOT NULL`, conv)
	}
	if empty {
		b.Queue(`DELETE FROM conversation_models WHERE conversation_id = $1`, conv)
		b.Queue(`DELETE FROM keyword_removals WHERE conversation_id = $1`, conv)
		b.Queue(`DELETE FROM conversation_stats WHERE conversation_id = $1`, conv)
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return 0, false, dbError("docs: update statistics", err)
		}
	}
	return gen, bump, nil
}

// ---- recording files ----

// newFile is a file a write records, or records again over a failed one of
// the same bytes.
type newFile struct {
	up     upload
	status string
	// For a ready or failed file:
	reason string
	note   string
	chunks int
	pages  int
	model  string
	text   string
	// claim, for a processing file a worker will take.
	claim *claim
}

// recorded is what recordFiles made of a newFile.
type recorded struct {
	file File
	// from is the status of the file it replaced: "" for a new one.
	from string
	// existing is set when the bytes are already in the conversation, in
	// file, and nothing was recorded.
	existing bool
}

// recordFiles inserts files, or records them over failed files of the same
// bytes, numbered seq for their upload (and their chunks, for a ready
// one). A file the conversation already holds, ready or being processed,
// is returned as existing. The caller has none of the same conversation
// and bytes twice.
func recordFiles(ctx context.Context, tx pgx.Tx, files []newFile, seq int64) ([]recorded, error) {
	out := make([]recorded, len(files))
	byConv := map[string][]int{}
	var convs []string
	for i, nf := range files {
		c := nf.up.conversationID
		if _, ok := byConv[c]; !ok {
			convs = append(convs, c)
		}
		byConv[c] = append(byConv[c], i)
	}
	slices.Sort(convs)
	for _, c := range convs {
		at := byConv[c]
		part := make([]newFile, len(at))
		for k, i := range at {
			part[k] = files[i]
		}
		recs, err := recordConversationFiles(ctx, tx, c, part, seq)
		if err != nil {
			return nil, err
		}
		for k, i := range at {
			out[i] = recs[k]
		}
	}
	return out, nil
}

// recordConversationFiles is recordFiles for the files of one
// conversation, in one batch.
func recordConversationFiles(ctx context.Context, tx pgx.Tx, conv string, files []newFile, seq int64) ([]recorded, error) {
	n := len(files)
	var ids []uuid.UUID
	var names, mimes, shas, sources, statuses, reasons, notes, models []string
	var texts []*string
	var sizes []int64
	var chunks, pages []int32
	var tokens, jobs []*string
	var leases []float64
	for _, nf := range files {
		ids = append(ids, newID(conv))
		var job *string
		if nf.up.jobID != "" {
			job = &nf.up.jobID
		}
		jobs = append(jobs, job)
		names, mimes, shas = append(names, nf.up.fileName), append(mimes, nf.up.mimeType), append(shas, nf.up.sha256)
		sources, statuses, reasons, models = append(sources, nf.up.source), append(statuses, nf.status), append(reasons, nf.reason), append(models, nf.model)
		notes = append(notes, nf.note)
		sizes, chunks, pages = append(sizes, nf.up.size), append(chunks, int32(nf.chunks)), append(pages, int32(nf.pages))
		var text *string
		if nf.status == StatusReady {
			text = &nf.text
		}
		texts = append(texts, text)
		var token *string
		var lease float64
		if nf.claim != nil {
			token, lease = &nf.claim.token, nf.claim.lease.Seconds()
		}
		tokens, leases = append(tokens, token), append(leases, lease)
	}
	b := &pgx.Batch{}
	// Files of a deleted conversation holding the same bytes would stand
	// in the way; they are being purged anyway.
	b.Queue(`
		DELETE FROM files f USING conversation_purges p
		WHERE f.conversation_id = $1::text AND f.sha256 = ANY($2::text[])
		  AND p.conversation_id = $1::text AND f.upload_seq <= p.floor`, conv, shas)
	// The statuses of the files of the same bytes, locked, and which of
	// them the uploads replace.
	b.Queue(`
		SELECT f.conversation_id, f.sha256, f.status FROM files f
		WHERE f.conversation_id = $1::text AND f.sha256 = ANY($2::text[])
		ORDER BY f.id FOR UPDATE OF f`, conv, shas)
	b.Queue(`
		SELECT f.sha256, f.id FROM files f
		WHERE f.conversation_id = $1::text AND f.sha256 = ANY($2::text[]) AND `+reclaimable("$1::text"), conv, shas)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, dbError("docs: record files", err)
	}
	type key struct{ conv, sha string }
	before := map[key]string{}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, dbError("docs: record files", err)
	}
	var k key
	var status string
	if _, err := pgx.ForEachRow(rows, []any{&k.conv, &k.sha, &status}, func() error { before[k] = status; return nil }); err != nil {
		br.Close()
		return nil, dbError("docs: record files", err)
	}
	rows, err = br.Query()
	if err != nil {
		br.Close()
		return nil, dbError("docs: record files", err)
	}
	// A file replaced keeps its id: the row proposed for it carries it.
	replaced := map[string]uuid.UUID{}
	var sha string
	var id uuid.UUID
	if _, err := pgx.ForEachRow(rows, []any{&sha, &id}, func() error { replaced[sha] = id; return nil }); err != nil {
		br.Close()
		return nil, dbError("docs: record files", err)
	}
	for i, nf := range files {
		if id, ok := replaced[nf.up.sha256]; ok {
			ids[i] = id
		}
	}
	if err := br.Close(); err != nil {
		return nil, dbError("docs: record files", err)
	}
	// Those locked rows are replaced; a file of the same bytes another
	// write inserted meanwhile is the upload's, unless it failed. (The
	// condition compares ids rather than being reclaimable itself: a
	// distributed database takes neither a subquery nor a parameter in
	// ON CONFLICT.)
	rows, err = tx.Query(ctx, `
		INSERT INTO files AS f (id, conversation_id, file_name, mime_type, size_bytes, sha256, source_url, status, error, note,
			chunk_count, page_count, embedding_model, extracted_text, claimed_by, claimed_until, upload_seq, write_seq, job_id)
		SELECT id, $1::text, name, mime, size, sha, source, status, reason, note, chunks, pages, model, text, token::uuid,
		       CASE WHEN token IS NOT NULL THEN now() + make_interval(secs => lease) END,
		       $15::bigint, CASE WHEN status = 'ready' THEN $15::bigint ELSE 0 END, job
		FROM unnest($17::uuid[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[],
		            $9::int[], $10::int[], $11::text[], $12::text[], $13::text[], $14::float8[], $16::text[], $18::uuid[])
		     AS u(id, name, mime, size, sha, source, status, reason, chunks, pages, model, text, token, lease, note, job)
		ORDER BY sha
		ON CONFLICT (conversation_id, sha256) DO UPDATE
		SET file_name = excluded.file_name, mime_type = excluded.mime_type, size_bytes = excluded.size_bytes,
		    source_url = excluded.source_url, status = excluded.status, error = excluded.error, note = excluded.note,
		    chunk_count = excluded.chunk_count, page_count = excluded.page_count, embedding_model = excluded.embedding_model,
		    extracted_text = excluded.extracted_text, claimed_by = excluded.claimed_by, claimed_until = excluded.claimed_until,
		    upload_seq = excluded.upload_seq, write_seq = excluded.write_seq, attempts = 0, keyword_postings = NULL,
		    updated_at = excluded.updated_at, job_id = excluded.job_id
		WHERE f.status = 'failed' OR f.id = excluded.id
		RETURNING `+fileColumns,
		conv, names, mimes, sizes, shas, sources, statuses, reasons, chunks, pages, models, texts, tokens, leases, seq, notes, ids, jobs)
	if err != nil {
		return nil, dbError("docs: record files", err)
	}
	done, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (File, error) { return scanFile(r) })
	if err != nil {
		return nil, dbError("docs: record files", err)
	}
	out := make([]recorded, n)
	byKey := make(map[key]File, len(done))
	for _, f := range done {
		byKey[key{f.ConversationID, f.SHA256}] = f
	}
	var missing []int
	for i, nf := range files {
		k := key{nf.up.conversationID, nf.up.sha256}
		if f, ok := byKey[k]; ok {
			out[i] = recorded{file: f, from: before[k]}
		} else {
			missing = append(missing, i)
		}
	}
	for _, i := range missing {
		// Held by another file of the conversation, ready or in
		// progress: that file is the upload's.
		f, err := scanFile(tx.QueryRow(ctx, `SELECT `+fileColumns+` FROM files f
			WHERE f.conversation_id = $1::text AND f.sha256 = $2`, files[i].up.conversationID, files[i].up.sha256))
		if err != nil {
			return nil, dbError("docs: record files", err)
		}
		f.Duplicate = true
		out[i] = recorded{file: f, existing: true}
	}
	return out, nil
}

// duplicate returns the file of the conversation holding the upload's
// bytes, with Duplicate set, unless it is reclaimable; pgx.ErrNoRows when
// there is none.
func (s *Store) duplicate(ctx context.Context, q querier, up upload) (File, error) {
	f, err := scanFile(q.QueryRow(ctx, `SELECT `+fileColumns+` FROM files f
		WHERE f.conversation_id = $1 AND f.sha256 = $2 AND NOT `+reclaimable("$1")+` AND `+visible,
		up.conversationID, up.sha256))
	f.Duplicate = err == nil
	return f, err
}

// storedUpload is what storeUploads made of an upload: its file, whether
// it must be processed (not a duplicate), and its bytes when they were
// kept for a worker of this process.
type storedUpload struct {
	file  File
	fresh bool
	kept  []byte
}

// storeUploads records uploads as processing, for workers to take, together
// with their bytes, in one transaction: one durable write for the files of
// a request. A file whose bytes the conversation already holds is returned
// as a duplicate and stores nothing, as is a second upload of the same
// bytes in the batch. The bytes are read once, from the spool file or
// memory, on their way to the database, and checked against the digest
// validation took; a small upload's bytes are also returned, kept for a
// worker of this process.
func (s *Store) storeUploads(ctx context.Context, ups []upload) ([]storedUpload, error) {
	var err error
	for range 3 {
		var out []storedUpload
		out, err = s.storeUploadsOnce(ctx, ups)
		if !errors.Is(err, errDeletedMeanwhile) {
			return out, err
		}
		// A deletion of a conversation committed between the write's
		// number and its lock: the uploads belong to the conversation's
		// next incarnation, which a new write number gives them.
	}
	return nil, err
}

// errDeletedMeanwhile reports a write numbered before a deletion of its
// conversation that committed before the write locked it.
var errDeletedMeanwhile = fmt.Errorf("%w: the conversation was deleted meanwhile; upload the files again", ErrBusy)

// storeUploadsOnce is one attempt of storeUploads.
func (s *Store) storeUploadsOnce(ctx context.Context, ups []upload) ([]storedUpload, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, dbError("docs: record upload", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	seq, err := nextWrite(ctx, tx)
	if err != nil {
		return nil, err
	}
	out := make([]storedUpload, len(ups))
	type key struct{ conv, sha string }
	first := map[key]int{}
	var files []newFile
	var at []int
	for i, up := range ups {
		k := key{up.conversationID, up.sha256}
		if _, ok := first[k]; ok {
			continue
		}
		first[k] = i
		files, at = append(files, newFile{up: up, status: StatusProcessing}), append(at, i)
	}
	recs, err := recordFiles(ctx, tx, files, seq)
	if err != nil {
		return nil, err
	}
	ds := deltas{}
	var convs, ids []string
	var fresh []int
	for j, rec := range recs {
		i := at[j]
		out[i].file = rec.file
		if rec.existing {
			continue
		}
		fresh, ids = append(fresh, i), append(ids, rec.file.ID)
		d := ds.of(ups[i].conversationID)
		d.uploads++
		d.move(rec.from, StatusProcessing)
		convs = append(convs, ups[i].conversationID)
	}
	if len(fresh) > 0 {
		// Bytes a failed file of the same digest left, if any.
		if err := deleteBytes(ctx, tx, convs, ids); err != nil {
			return nil, dbError("docs: store upload", err)
		}
		batch := make([]upload, len(fresh))
		for k, i := range fresh {
			batch[k] = ups[i]
		}
		kept, err := copyBytes(ctx, tx, ids, batch)
		if err != nil {
			return nil, err
		}
		for k, i := range fresh {
			out[i].fresh, out[i].kept = true, kept[k]
		}
	}
	for i, up := range ups {
		if j := first[key{up.conversationID, up.sha256}]; j != i {
			out[i].file = out[j].file
			out[i].file.Duplicate = true
		}
	}
	if len(convs) > 0 {
		floors, err := lockConversations(ctx, tx, convs)
		if err != nil {
			return nil, err
		}
		for _, c := range convs {
			if seq <= floors[c] {
				return nil, fmt.Errorf("docs: upload to %s: %w", c, errDeletedMeanwhile)
			}
		}
		if _, err := applyDeltas(ctx, tx, ds); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, dbError("docs: store upload", err)
	}
	return out, nil
}

// deleteBytes deletes the stored bytes of files ids[i] of conversations
// convs[i], one statement per conversation.
func deleteBytes(ctx context.Context, tx pgx.Tx, convs, ids []string) error {
	b := &pgx.Batch{}
	for c, ids := range byConversation(convs, ids) {
		b.Queue(`DELETE FROM file_bytes WHERE conversation_id = $1 AND file_id = ANY($2::uuid[])`, c, ids)
	}
	return tx.SendBatch(ctx, b).Close()
}

// byConversation groups vals[i] by convs[i].
func byConversation[T any](convs []string, vals []T) map[string][]T {
	m := map[string][]T{}
	for i, c := range convs {
		m[c] = append(m[c], vals[i])
	}
	return m
}

// keepBytes is the largest upload whose bytes storeUploads keeps for a
// worker of the same process, which then does not read them back.
const keepBytes = 1 << 20

// copyBytes streams uploads' bytes into file_bytes in pieces, in one COPY,
// file ids[i] holding ups[i]'s, hashing each file as it goes, and returns
// each upload's bytes when they are at most keepBytes.
func copyBytes(ctx context.Context, tx pgx.Tx, ids []string, ups []upload) ([][]byte, error) {
	kept := make([][]byte, len(ups))
	buf := make([]byte, pieceBytes)
	// The upload being read: its reader, digest, piece number and total.
	cur := -1
	var r io.Reader
	var closeCur func()
	h := sha256.New()
	var seq int
	var total int64
	var readErr error
	finish := func() error {
		if closeCur != nil {
			closeCur()
			closeCur = nil
		}
		up := ups[cur]
		if total != up.size || hex.EncodeToString(h.Sum(nil)) != up.sha256 {
			return fmt.Errorf("docs: %w: upload %s changed while it was stored", ErrInvalidArgument, up.fileName)
		}
		return nil
	}
	open := func() error {
		cur++
		h.Reset()
		seq, total = 0, 0
		rd, done, err := ups[cur].open()
		if err != nil {
			return err
		}
		r, closeCur = io.TeeReader(rd, h), done
		if ups[cur].size <= keepBytes {
			kept[cur] = make([]byte, 0, ups[cur].size)
		}
		return nil
	}
	defer func() {
		if closeCur != nil {
			closeCur()
		}
	}()
	// CopyFrom encodes each row before asking for the next, so one buffer
	// serves every piece.
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"file_bytes"}, []string{"conversation_id", "file_id", "seq", "data"},
		pgx.CopyFromFunc(func() ([]any, error) {
			for {
				if cur < 0 {
					if readErr = open(); readErr != nil {
						return nil, readErr
					}
				}
				n, err := io.ReadFull(r, buf)
				if n > 0 {
					if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
						readErr = err
						return nil, err
					}
					seq++
					total += int64(n)
					if kept[cur] != nil && total <= keepBytes {
						kept[cur] = append(kept[cur], buf[:n]...)
					}
					return []any{ups[cur].conversationID, ids[cur], seq - 1, buf[:n]}, nil
				}
				if !errors.Is(err, io.EOF) {
					readErr = err
					return nil, err
				}
				// This upload is done: check it, then go on to the next.
				if readErr = finish(); readErr != nil {
					return nil, readErr
				}
				if cur == len(ups)-1 {
					return nil, nil
				}
				if readErr = open(); readErr != nil {
					return nil, readErr
				}
			}
		}))
	if readErr != nil {
		if errors.Is(readErr, ErrInvalidArgument) {
			return nil, readErr
		}
		return nil, fmt.Errorf("docs: read upload %s: %w", ups[cur].fileName, readErr)
	}
	if err != nil {
		return nil, dbError("docs: store upload", err)
	}
	return kept, nil
}

// ---- committing processed files ----

// commitItem is a processed file on its way to the database, and then the
// outcome of its commit.
type commitItem struct {
	// For a file processed synchronously, nothing is recorded yet: up is
	// the upload. For a file a worker claimed, f and c are the file and
	// the claim.
	up *upload
	f  File
	c  claim
	// The result: ready with doc, chunks, vecs embedded by model; or
	// failed with reason.
	failed bool
	reason string
	// cause is the error behind a failure found while processing.
	cause  error
	doc    *extract.Document
	chunks []chunk.Chunk
	vecs   [][]float32
	model  string
	// dupOf is another item of the same batch with the same conversation
	// and bytes, whose file this one is.
	dupOf *commitItem

	// Set by the commit.
	out File
	err error
}

func (it *commitItem) conversationID() string {
	if it.up != nil {
		return it.up.conversationID
	}
	return it.f.ConversationID
}

func (it *commitItem) pages() int {
	if it.failed {
		return 0
	}
	n := 0
	for _, p := range it.doc.Pages {
		if p.Number > 0 {
			n++
		}
	}
	return n
}

// note is what the file's status says of its processing: the pages of a
// scan that still need OCR, and why.
func (it *commitItem) note() string {
	if it.doc == nil {
		return ""
	}
	return extract.CleanMessage(it.doc.OCR.Note())
}

func (it *commitItem) status() string {
	if it.failed {
		return StatusFailed
	}
	return StatusReady
}

// errLost reports a claimed file deleted, or taken over by another
// process, while it was processed.
var errLost = fmt.Errorf("%w: the file was deleted, or taken over, while it was processed", ErrNotFound)

// commitBatch stores processed files in one transaction: the files' rows
// (inserted, or their claims fenced: a file whose claim another process
// took stores nothing), their chunks in one COPY, their keyword postings,
// their stored bytes deleted, and one update of each conversation's
// counters. It sets each item's out and err; an error returned is the whole
// batch's, and no item was stored.
func (s *Store) commitBatch(ctx context.Context, items []*commitItem) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError("docs: store files", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	seq, err := nextWrite(ctx, tx)
	if err != nil {
		return err
	}
	ds := deltas{}
	// confirmed are the items whose rows this write holds; from their
	// status before.
	var confirmed []*commitItem
	from := map[*commitItem]string{}
	// uploaded is each confirmed item's upload number.
	uploaded := map[*commitItem]int64{}

	// Files processed synchronously are recorded now, ready or failed.
	type key struct{ conv, sha string }
	first := map[key]*commitItem{}
	var fresh []newFile
	var freshItems []*commitItem
	for _, it := range items {
		if it.up == nil {
			continue
		}
		k := key{it.up.conversationID, it.up.sha256}
		if o, ok := first[k]; ok {
			it.dupOf = o
			continue
		}
		first[k] = it
		nf := newFile{up: *it.up, status: it.status(), reason: it.reason, model: it.model}
		if !it.failed {
			nf.chunks, nf.pages, nf.text, nf.note = len(it.chunks), it.pages(), it.doc.Text, it.note()
		}
		fresh = append(fresh, nf)
		freshItems = append(freshItems, it)
	}
	if len(fresh) > 0 {
		recs, err := recordFiles(ctx, tx, fresh, seq)
		if err != nil {
			return err
		}
		for i, r := range recs {
			it := freshItems[i]
			it.out = r.file
			if r.existing {
				continue
			}
			confirmed = append(confirmed, it)
			from[it] = r.from
			uploaded[it] = seq
		}
	}

	// Files claimed by workers: the claim fences the write. One statement
	// per conversation.
	var ids, bytesConvs []string
	claimed := map[string]*commitItem{}
	byConv := map[string][]*commitItem{}
	var claimConvs []string
	for _, it := range items {
		if it.up != nil {
			continue
		}
		claimed[it.f.ID] = it
		ids, bytesConvs = append(ids, it.f.ID), append(bytesConvs, it.f.ConversationID)
		if _, ok := byConv[it.f.ConversationID]; !ok {
			claimConvs = append(claimConvs, it.f.ConversationID)
		}
		byConv[it.f.ConversationID] = append(byConv[it.f.ConversationID], it)
	}
	slices.Sort(claimConvs)
	for _, conv := range claimConvs {
		var ids, tokens, statuses, reasons, notes, models []string
		var texts []*string
		var nChunks, nPages []int32
		for _, it := range byConv[conv] {
			ids, tokens, statuses, reasons = append(ids, it.f.ID), append(tokens, it.c.token), append(statuses, it.status()), append(reasons, it.reason)
			var text *string
			var n, p int32
			note := ""
			if !it.failed {
				text, n, p, note = &it.doc.Text, int32(len(it.chunks)), int32(it.pages()), it.note()
			}
			texts, nChunks, nPages, models = append(texts, text), append(nChunks, n), append(nPages, p), append(models, it.model)
			notes = append(notes, note)
		}
		rows, err := tx.Query(ctx, `
			UPDATE files f
			SET status = u.status, error = u.reason, note = u.note, chunk_count = u.chunks, page_count = u.pages,
			    embedding_model = CASE WHEN u.status = 'ready' THEN u.model ELSE f.embedding_model END,
			    extracted_text = u.text, claimed_by = NULL, claimed_until = NULL, updated_at = now(),
			    write_seq = CASE WHEN u.status = 'ready' THEN $9 ELSE f.write_seq END
			FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[], $8::text[], $10::text[])
			     AS u(id, token, status, reason, chunks, pages, model, text, note)
			WHERE f.conversation_id = $11 AND f.id = u.id AND f.status = 'processing' AND f.claimed_by = u.token
			RETURNING `+fileColumns+`, f.upload_seq`,
			ids, tokens, statuses, reasons, nChunks, nPages, models, texts, seq, notes, conv)
		if err != nil {
			return dbError("docs: store files", err)
		}
		for rows.Next() {
			var upSeq int64
			f, err := scanFile(rows, &upSeq)
			if err != nil {
				rows.Close()
				return dbError("docs: store files", err)
			}
			it := claimed[f.ID]
			it.out = f
			confirmed = append(confirmed, it)
			from[it] = StatusProcessing
			uploaded[it] = upSeq
		}
		if err := rows.Err(); err != nil {
			return dbError("docs: store files", err)
		}
	}
	if len(ids) > 0 {
		for _, it := range claimed {
			if _, ok := from[it]; !ok {
				it.out, it.err = it.f, fmt.Errorf("docs: store %s: %w", it.f.ID, errLost)
			}
		}
		// The bytes were kept for the worker; the outcome is stored.
		if err := deleteBytes(ctx, tx, bytesConvs, ids); err != nil {
			return dbError("docs: store files", err)
		}
	}

	// The chunks of the ready files, in one COPY.
	var ready []*commitItem
	total := 0
	for _, it := range confirmed {
		if !it.failed {
			ready = append(ready, it)
			total += len(it.chunks)
		}
	}
	if total > 0 {
		i, j := 0, 0
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"chunks"},
			[]string{"id", "file_id", "conversation_id", "ordinal", "content", "page_number", "page_start", "page_end", "char_start", "char_end", "embedding_model", "embedding", "write_seq", "location"},
			pgx.CopyFromFunc(func() ([]any, error) {
				for i < len(ready) && j >= len(ready[i].chunks) {
					i, j = i+1, 0
				}
				if i == len(ready) {
					return nil, nil
				}
				it, c := ready[i], ready[i].chunks[j]
				v := it.vecs[j]
				j++
				var loc any
				if !c.Location.IsZero() {
					loc = json.RawMessage(c.Location.JSON())
				}
				return []any{newID(it.out.ConversationID), it.out.ID, it.out.ConversationID, c.Ordinal, c.Content, c.PageStart, c.PageStart, c.PageEnd, c.Start, c.End, it.model, pgvector.NewVector(v), seq, loc}, nil
			}))
		if err != nil {
			return dbError("docs: store chunks", err)
		}
	}
	// Their keyword postings, from the chunks' tsvectors just computed.
	postings := map[uuid.UUID][]byte{}
	if len(ready) > 0 {
		var fileIDs []uuid.UUID
		var fileConvs []string
		for _, it := range ready {
			fileIDs, fileConvs = append(fileIDs, uuid.MustParse(it.out.ID)), append(fileConvs, it.conversationID())
		}
		for c, ids := range byConversation(fileConvs, fileIDs) {
			built, err := buildPostings(ctx, tx, c, ids)
			if err != nil {
				return err
			}
			maps.Copy(postings, built)
		}
	}

	// The counters, under the conversations' locks; files of conversations
	// deleted meanwhile are taken back out.
	convs := make([]string, 0, len(confirmed))
	for _, it := range confirmed {
		convs = append(convs, it.conversationID())
	}
	if len(convs) == 0 {
		if err := tx.Commit(ctx); err != nil {
			return dbError("docs: store files", err)
		}
		resolveDuplicates(items)
		return nil
	}
	floors, err := lockConversations(ctx, tx, convs)
	if err != nil {
		return err
	}
	// Every conversation locked gets its counters written, if only to
	// remove a row the lock created for a conversation left with no file.
	for _, c := range convs {
		ds.of(c)
	}
	var doomed, doomedConvs []string
	for _, it := range confirmed {
		if uploaded[it] <= floors[it.conversationID()] {
			// Uploaded before its conversation was deleted: the
			// deleted conversation's, to be purged with it.
			doomed, doomedConvs = append(doomed, it.out.ID), append(doomedConvs, it.conversationID())
			it.err = fmt.Errorf("docs: store %s: %w: its conversation was deleted while it was processed", it.out.ID, ErrNotFound)
			continue
		}
		d := ds.of(it.conversationID())
		if it.up != nil {
			d.uploads++
		}
		d.move(from[it], it.status())
		if !it.failed {
			d.addChunks(it.model, int64(len(it.chunks)), 0)
		}
	}
	if len(doomed) > 0 {
		b := &pgx.Batch{}
		for c, ids := range byConversation(doomedConvs, doomed) {
			b.Queue(`DELETE FROM chunks WHERE conversation_id = $1 AND file_id = ANY($2::uuid[]) AND write_seq = $3`, c, ids, seq)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return dbError("docs: store files", err)
		}
	}
	gens, err := applyDeltas(ctx, tx, ds)
	if err != nil {
		return err
	}
	if len(ready) > 0 {
		type ps struct {
			ids    []uuid.UUID
			values [][]byte
		}
		byConv := map[string]*ps{}
		for _, it := range ready {
			if it.err != nil {
				continue
			}
			id := uuid.MustParse(it.out.ID)
			p := byConv[it.conversationID()]
			if p == nil {
				p = &ps{}
				byConv[it.conversationID()] = p
			}
			p.ids, p.values = append(p.ids, id), append(p.values, postings[id])
		}
		b := &pgx.Batch{}
		for c, p := range byConv {
			b.Queue(`
				UPDATE files f SET keyword_postings = u.p, ready_gen = $4
				FROM unnest($1::uuid[], $2::bytea[]) AS u(id, p) WHERE f.conversation_id = $3 AND f.id = u.id`, p.ids, p.values, c, gens[c])
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return dbError("docs: keyword postings", err)
		}
	}
	// Those waiting for the files' jobs are told when this commits.
	jobs := jobsOf(confirmed)
	if len(jobs) > 0 {
		if _, err := tx.Exec(ctx, notifyJobsSQL, JobsChannel, jobs); err != nil {
			return dbError("docs: store files", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return dbError("docs: store files", err)
	}
	resolveDuplicates(items)
	s.jobsMoved(jobs)
	return nil
}

// resolveDuplicates gives the items that repeat another of their batch
// that one's file, as a duplicate.
func resolveDuplicates(items []*commitItem) {
	for _, it := range items {
		if it.dupOf != nil {
			it.out, it.err = it.dupOf.out, it.dupOf.err
			it.out.Duplicate = it.err == nil
		}
	}
}

// ---- claims ----

// claimFiles claims, under claim c, the oldest processing files without a
// live claim of one conversation not being deleted, at most max files and,
// past the first, budget bytes in all, and returns them with the number of
// times each has been claimed, this one included. It sets the claim's
// conversation.
//
// The conversations with files processing come from their counters (on a
// distributed database, the one statement of a poll that asks every node;
// a partial index keeps it to the conversations with such files); the
// claim itself names one conversation, the oldest upload first.
func (s *Store) claimFiles(ctx context.Context, c *claim, max int, budget int64) ([]File, []int, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT conversation_id FROM conversation_stats
		WHERE processing_files > 0
		ORDER BY last_upload_at, conversation_id LIMIT $1`, claimConversations)
	if err != nil {
		return nil, nil, dbError("docs: claim files", err)
	}
	convs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, dbError("docs: claim files", err)
	}
	c.others = len(convs) > 0
	for _, conv := range convs {
		files, attempts, err := s.claimConversationFiles(ctx, *c, conv, max, budget)
		if err != nil || len(files) > 0 {
			c.conv = conv
			return files, attempts, err
		}
	}
	return nil, nil, nil
}

// claimConversations is how many conversations with files processing a
// claim looks at: those whose files are all claimed by other workers are
// passed over.
const claimConversations = 16

// claimConversationFiles is claimFiles in conversation conv. The files of
// one claim belong to one job (or to none), the oldest file's: cancelling a
// job then ends whole claims, and interrupts no other job's files.
func (s *Store) claimConversationFiles(ctx context.Context, c claim, conv string, max int, budget int64) ([]File, []int, error) {
	rows, err := s.pool.Query(ctx, `
		UPDATE files f SET claimed_by = $1, claimed_until = now() + make_interval(secs => $2), attempts = f.attempts + 1
		FROM (
			SELECT id, sum(size_bytes) OVER (ORDER BY created_at, id) AS run, row_number() OVER (ORDER BY created_at, id) AS n
			FROM (
				SELECT f.id, f.size_bytes, f.created_at FROM files f
				WHERE f.conversation_id = $5 AND f.status = 'processing'
				  AND (f.claimed_until IS NULL OR f.claimed_until < now()) AND `+visible+`
				  AND f.job_id IS NOT DISTINCT FROM (
					SELECT g.job_id FROM files g
					WHERE g.conversation_id = $5 AND g.status = 'processing'
					  AND (g.claimed_until IS NULL OR g.claimed_until < now())
					ORDER BY g.created_at, g.id LIMIT 1)
				ORDER BY f.created_at, f.id
				LIMIT $3
				FOR UPDATE SKIP LOCKED) l) w
		WHERE f.conversation_id = $5 AND f.id = w.id AND (w.n = 1 OR w.run <= $4)
		RETURNING `+fileColumns+`, f.attempts`, c.token, c.lease.Seconds(), max, budget, conv)
	if err != nil {
		return nil, nil, dbError("docs: claim files", err)
	}
	var files []File
	var attempts []int
	for rows.Next() {
		var n int
		f, err := scanFile(rows, &n)
		if err != nil {
			rows.Close()
			return nil, nil, dbError("docs: claim files", err)
		}
		files, attempts = append(files, f), append(attempts, n)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, dbError("docs: claim files", err)
	}
	// Oldest first, as claimed.
	slices.SortStableFunc(files, func(a, b File) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return files, attempts, nil
}

// renewClaim extends claim c on the files it holds and returns how many it
// still holds.
func (s *Store) renewClaim(ctx context.Context, c claim) (int, error) {
	tag, err := s.pool.Exec(ctx, `
		UPDATE files SET claimed_until = now() + make_interval(secs => $2)
		WHERE conversation_id = $3 AND claimed_by = $1 AND status = 'processing'`, c.token, c.lease.Seconds(), c.conv)
	if err != nil {
		return 0, dbError("docs: renew claim", err)
	}
	return int(tag.RowsAffected()), nil
}

// heldFiles returns how many files claim c still holds, without renewing
// it.
func (s *Store) heldFiles(ctx context.Context, c claim) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `
		SELECT count(*) FROM files
		WHERE conversation_id = $2 AND claimed_by = $1 AND status = 'processing'`, c.token, c.conv).Scan(&n)
	if err != nil {
		return 0, dbError("docs: check claim", err)
	}
	return n, nil
}

// releaseClaim gives up claim c on file ids (every file it holds when ids
// is nil), leaving them processing for any process to resume; the
// interrupted attempt is not counted. A connection lost (the database
// restarting) is tried again for up to releaseTimeout, so that the files
// move again as soon as the database is back rather than when the lease
// expires.
func (s *Store) releaseClaim(c claim, ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	wait := outageRetry
	for {
		_, err := s.pool.Exec(ctx, `
			UPDATE files SET claimed_by = NULL, claimed_until = NULL, attempts = greatest(attempts - 1, 0)
			WHERE conversation_id = $3 AND claimed_by = $1 AND status = 'processing' AND ($2::uuid[] IS NULL OR id = ANY($2))`, c.token, ids, c.conv)
		if err == nil {
			return
		}
		if !pg.Unavailable(err) || !sleepCtx(ctx, wait) {
			// The lease then expires on its own and the files are
			// resumed later.
			s.log.Warn("docs: cannot release a claim", "files", len(ids), "error", err)
			return
		}
		wait = min(2*wait, maxOutageRetry)
	}
}

// sleepCtx waits for d, and reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ---- deleting ----

// deleteFile deletes a file with its chunks and stored bytes, and takes it
// out of its conversation's counters, in one transaction.
func (s *Store) deleteFile(ctx context.Context, id string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError("docs: delete file", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	convs, err := homes(ctx, tx, id)
	if err != nil {
		return err
	}
	where, args := idWhere("f", 1, id, convs)
	var conv, status, model string
	var chunks, write, uploaded int64
	err = tx.QueryRow(ctx, `
		DELETE FROM files f WHERE `+where+` AND `+visible+`
		RETURNING f.conversation_id, f.status, f.embedding_model, f.chunk_count, f.write_seq, f.upload_seq`,
		args...).Scan(&conv, &status, &model, &chunks, &write, &uploaded)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("docs: file %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return dbError("docs: delete file", err)
	}
	floors, err := lockConversations(ctx, tx, []string{conv})
	if err != nil {
		return err
	}
	if uploaded <= floors[conv] {
		// Its conversation was deleted while this ran: the purge has it.
		return fmt.Errorf("docs: file %s: %w", id, ErrNotFound)
	}
	var watermark int64
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT watermark FROM vector_indexes WHERE embedding_model = $1), -1)`, model).Scan(&watermark); err != nil {
		return dbError("docs: delete file", err)
	}
	ds := deltas{}
	d := ds.of(conv)
	d.move(status, "")
	if status == StatusReady {
		covered := int64(0)
		if write <= watermark {
			covered = chunks
		}
		d.addChunks(model, -chunks, -covered)
		d.removed = append(d.removed, uuid.MustParse(id))
	}
	if _, err := applyDeltas(ctx, tx, ds); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return dbError("docs: delete file", err)
	}
	return nil
}

// deleteConversation makes a conversation's files disappear at once: it
// records the deletion for the purge (see purge.go) and removes the
// conversation's counters, in a transaction whose cost does not depend on
// the number of files. It returns how many files the conversation held.
func (s *Store) deleteConversation(ctx context.Context, conv string) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The lock waits for the writes under way, whose files are then the
	// deleted conversation's.
	var files int64
	err = tx.QueryRow(ctx, `
		SELECT ready_files + processing_files + failed_files FROM conversation_stats
		WHERE conversation_id = $1 FOR UPDATE`, conv).Scan(&files)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	floor, err := nextWrite(ctx, tx)
	if err != nil {
		return 0, err
	}
	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO conversation_purges AS p (conversation_id, floor) VALUES ($1, $2)
		ON CONFLICT (conversation_id) DO UPDATE SET floor = greatest(p.floor, excluded.floor), requested_at = excluded.requested_at`, conv, floor)
	b.Queue(`DELETE FROM conversation_models WHERE conversation_id = $1`, conv)
	b.Queue(`DELETE FROM keyword_removals WHERE conversation_id = $1`, conv)
	b.Queue(`DELETE FROM conversation_stats WHERE conversation_id = $1`, conv)
	// Its jobs go with it: a job running for it finds its row gone and
	// stops (package jobs); their files are the purge's.
	b.Queue(`DELETE FROM jobs WHERE conversation_id = $1`, conv)
	// And its sources: what they knew of their pages is of files gone.
	b.Queue(`DELETE FROM source_pages WHERE conversation_id = $1`, conv)
	b.Queue(`DELETE FROM sources WHERE conversation_id = $1`, conv)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, dbError("docs: delete conversation", err)
	}
	return int(files), nil
}

// purgeBatch is how many rows one purge statement deletes: a statement of
// a few hundred milliseconds at most.
const purgeBatch = 2000

// purgeStep deletes up to purgeBatch chunks, then files, of the oldest
// deleted conversation no other process is purging, and reports whether
// there was work. When nothing of the deletion is left it removes its
// record and corrects the counters of the conversation's new incarnation,
// if any, from its files.
func (s *Store) purgeStep(ctx context.Context) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, dbError("docs: purge", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The oldest deletions (on a distributed database, a statement that
	// asks every node), then the first no other process is purging,
	// locked by a statement that names it.
	rows, err := tx.Query(ctx, `
		SELECT conversation_id FROM conversation_purges ORDER BY requested_at LIMIT $1`, claimConversations)
	if err != nil {
		return false, dbError("docs: purge", err)
	}
	convs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, dbError("docs: purge", err)
	}
	var conv string
	var floor int64
	for _, c := range convs {
		err = tx.QueryRow(ctx, `
			SELECT floor FROM conversation_purges WHERE conversation_id = $1 FOR UPDATE SKIP LOCKED`, c).Scan(&floor)
		if err == nil {
			conv = c
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return false, dbError("docs: purge", err)
		}
	}
	if conv == "" {
		return false, nil
	}
	// Chunks first, through their conversation's index; then the files,
	// whose own chunks are then gone.
	tag, err := tx.Exec(ctx, `
		DELETE FROM chunks WHERE conversation_id = $1 AND ctid = ANY(ARRAY(
			SELECT ctid FROM chunks WHERE conversation_id = $1 AND write_seq <= $2 LIMIT $3))`, conv, floor, purgeBatch)
	if err != nil {
		return false, dbError("docs: purge", err)
	}
	if tag.RowsAffected() == 0 {
		tag, err = tx.Exec(ctx, `
			DELETE FROM files WHERE conversation_id = $1 AND id = ANY(ARRAY(
				SELECT id FROM files WHERE conversation_id = $1 AND upload_seq <= $2 LIMIT $3))`, conv, floor, purgeBatch/4)
		if err != nil {
			return false, dbError("docs: purge", err)
		}
	}
	if tag.RowsAffected() == 0 {
		finished, err := s.finishPurge(ctx, tx, conv, floor)
		if err != nil {
			return false, err
		}
		if !finished {
			// Rows left by a write that committed meanwhile: the next
			// step purges them.
			return true, nil
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, dbError("docs: purge", err)
	}
	return true, nil
}

// finishPurge removes the record of a finished purge and sets the counters
// of the conversation's new incarnation, if it has one, from its files: a
// write that raced with the deletion may have counted a file of the
// deleted one. It reports false, and the caller rolls back, when a write
// that committed while it waited for the conversation's lock left rows of
// the deleted conversation.
func (s *Store) finishPurge(ctx context.Context, tx pgx.Tx, conv string, floor int64) (bool, error) {
	if _, err := lockConversations(ctx, tx, []string{conv}); err != nil {
		return false, err
	}
	// The purge found nothing left before it held the lock; a write that
	// held it then (numbered before the deletion, committing after it)
	// keeps the rows of its files it took out of the conversation, the
	// purge's. Read again, under the lock, in a new snapshot: no write
	// can leave more until this transaction ends, and once the record is
	// gone a write counts its files in the conversation again.
	var left bool
	if err := tx.QueryRow(ctx, `
		SELECT EXISTS (SELECT FROM files WHERE conversation_id = $1 AND upload_seq <= $2)
		    OR EXISTS (SELECT FROM chunks WHERE conversation_id = $1 AND write_seq <= $2)`, conv, floor).Scan(&left); err != nil {
		return false, dbError("docs: purge", err)
	}
	if left {
		return false, nil
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM conversation_purges WHERE conversation_id = $1 AND floor = $2`, conv, floor)
	b.Queue(`
		UPDATE conversation_stats s
		SET chunk_count = c.chunks, ready_files = c.ready, processing_files = c.processing, failed_files = c.failed,
		    generation = CASE WHEN s.chunk_count = c.chunks THEN s.generation ELSE (SELECT nextval('conversation_generation_seq')) END
		FROM (SELECT coalesce(sum(chunk_count) FILTER (WHERE status = 'ready'), 0) AS chunks,
		             count(*) FILTER (WHERE status = 'ready') AS ready,
		             count(*) FILTER (WHERE status = 'processing') AS processing,
		             count(*) FILTER (WHERE status = 'failed') AS failed
		      FROM files WHERE conversation_id = $1) c
		WHERE s.conversation_id = $1`, conv)
	b.Queue(`
		WITH m AS (
			SELECT embedding_model, sum(chunk_count) AS chunks FROM files
			WHERE conversation_id = $1 AND status = 'ready' GROUP BY embedding_model)
		UPDATE conversation_models cm SET chunks = m.chunks, covered = least(cm.covered, m.chunks)
		FROM m WHERE cm.conversation_id = $1 AND cm.embedding_model = m.embedding_model AND cm.chunks <> m.chunks`, conv)
	b.Queue(`
		DELETE FROM conversation_models cm WHERE cm.conversation_id = $1
		AND NOT EXISTS (SELECT FROM files f WHERE f.conversation_id = $1 AND f.status = 'ready' AND f.embedding_model = cm.embedding_model)`, conv)
	b.Queue(`
		DELETE FROM conversation_stats s WHERE s.conversation_id = $1
		AND NOT EXISTS (SELECT FROM files f WHERE f.conversation_id = $1)`, conv)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return false, dbError("docs: purge", err)
	}
	return true, nil
}

// ---- re-embedding ----

// storeReembedded swaps a ready file's chunk vectors for vecs, in the order
// of ids, embedded by model, in one transaction; the file's chunks become a
// new write, fresh for the new model's vector index. A file deleted
// meanwhile has nothing left to move.
func (s *Store) storeReembedded(ctx context.Context, conv, fileID string, ids []string, vecs [][]float32, model string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError("store vectors", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	seq, err := nextWrite(ctx, tx)
	if err != nil {
		return err
	}
	var old string
	var chunks, oldWrite int64
	err = tx.QueryRow(ctx, `
		WITH o AS (SELECT id, embedding_model, write_seq FROM files
		           WHERE conversation_id = $4 AND id = $1 AND status = 'ready' FOR UPDATE)
		UPDATE files f SET embedding_model = $2, updated_at = now(), write_seq = $3
		FROM o WHERE f.conversation_id = $4 AND f.id = o.id AND `+visible+`
		RETURNING o.embedding_model, f.chunk_count, o.write_seq`,
		fileID, model, seq, conv).Scan(&old, &chunks, &oldWrite)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return dbError("store vectors", err)
	}
	var oldWatermark int64
	if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT watermark FROM vector_indexes WHERE embedding_model = $1), -1)`, old).Scan(&oldWatermark); err != nil {
		return dbError("store vectors", err)
	}
	// The vectors go as text, the one form of an array of vectors both a
	// single node and a distributed database take in one statement.
	texts := make([]string, len(vecs))
	for i, v := range vecs {
		texts[i] = pgvector.NewVector(v).String()
	}
	if _, err := tx.Exec(ctx, `
		UPDATE chunks c SET embedding = r.embedding::vector, embedding_model = $2, write_seq = $3
		FROM unnest($5::uuid[], $6::text[]) AS r(id, embedding)
		WHERE c.conversation_id = $4 AND c.id = r.id AND c.file_id = $1`, fileID, model, seq, conv, ids, texts); err != nil {
		return dbError("store vectors", err)
	}
	floors, err := lockConversations(ctx, tx, []string{conv})
	if err != nil {
		return err
	}
	_ = floors // a file of a deleted conversation is not visible above
	ds := deltas{}
	d := ds.of(conv)
	covered := int64(0)
	if oldWrite <= oldWatermark {
		covered = chunks
	}
	d.addChunks(old, -chunks, -covered)
	d.addChunks(model, chunks, 0)
	d.moved = true
	gens, err := applyDeltas(ctx, tx, ds)
	if err != nil {
		return err
	}
	// Keyword indexes rank the chunks of the current model only: the file
	// is sent to them again, with its new model.
	if _, err := tx.Exec(ctx, `UPDATE files SET ready_gen = $2 WHERE conversation_id = $3 AND id = $1`, fileID, gens[conv], conv); err != nil {
		return dbError("store vectors", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return dbError("store vectors", err)
	}
	return nil
}

// ---- keyword postings of older files ----

// savePostings writes back postings built for ready files stored without
// them, and returns how many it wrote. Any process may: the value derives
// from the chunks, which do not change while the file is ready. A file
// locked by another transaction (being deleted, or written back by another
// process) is skipped rather than waited for, so this never blocks nor
// deadlocks a writer.
func savePostings(ctx context.Context, q querier, conv string, built map[uuid.UUID][]byte) (int, error) {
	ids := make([]uuid.UUID, 0, len(built))
	values := make([][]byte, 0, len(built))
	for id, p := range built {
		ids = append(ids, id)
		values = append(values, p)
	}
	tag, err := q.Exec(ctx, `
		WITH todo AS (
			SELECT id FROM files
			WHERE conversation_id = $3 AND id = ANY($1) AND status = 'ready' AND keyword_postings IS NULL
			ORDER BY id
			FOR UPDATE SKIP LOCKED)
		UPDATE files f SET keyword_postings = v.p
		FROM todo JOIN unnest($1::uuid[], $2::bytea[]) AS v(id, p) ON v.id = todo.id
		WHERE f.conversation_id = $3 AND f.id = todo.id`, ids, values, conv)
	if err != nil {
		return 0, dbError("docs: keyword postings", err)
	}
	return int(tag.RowsAffected()), nil
}

// buildPostings makes the keyword postings of files from their chunks'
// tsvectors, as PostgreSQL computed them. The files are conv's.
func buildPostings(ctx context.Context, q querier, conv string, files []uuid.UUID) (map[uuid.UUID][]byte, error) {
	builders := make(map[uuid.UUID]*keyword.Builder, len(files))
	for _, id := range files {
		builders[id] = keyword.NewBuilder()
	}
	// The tsvectors come in PostgreSQL's binary form, the cheapest form to
	// send and to read.
	rows, err := q.Query(ctx, `
		SELECT file_id, id, tsv FROM chunks
		WHERE conversation_id = $2 AND file_id = ANY($1)
		ORDER BY file_id, ordinal`,
		pgx.QueryResultFormats{pgx.BinaryFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode}, files, conv)
	if err != nil {
		return nil, dbError("docs: keyword postings", err)
	}
	defer rows.Close()
	var file, id uuid.UUID
	for rows.Next() {
		if err := rows.Scan(&file, &id, nil); err != nil {
			return nil, dbError("docs: keyword postings", err)
		}
		if err := builders[file].Add(id, rows.RawValues()[2]); err != nil {
			return nil, fmt.Errorf("docs: keyword postings: chunk %s: %w", id, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("docs: keyword postings", err)
	}
	out := make(map[uuid.UUID][]byte, len(files))
	for id, b := range builders {
		out[id] = b.Bytes()
	}
	return out, nil
}
