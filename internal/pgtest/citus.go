package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/migrations"
)

// Environment variables of the Citus cluster tests.
const (
	// EnvCitusURL names the variable holding the URL of a database on a
	// Citus coordinator, whose role may create databases and extensions
	// there and on the workers: scripts/citus.sh prints one.
	EnvCitusURL = "MCPSEARCH_CITUS_URL"
	// EnvRequireCitus names the variable that, set to 1, fails the tests
	// that need Citus when EnvCitusURL is missing instead of skipping them.
	// CI sets it, so that no Citus test skips there.
	EnvRequireCitus = "MCPSEARCH_REQUIRE_CITUS"
)

// citusHowTo is the one line a skipped Citus test prints.
const citusHowTo = EnvCitusURL + " is not set: skipping a test that needs a Citus cluster. " +
	"Start one with `export " + EnvCitusURL + "=\"$(scripts/citus.sh)\"` (it needs Citus installed, or its source: see the script), " +
	"or with the citusdata/citus image: docker compose -f docker-compose.yml -f docker-compose.citus.yml up -d citus-register (see that file)"

// CitusAdminURL returns MCPSEARCH_CITUS_URL, or ends the test: skipped when
// it is not set, failed when MCPSEARCH_REQUIRE_CITUS=1 says it must be.
func CitusAdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvCitusURL)
	if u != "" {
		return u
	}
	if os.Getenv(EnvRequireCitus) == "1" {
		t.Fatalf("%s=1 but %s is not set; run scripts/citus.sh and export the URL it prints", EnvRequireCitus, EnvCitusURL)
	}
	t.Skip(citusHowTo)
	return ""
}

// NewCitusDatabase returns the URL of a new database on the Citus cluster of
// MCPSEARCH_CITUS_URL, with Citus and pgvector created on the coordinator and
// on every worker, the workers registered, and every migration applied. It is
// private to the caller and dropped, on every node, when the test ends. The
// test is skipped when no cluster is configured (see CitusAdminURL).
func NewCitusDatabase(t testing.TB) string {
	t.Helper()
	return newCitus(t, CitusAdminURL(t), true)
}

// NewEmptyCitusDatabase is NewCitusDatabase without the migrations: Citus
// and pgvector are there, the schema is not.
func NewEmptyCitusDatabase(t testing.TB) string {
	t.Helper()
	return newCitus(t, CitusAdminURL(t), false)
}

// newCitus makes the database, as NewCitusDatabase says, on the cluster
// whose coordinator admin names: a copy, on each node, of the node's copy
// of a template database made once per cluster and migration set, so that
// a test pays for the CREATE DATABASE of each node and not for setting
// Citus up and migrating.
func newCitus(t testing.TB, admin string, migrate bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	tmpl, err := ensureCitusTemplate(ctx, admin, migrate)
	if err != nil {
		t.Fatalf("pgtest: Citus template database: %v", err)
	}
	name := testPrefix + randomHex(8)
	// Registered first: a copy made on some nodes only is dropped too.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := dropCitus(ctx, admin, name); err != nil {
			t.Errorf("pgtest: drop Citus database %s: %v", name, err)
		}
	})
	if err := cloneCitus(ctx, admin, tmpl, name); err != nil {
		t.Fatalf("pgtest: Citus database: %v", err)
	}
	u, err := WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// testShards is the number of shards of each distributed table in the
// test databases.
const testShards = 8

// citusNode is a node as the coordinator reaches it.
type citusNode struct {
	name string
	port int32
}

// ensureCitusTemplate returns the name of the template database for the
// cluster of admin, migrated when migrate is set, building it when the
// cluster lacks it. Its name carries a digest of the cluster's nodes (the
// template records them) and of the migrations. A template is complete
// once it refuses connections, which its build does last: a build cut
// short is dropped and made again.
func ensureCitusTemplate(ctx context.Context, admin string, migrate bool) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to the coordinator: %w", err)
	}
	defer conn.Close(context.Background())
	var nodes string
	if err := conn.QueryRow(ctx, `
		SELECT string_agg(nodename || ':' || nodeport || '/' || groupid, ',' ORDER BY nodeid)
		FROM pg_dist_node WHERE isactive`).Scan(&nodes); err != nil {
		return "", fmt.Errorf("read the cluster's nodes (is Citus installed in the admin database?): %w", err)
	}
	schema := "empty"
	if migrate {
		schema = migrations.Fingerprint()
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", nodes, schema, testShards)))
	name := templatePrefix + "citus_" + hex.EncodeToString(sum[:8])

	builtMu.Lock()
	defer builtMu.Unlock()
	if built[admin+"\x00"+name] {
		return name, nil
	}
	// A session lock, as for the single-node template.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLockKey); err != nil {
		return "", err
	}
	var sealed *bool
	err = conn.QueryRow(ctx, `SELECT NOT datallowconn FROM pg_database WHERE datname = $1`, name).Scan(&sealed)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	if sealed == nil || !*sealed {
		if sealed != nil {
			if err := dropCitus(ctx, admin, name); err != nil {
				return "", fmt.Errorf("drop the unfinished template %s: %w", name, err)
			}
		}
		if err := buildCitus(ctx, conn, admin, name, migrate); err != nil {
			return "", err
		}
		if err := sealCitus(ctx, conn, name); err != nil {
			return "", err
		}
	}
	built[admin+"\x00"+name] = true
	return name, nil
}

