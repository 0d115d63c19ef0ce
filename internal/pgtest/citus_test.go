package pgtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/migrations"
)

func TestNewCitusDatabaseSpansTheClusterAndIsDropped(t *testing.T) {
	admin := CitusAdminURL(t)
	ctx := context.Background()
	var name string
	t.Run("create", func(t *testing.T) {
		u := NewCitusDatabase(t)
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			t.Fatal(err)
		}
		name = cfg.Database
		conn := connect(t, u)
		v, err := migrations.Current(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		if v != migrations.Latest() {
			t.Errorf("schema version %d, want %d", v, migrations.Latest())
		}
		var workers int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND isactive`).Scan(&workers); err != nil {
			t.Fatal(err)
		}
		if workers == 0 {
			t.Fatal("no worker registered in the new database")
		}
		// Every node has the database with both extensions.
		for _, ext := range []string{"citus", "vector"} {
			bad := onAllNodes(t, conn, fmt.Sprintf(`SELECT count(*) FROM pg_extension WHERE extname = '%s'`, ext), "1")
			if len(bad) > 0 {
				t.Errorf("extension %s missing on %v", ext, bad)
			}
		}
		// A distributed table puts its rows on the workers.
		for _, sql := range []string{
			`CREATE TABLE probe (k text PRIMARY KEY, v vector(3))`,
			`SELECT create_distributed_table('probe', 'k')`,
			`INSERT INTO probe SELECT 'k' || i, '[1,2,3]' FROM generate_series(1, 100) i`,
		} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		var nodes int
		if err := conn.QueryRow(ctx, `SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = 'probe'::regclass`).Scan(&nodes); err != nil {
			t.Fatal(err)
		}
		if nodes != workers {
			t.Errorf("probe's shards are on %d nodes, want the %d workers", nodes, workers)
		}
	})
	// The subtest's cleanups have run: the database is gone from every node.
	if bad := onAllNodes(t, connect(t, admin), fmt.Sprintf(`SELECT count(*) FROM pg_database WHERE datname = '%s'`, name), "0"); len(bad) > 0 {
		t.Errorf("database %s still exists on %v after the test ended", name, bad)
	}
}

func TestNewEmptyCitusDatabaseHasNoSchema(t *testing.T) {
	conn := connect(t, NewEmptyCitusDatabase(t))
	v, err := migrations.Current(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if v != 0 {
		t.Errorf("schema version %d, want 0", v)
	}
	var citus bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		t.Fatal(err)
	}
	if !citus {
		t.Error("the database lacks the citus extension")
	}
}

// onAllNodes runs sql on every node of conn's cluster, in conn's database,
// and returns the nodes whose one-value result is not want.
func onAllNodes(t *testing.T, conn *pgx.Conn, sql, want string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT nodeid, success, result FROM run_command_on_all_nodes($1)`, sql)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	n := 0
	for rows.Next() {
		var (
			id     int
			ok     bool
			result string
		)
		if err := rows.Scan(&id, &ok, &result); err != nil {
			t.Fatal(err)
		}
		n++
		if !ok || result != want {
			bad = append(bad, fmt.Sprintf("node %d (%v: %s)", id, ok, result))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("run_command_on_all_nodes reached %d nodes; want the coordinator and its workers", n)
	}
	return bad
}
