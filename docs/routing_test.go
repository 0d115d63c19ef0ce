package docs

import (
	"context"
	"fmt"
	"regexp"
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
// README's "Scaling out" gives their cost.
var fanOut = []struct{ fragment, why string }{
	{"WHERE processing_files > 0", "a worker's poll for conversations with files to process"},
	{"FROM conversation_purges ORDER BY requested_at", "the purge looking for deleted conversations"},
	{"FROM conversation_models\n\t\tWHERE embedding_model = $1 AND chunks > covered", "the index policy's state of the whole model"},
	{"WHERE embedding_model = $1 AND chunks > covered AND chunks - covered", "the index policy's poll"},
}

// utility matches statements EXPLAIN cannot plan, or that read no table.
var utility = regexp.MustCompile(`(?is)^\s*(BEGIN|COMMIT|ROLLBACK|SET |SELECT pg_|SELECT nextval|SELECT version|SELECT current_setting|SELECT coalesce\(\(SELECT watermark|SELECT 1\b|SHOW )`)

// TestStatementsRouteToOneWorker does with one conversation what users do
// — uploads through the queue and a synchronous ingest, searches in every
// mode, listings, get_chunk and its passage, deleting a file and the
// conversation, and the purge — on a Citus cluster, records every
// statement the store sends, and asks Citus through EXPLAIN how it runs
// each: one task, on one worker, for all but the few named in fanOut.
func TestStatementsRouteToOneWorker(t *testing.T) {
	t.Parallel()
	url := pgtest.NewCitusDatabase(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	cfg.ConnConfig.Tracer = rec
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error { return pgxvec.RegisterTypes(ctx, c) }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	emb, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStore(pool, emb, Options{})
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
	if _, err := s.GetChunk(ctx, chunkID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Passage(ctx, chunkID, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.FileText(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
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
		if len(p.Jobs) == 0 {
			// Reads only reference or coordinator tables: no hop.
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