// buildCitus creates database name on every node (Citus propagates CREATE
// DATABASE from the coordinator when citus.enable_create_database_propagation
// is on), creates the extensions on every node through the coordinator (so
// that a cluster whose workers the tests cannot reach, such as a compose
// network's, works too), registers the nodes as the admin database has
// them, and applies the migrations when migrate is set.
func buildCitus(ctx context.Context, conn *pgx.Conn, admin, name string, migrate bool) error {
	coordinator, workers, err := citusNodes(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	u, err := WithDatabase(admin, name)
	if err != nil {
		return err
	}
	db, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	// Citus first: pgvector's objects then belong to a database Citus
	// knows, and are created on the workers as they are added.
	for _, ext := range []string{"citus", "vector"} {
		if _, err := db.Exec(ctx, "CREATE EXTENSION "+ext); err != nil {
			return fmt.Errorf("create extension %s: %w", ext, err)
		}
	}
	if err := onWorkers(ctx, db, workers, `CREATE EXTENSION IF NOT EXISTS citus; CREATE EXTENSION IF NOT EXISTS vector`); err != nil {
		return err
	}
	if coordinator != nil {
		if _, err := db.Exec(ctx, `SELECT citus_set_coordinator_host($1, $2)`, coordinator.name, coordinator.port); err != nil {
			return fmt.Errorf("register the coordinator: %w", err)
		}
	}
	for _, w := range workers {
		if _, err := db.Exec(ctx, `SELECT citus_add_node($1, $2)`, w.name, w.port); err != nil {
			return fmt.Errorf("add worker %s:%d: %w", w.name, w.port, err)
		}
	}
	if migrate {
		// Fewer shards than Citus's default 32: every shard of every table
		// is a set of files each test database copies on its node, and a
		// statement asking every shard a task each. Eight over two workers
		// still spread conversations, and fan out where a statement does.
		if _, err := db.Exec(ctx, fmt.Sprintf(`SET citus.shard_count = %d`, testShards)); err != nil {
			return err
		}
		if _, err := migrations.Apply(ctx, db); err != nil {
			return fmt.Errorf("migrate %s: %w", name, err)
		}
	}
	return nil
}

// sealCitus makes database name a template on every node: it refuses
// connections, and the sessions it has, Citus's maintenance daemons among
// them, are ended, since PostgreSQL copies a database only when no one is
// connected to it.
func sealCitus(ctx context.Context, conn *pgx.Conn, name string) error {
	if _, err := conn.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err != nil {
		return err
	}
	id := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("seal the template: %w", err)
	}
	end := fmt.Sprintf(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()`, literal(name))
	for {
		rows, err := conn.Query(ctx, `SELECT result FROM run_command_on_all_nodes($1)`, end)
		if err != nil {
			return fmt.Errorf("end the template's sessions: %w", err)
		}
		counts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("end the template's sessions: %w", err)
		}
		if !slices.ContainsFunc(counts, func(c string) bool { return c != "0" }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("end the template's sessions: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cloneCitus copies template tmpl as database name on every node, each
// node from its own copy: the shards, the shell tables and Citus's
// metadata are then those of a database made on the cluster.
func cloneCitus(ctx context.Context, admin, tmpl, name string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to the coordinator: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SET citus.enable_create_database_propagation = off`); err != nil {
		return err
	}
	// The notice that Citus does not propagate this is expected.
	if _, err := conn.Exec(ctx, `SET client_min_messages = warning`); err != nil {
		return err
	}
	create := fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", pgx.Identifier{name}.Sanitize(), pgx.Identifier{tmpl}.Sanitize())
	if err := onAllWorkers(ctx, conn, create); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

// citusNodes reads the coordinator's entry (nil when the cluster does not
// register it) and the active primary workers from the admin database.
func citusNodes(ctx context.Context, conn *pgx.Conn) (*citusNode, []citusNode, error) {
	rows, err := conn.Query(ctx, `
		SELECT nodename, nodeport, groupid = 0
		FROM pg_dist_node
		WHERE noderole = 'primary' AND isactive
		ORDER BY groupid, nodeid`)
	if err != nil {
		return nil, nil, fmt.Errorf("read the cluster's nodes (is Citus installed in the admin database?): %w", err)
	}
	var (
		coordinator *citusNode
		workers     []citusNode
	)
	for rows.Next() {
		var (
			n      citusNode
			isHost bool
		)
		if err := rows.Scan(&n.name, &n.port, &isHost); err != nil {
			return nil, nil, err
		}
		if isHost {
			coordinator = &n
		} else {
			workers = append(workers, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(workers) == 0 {
		return nil, nil, errors.New("the Citus cluster has no active worker: register workers with citus_add_node in the admin database")
	}
	return coordinator, workers, nil
}

// onWorkers runs sql in the current database of db on the given workers,
// through the coordinator, and fails with every worker's error. It works
// before the workers are registered in that database.
func onWorkers(ctx context.Context, db *pgx.Conn, workers []citusNode, sql string) error {
	names := make([]string, len(workers))
	ports := make([]int32, len(workers))
	cmds := make([]string, len(workers))
	for i, w := range workers {
		names[i], ports[i], cmds[i] = w.name, w.port, sql
	}
	rows, err := db.Query(ctx, `SELECT node_name, node_port, success, result FROM master_run_on_worker($1, $2, $3, true)`, names, ports, cmds)
	if err != nil {
		return fmt.Errorf("run on the workers: %w", err)
	}
	return workerErrors(rows)
}

// onAllWorkers runs sql, a statement that may not run in a transaction
// such as CREATE DATABASE, on every worker registered in conn's database.
func onAllWorkers(ctx context.Context, conn *pgx.Conn, sql string) error {
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport, success, result FROM run_command_on_workers($1)`, sql)
	if err != nil {
		return fmt.Errorf("run on the workers: %w", err)
	}
	return workerErrors(rows)
}

// workerErrors reads rows of (node, port, success, result) and joins the
// failures.
func workerErrors(rows pgx.Rows) error {
	var errs []error
	var n citusNode
	var ok bool
	var result string
	if _, err := pgx.ForEachRow(rows, []any{&n.name, &n.port, &ok, &result}, func() error {
		if !ok {
			errs = append(errs, fmt.Errorf("worker %s:%d: %s", n.name, n.port, result))
		}
		return nil
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// dropCitus drops database name on every node, the workers first, through
// the coordinator. Citus could propagate the coordinator's DROP DATABASE,
// but each node's maintenance daemon keeps connecting to the database on
// the other nodes, so a drop can find a session it must wait for
// ("database is being accessed by other users") on one node after it
// dropped the database on another, and then never succeed again. So
// connections are refused on every node first, and each node's drop, which
// does nothing where the database is gone, is tried again until every node
// has dropped it.
func dropCitus(ctx context.Context, admin, name string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to the coordinator: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SET citus.enable_create_database_propagation = off`); err != nil {
		return err
	}
	id := pgx.Identifier{name}.Sanitize()
	// Where the database is missing, or invalid after a failed drop (it
	// can then only be dropped), this fails, and the drop does the rest.
	refuse := fmt.Sprintf(`DO $$ BEGIN
		IF EXISTS (SELECT FROM pg_database WHERE datname = %s AND datconnlimit <> -2) THEN
			ALTER DATABASE %s WITH ALLOW_CONNECTIONS false;
		END IF; END $$`, literal(name), id)
	_ = onAllWorkers(ctx, conn, refuse)
	if _, err := conn.Exec(ctx, refuse); err != nil {
		return fmt.Errorf("refuse connections: %w", err)
	}
	drop := "DROP DATABASE IF EXISTS " + id + " WITH (FORCE)"
	for try := 1; ; try++ {
		err := onAllWorkers(ctx, conn, drop)
		if err == nil {
			_, err = conn.Exec(ctx, drop)
		}
		if err == nil || try == 5 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// literal quotes s as an SQL string literal.
func literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// hasCitus remembers, per admin URL, whether its database has Citus, so
// that NewDatabase asks once per test binary.
var (
	hasCitusMu sync.Mutex
	hasCitus   = map[string]bool{}
)

// isCitus reports whether the database of admin has the citus extension:
// databases made for tests on such a server must be made on every node.
func isCitus(ctx context.Context, admin string) (bool, error) {
	hasCitusMu.Lock()
	defer hasCitusMu.Unlock()
	if v, ok := hasCitus[admin]; ok {
		return v, nil
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", EnvURL, err)
	}
	defer conn.Close(context.Background())
	var v bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&v); err != nil {
		return false, err
	}
	hasCitus[admin] = v
	return v, nil
}

// onCitus reports whether admin is a Citus coordinator's database, or ends
// the test when that cannot be known.
func onCitus(ctx context.Context, t testing.TB, admin string) bool {
	t.Helper()
	v, err := isCitus(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return v
}
