package docs

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/citustest"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/migrations"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// recordedPool opens a pool on url, closed when the test ends, whose
// statements rec keeps.
func recordedPool(t *testing.T, url string) (pool *pgxpool.Pool, rec *recorder) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	rec = &recorder{}
	cfg.ConnConfig.Tracer = rec
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error { return pgxvec.RegisterTypes(ctx, c) }
	pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, rec
}

// recorder is a pgx tracer that keeps every statement a pool sends, with
// its arguments, batches included.
type recorder struct {
	mu    sync.Mutex
	stmts []statement
}

type statement struct {
	sql  string
	args []any
}

func (r *recorder) add(sql string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stmts = append(r.stmts, statement{sql, args})
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL, d.Args)
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *recorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.add(d.SQL, d.Args)
}

func (r *recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// fanOut names the statements of the store that ask every shard, by a
// fragment of their text: none of them is about one conversation, and the
// doc/scaling-out.md gives their cost.
var fanOut = []struct{ fragment, why string }{
	{"WHERE processing_files > 0", "a worker's poll for conversations with files to process"},
	{"FROM conversation_purges ORDER BY requested_at", "the purge looking for deleted conversations"},
	{"FROM conversation_models\n\t\tWHERE embedding_model = $1 AND chunks > covered", "the index policy's state of the whole model"},
	{"WHERE embedding_model = $1 AND chunks > covered AND chunks - covered", "the index policy's poll"},
	{"UPDATE conversation_models m SET covered = least(m.covered + d.n, m.chunks)", "the vector index build counting the chunks it covers, once a build"},
	{"SELECT coalesce(sum(covered), 0) FROM conversation_models WHERE embedding_model = $1", "the vector index build's total, once a build"},
	{"SELECT true FROM files WHERE embedding_model = $1 AND status = 'ready' LIMIT 1", "the vector index build looking for files of another model, once a build"},
	{"WHERE f.status = 'ready' AND f.embedding_model <> $1", "reembed listing the files still to move, a few times a run"},
	{"WHERE status = 'ready' AND keyword_postings IS NULL AND (conversation_id, id) >", "mcpsearch migrate writing the postings of files stored before them, once"},
}

// utility matches statements EXPLAIN cannot plan, or that read no table.
var utility = regexp.MustCompile(`(?is)^\s*(BEGIN|COMMIT|ROLLBACK|SET |CREATE INDEX|DROP INDEX|SELECT pg_|SELECT nextval|SELECT version|SELECT current_setting|SELECT coalesce\(\(SELECT watermark|SELECT 1\b|SHOW )`)

// TestStatementsRouteToOneWorker does with one conversation what users and
// operators do — uploads through the queue and a synchronous ingest,
// searches in every mode, listings, get_chunk and its passage, the vector
// index build and searches through it, the keyword postings of files
// stored without them written back by a search and by mcpsearch migrate,
// reembed, deleting a file and the conversation, and the purge — on a
// Citus cluster, records every statement the store sends, and asks Citus
// through EXPLAIN how it runs each: one task, on one worker, for all but
// the few named in fanOut. A statement Citus runs on the coordinator alone
// must read no table of the schema: one would be a table Citus does not
// know.
func TestStatementsRouteToOneWorker(t *testing.T) {
	t.Parallel()
	url := pgtest.NewCitusDatabase(t)
	ctx := context.Background()
	pool, rec := recordedPool(t, url)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	// Conversations over one chunk are searched through the vector index
	// once it is built.
	st, err := NewStore(pool, emb, Options{exactChunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewIngester(st, IngestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	s := &testStore{Store: st, Ingester: in}

	const conv = "routed"
	// Another conversation, so that shards other than conv's hold rows.
	if _, err := in.Ingest(ctx, "elsewhere", "e.txt", "", []byte("a zeppelin over another conversation")); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.stmts = nil
	rec.mu.Unlock()

	f, err := in.Ingest(ctx, conv, "a.txt", "", []byte(strings.Repeat("The zeppelin moored at the mast. ", 80)))
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := in.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	queued, err := in.SubmitFile(ctx, ticket, Upload{ConversationID: conv, FileName: "b.txt", Data: []byte("the airship hangar held two zeppelins")})
	if err != nil {
		t.Fatal(err)
	}
	waitFiles(t, s, conv, 2)
	var chunkID string
	for _, mode := range []Mode{Keyword, Vector, Hybrid} {
		hits, err := s.Search(ctx, Query{Text: "zeppelin", ConversationID: conv, Mode: mode})
		if err != nil || len(hits) == 0 {
			t.Fatalf("%s search = %v, %v", mode, hits, err)
		}
		chunkID = hits[0].ChunkID
	}
	if _, err := s.ListFiles(ctx, conv); err != nil {
		t.Fatal(err)
	}
	// A page, the next one by its cursor, and a prefix, whose total is
	// counted rather than read from the counters.
	page, err := s.ListFilesPage(ctx, FileQuery{ConversationID: conv, Status: StatusReady, Limit: 1})
	if err != nil || page.Next == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	if _, err := s.ListFilesPage(ctx, FileQuery{ConversationID: conv, Status: StatusReady, Limit: 1, Cursor: page.Next}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListFilesPage(ctx, FileQuery{ConversationID: conv, Prefix: "a."}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetChunk(ctx, chunkID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Passage(ctx, chunkID, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.FileText(ctx, f.ID); err != nil {
		t.Fatal(err)
	}

	// The vector index, built on every shard, and searches through it:
	// top 50, where Hybrid ranks the vectors too.
	searchAll := func(when string) {
		t.Helper()
		for _, mode := range Modes() {
			hits, err := s.Search(ctx, Query{Text: "zeppelin mast", ConversationID: conv, Mode: mode, TopK: MaxTopK})
			if err != nil || len(hits) == 0 {
				t.Fatalf("%s, %s search = %v, %v", when, mode, hits, err)
			}
		}
	}
	if built, err := s.BuildIndex(ctx, IndexPolicy{}, true); err != nil || !built {
		t.Fatalf("BuildIndex = %v, %v", built, err)
	}
	searchAll("after the index build")

	// Files stored without keyword postings (before migration 008): a
	// process that has not searched the conversation reads their chunks
	// and writes the postings back; mcpsearch migrate writes those of
	// every file.
	admin := openPool(t, url)
	forget := func() {
		t.Helper()
		if _, err := admin.Exec(ctx, `UPDATE files SET keyword_postings = NULL WHERE conversation_id = $1`, conv); err != nil {
			t.Fatal(err)
		}
	}
	missing := func() int {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM files WHERE conversation_id = $1 AND status = 'ready' AND keyword_postings IS NULL`, conv).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	forget()
	other, err := NewStore(pool, emb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hits, err := other.Search(ctx, Query{Text: "zeppelin", ConversationID: conv, Mode: Keyword}); err != nil || len(hits) == 0 {
		t.Fatalf("keyword search of files without postings = %v, %v", hits, err)
	}
	if n := missing(); n != 0 {
		t.Errorf("%d files still lack their postings after a search wrote them back", n)
	}
	forget()
	if n, err := FillKeywordPostings(ctx, pool); err != nil || n != 2 {
		t.Errorf("FillKeywordPostings = %d, %v; want the conversation's 2 files", n, err)
	}

	// Reembed moves every file to another model; the next build indexes
	// it and drops the old model's index.
	to, err := embed.NewLocal(256)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reembed(ctx, to, nil); err != nil {
		t.Fatal(err)
	}
	searchAll("after reembed")
	if built, err := s.BuildIndex(ctx, IndexPolicy{}, true); err != nil || !built {
		t.Fatalf("BuildIndex after reembed = %v, %v", built, err)
	}
	searchAll("after reembed and the index build")

	if err := s.DeleteFile(ctx, queued.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteConversation(ctx, conv); err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, nil); err != nil {
		t.Fatal(err)
	}
	in.Close()

	rec.mu.Lock()
	stmts := rec.stmts
	rec.mu.Unlock()
	// The operations the workload must have sent, each by a fragment of
	// one of its statements.
	for _, op := range []struct{ what, fragment string }{
		{"the vector index build", "CREATE INDEX CONCURRENTLY"},
		{"a search through the vector index", "SET LOCAL hnsw.ef_search"},
		{"the keyword postings read from the chunks", "SELECT file_id, id, tsv FROM chunks"},
		{"the keyword postings written back", "UPDATE files f SET keyword_postings = v.p"},
		{"reembed storing a file's vectors", "UPDATE chunks c SET embedding = r.embedding::vector"},
		{"the old model's index dropped", "DROP INDEX CONCURRENTLY"},
	} {
		if !slices.ContainsFunc(stmts, func(x statement) bool { return strings.Contains(x.sql, op.fragment) }) {
			t.Errorf("the workload sent no statement of %s (%q)", op.what, op.fragment)
		}
	}
	tables, err := schemaTables(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	// The check below sees a table Citus does not know: schema_migrations
	// stays on the coordinator.
	if p, err := citustest.Explain(ctx, pool, `SELECT count(*) FROM schema_migrations`); err != nil || len(p.Jobs) != 0 || !slices.Contains(p.Local, "schema_migrations") || !tables["schema_migrations"] {
		t.Errorf("a read of schema_migrations: %v, %v; want it read on the coordinator alone", p, err)
	}
	seen := map[string]bool{}
	checked := 0
	for _, x := range stmts {
		sql := strings.TrimSpace(x.sql)
		if utility.MatchString(sql) || seen[sql+fmt.Sprint(x.args...)] {
			continue
		}
		seen[sql+fmt.Sprint(x.args...)] = true
		var args []any
		for _, a := range x.args {
			switch a.(type) {
			case pgx.QueryResultFormats, pgx.QueryExecMode:
				// Options of the call, not arguments of the statement.
			default:
				args = append(args, a)
			}
		}
		p, err := citustest.Explain(ctx, pool, sql, args...)
		if err != nil {
			t.Errorf("explain %s: %v", sql, err)
			continue
		}
		for _, rel := range p.Local {
			if tables[rel] {
				t.Errorf("reads %s on the coordinator, where Citus does not know it: distribute it, or make it a reference table\n%s", rel, sql)
			}
		}
		if len(p.Jobs) == 0 {
			// Reads no table of the schema (catalogs, or nothing).
			continue
		}
		checked++
		why := ""
		for _, fo := range fanOut {
			if strings.Contains(sql, fo.fragment) {
				why = fo.why
			}
		}
		switch {
		case why != "":
			t.Logf("fans out (%s): %s", why, p)
		case !p.Routed():
			t.Errorf("not routed to one worker: %s\n%s", p, sql)
		}
	}
	if checked < 20 {
		t.Errorf("checked %d statements; the workload should send more", checked)
	}
	t.Logf("%d distinct statements checked", checked)
}

// schemaTables returns the names of the tables of the connection's schema.
func schemaTables(ctx context.Context, pool *pgxpool.Pool) (map[string]bool, error) {
	rows, err := pool.Query(ctx, `
		SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

// TestWorkersShortOfMemory: on a Citus cluster the build names the workers
// whose maintenance_work_mem is below its memory, since they build their
// shards' indexes with their own; on one PostgreSQL there are none.
func TestWorkersShortOfMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		url     func(testing.TB) string
		workers int
	}{
		{"one PostgreSQL", pgtest.NewDatabase, 0},
		{"Citus", pgtest.NewCitusDatabase, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := pgx.Connect(ctx, tc.url(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if tc.workers == 0 {
				// make test-citus points DATABASE_URL at the cluster.
				citus, err := migrations.Distributed(ctx, conn)
				if err != nil {
					t.Fatal(err)
				}
				if citus {
					t.Skip("DATABASE_URL is a Citus cluster; make test runs this case on one PostgreSQL")
				}
			}
			// No worker has a petabyte; every worker has a kilobyte.
			low, err := workersShortOfMemory(ctx, conn, 1<<50)
			if err != nil || len(low) != tc.workers {
				t.Fatalf("short of a petabyte: %v, %v; want %d workers", low, err, tc.workers)
			}
			for _, w := range low {
				if w.node == "" || w.setting == "" {
					t.Errorf("worker %+v lacks its name or setting", w)
				}
			}
			if low, err := workersShortOfMemory(ctx, conn, 1<<10); err != nil || len(low) != 0 {
				t.Errorf("short of a kilobyte: %v, %v; want none", low, err)
			}
		})
	}
}
