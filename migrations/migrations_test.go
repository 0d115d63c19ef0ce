package migrations_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/migrations"
)

func TestAllIsNumberedFromOneWithoutGaps(t *testing.T) {
	ms, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
	for i, m := range ms {
		if m.Version != i+1 {
			t.Errorf("%s has version %d, want %d", m.Name, m.Version, i+1)
		}
		if strings.TrimSpace(m.SQL) == "" {
			t.Errorf("%s is empty", m.Name)
		}
	}
	if got := migrations.Latest(); got != len(ms) {
		t.Errorf("Latest() = %d, want %d", got, len(ms))
	}
	if fp := migrations.Fingerprint(); len(fp) != 16 {
		t.Errorf("Fingerprint() = %q, want 16 hex digits", fp)
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, pgtest.NewEmptyDatabase(t))

	if v, err := migrations.Current(ctx, conn); err != nil || v != 0 {
		t.Fatalf("Current on an empty database = %d, %v; want 0, nil", v, err)
	}
	applied, err := migrations.Apply(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	names := allNames(ctx, t, conn)
	if !slices.Equal(applied, names) {
		t.Errorf("first Apply applied %v, want %v", applied, names)
	}
	again, err := migrations.Apply(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Errorf("second Apply applied %v, want nothing", again)
	}
	if v, err := migrations.Current(ctx, conn); err != nil || v != migrations.Latest() {
		t.Errorf("Current = %d, %v; want %d", v, err, migrations.Latest())
	}
}

func TestApplyConcurrentlyAppliesEachMigrationOnce(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewEmptyDatabase(t)
	const n = 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		applied []string
		errs    []error
	)
	for range n {
		conn := connect(t, url)
		wg.Go(func() {
			got, err := migrations.Apply(ctx, conn)
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, got...)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent Apply failed: %v", errs)
	}
	slices.Sort(applied)
	want := allNames(ctx, t, connect(t, url))
	slices.Sort(want)
	if !slices.Equal(applied, want) {
		t.Errorf("applied %v across %d processes, want each migration exactly once", applied, n)
	}
}

// allNames returns the names of every migration, in order, and of the
// distribution of the tables when db is a Citus coordinator, which Apply
// reports last.
func allNames(ctx context.Context, t *testing.T, db migrations.DB) []string {
	t.Helper()
	ms, _ := migrations.All()
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	distributed, err := migrations.Distributed(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if distributed {
		names = append(names, "citus/distribute.sql")
	}
	return names
}

func TestApplyRejectsAChangedMigration(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, pgtest.NewDatabase(t))
	if _, err := conn.Exec(ctx, `UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1`); err != nil {
		t.Fatal(err)
	}
	_, err := migrations.Apply(ctx, conn)
	if !errors.Is(err, migrations.ErrChecksum) {
		t.Fatalf("Apply = %v, want ErrChecksum", err)
	}
}

func TestApplyWorksThroughAPool(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := migrations.Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if v, err := migrations.Current(ctx, pool); err != nil || v != migrations.Latest() {
		t.Errorf("Current = %d, %v; want %d", v, err, migrations.Latest())
	}
}

// TestDocsSchema checks what the docs store relies on: vectors of any
// dimension in one column, generated full-text columns, per-model expression
// indexes, cascading deletes and one file per conversation and content.
func TestDocsSchema(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, pgtest.NewDatabase(t))
	if err := pgxvec.RegisterTypes(ctx, conn); err != nil {
		t.Fatal(err)
	}
	var fileID string
	err := conn.QueryRow(ctx, `
		INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256)
		VALUES ('c1', 'a.txt', 'text/plain', 10, 'abc') RETURNING id`).Scan(&fileID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `
		INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256)
		VALUES ('c1', 'b.txt', 'text/plain', 10, 'abc')`)
	if err == nil {
		t.Error("a second file with the same sha256 in one conversation was accepted")
	}
	_, err = conn.Exec(ctx, `
		INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256, status)
		VALUES ('c1', 'c.txt', 'text/plain', 10, 'def', 'done')`)
	if err == nil {
		t.Error("an unknown status was accepted")
	}

	insert := `
		INSERT INTO chunks (file_id, conversation_id, ordinal, content, char_start, char_end, embedding_model, embedding)
		VALUES ($1, 'c1', $2, $3, 0, 10, $4, $5)`
	if _, err := conn.Exec(ctx, insert, fileID, 0, "The cats are running; the cat runs.", "m3", vec(1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, insert, fileID, 1, "Deadlock ERR-4471", "m2", vec(0, 1)); err != nil {
		t.Fatal(err)
	}

	var lexemes []string
	err = conn.QueryRow(ctx, `SELECT tsvector_to_array(tsv) FROM chunks WHERE ordinal = 0`).Scan(&lexemes)
	if err != nil {
		t.Fatal(err)
	}
	// "the" and "are" are stop words.
	if !slices.Equal(lexemes, []string{"cat", "run"}) {
		t.Errorf("lexemes %v; want [cat run]", lexemes)
	}

	if _, err := conn.Exec(ctx, `
		CREATE INDEX chunks_hnsw_m3 ON chunks USING hnsw ((embedding::vector(3)) vector_cosine_ops)
		WHERE embedding_model = 'm3'`); err != nil {
		t.Fatalf("per-model HNSW index: %v", err)
	}
	// An m3 vector of the wrong size is refused by the index's cast.
	if _, err := conn.Exec(ctx, insert, fileID, 2, "x", "m3", vec(1, 2)); err == nil {
		t.Error("a 2-dimensional vector was stored under a 3-dimensional model's index")
	}

	if _, err := conn.Exec(ctx, `DELETE FROM files WHERE id = $1`, fileID); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM chunks`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d chunks left after deleting their file", left)
	}
}

func vec(v ...float32) pgvector.Vector {
	return pgvector.NewVector(v)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestDeferredVectorIndexMigration applies the migrations before 007 to a
// database holding a chunk and an index of the kind earlier versions
// maintained on every insert, then 007: the index is dropped, the chunk is
// write 0, and nothing else is lost.
func TestDeferredVectorIndexMigration(t *testing.T) {
	url := pgtest.NewEmptyDatabase(t)
	ctx := context.Background()
	conn := connect(t, url)
	ms, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	run := func(m migrations.Migration) {
		t.Helper()
		if _, err := conn.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	i := slices.IndexFunc(ms, func(m migrations.Migration) bool { return m.Version == 7 })
	for _, m := range ms[:i] {
		run(m)
	}
	var fileID string
	if err := conn.QueryRow(ctx, `INSERT INTO files (conversation_id, file_name, mime_type, size_bytes, sha256, status)
		VALUES ('c1', 'a.txt', 'text/plain', 1, 'x', 'ready') RETURNING id::text`).Scan(&fileID); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO chunks (file_id, conversation_id, ordinal, content, char_start, char_end, embedding_model, embedding)
		VALUES ($1, 'c1', 0, 'cats', 0, 4, 'm3', $2)`, fileID, vec(1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE INDEX chunks_hnsw_m3_3_abcdef01 ON chunks USING hnsw ((embedding::vector(3)) vector_cosine_ops)
		WHERE embedding_model = 'm3'`); err != nil {
		t.Fatal(err)
	}
	run(ms[i])

	var legacy, chunks, maxWrite, indexes int
	if err := conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'chunks\_hnsw\_%'),
		(SELECT count(*) FROM chunks), (SELECT max(write_seq) FROM chunks),
		(SELECT count(*) FROM vector_indexes)`).Scan(&legacy, &chunks, &maxWrite, &indexes); err != nil {
		t.Fatal(err)
	}
	if legacy != 0 || chunks != 1 || maxWrite != 0 || indexes != 0 {
		t.Errorf("after 007: %d old vector indexes, %d chunks, last write %d, %d registered indexes; want 0, 1, 0, 0",
			legacy, chunks, maxWrite, indexes)
	}
}
