package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
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
// whose coordinator admin names.
func newCitus(t testing.TB, admin string, migrate bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	u, err := createCitus(ctx, t, admin, migrate)
	if err != nil {
		t.Fatalf("pgtest: Citus database: %v", err)
	}
	return u
}

// citusNode is a node as the coordinator reaches it.
type citusNode struct {
	name string
	port int32
}

// createCitus creates a database on every node of the cluster (Citus
// propagates CREATE DATABASE from the coordinator when
// citus.enable_create_database_propagation is on, but only from template1,
// so a migrated template cannot be cloned), creates the extensions on every
// node through the coordinator (so that a cluster whose workers the test
// cannot reach, such as a compose network's, works too), registers the
// workers as the admin database has them, and applies the migrations when
// migrate is set. Its removal is registered before anything that can fail
// after the CREATE DATABASE.
func createCitus(ctx context.Context, t testing.TB, admin string, migrate bool) (string, error) {
	t.Helper()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to the coordinator: %w", err)
	}
	defer conn.Close(context.Background())

	coordinator, workers, err := citusNodes(ctx, conn)
	if err != nil {
		return "", err
	}
	name := testPrefix + randomHex(8)
	if _, err := conn.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := dropCitus(ctx, admin, name); err != nil {
			t.Errorf("pgtest: drop Citus database %s: %v", name, err)
		}
	})

	u, err := WithDatabase(admin, name)
	if err != nil {
		return "", err
	}
	db, err := pgx.Connect(ctx, u)
	if err != nil {
		return "", err
	}
	defer db.Close(context.Background())
	// Citus first: pgvector's objects then belong to a database Citus
	// knows, and are created on the workers as they are added.
	for _, ext := range []string{"citus", "vector"} {
		if _, err := db.Exec(ctx, "CREATE EXTENSION "+ext); err != nil {
			return "", fmt.Errorf("create extension %s: %w", ext, err)
		}
	}
	if err := onWorkers(ctx, db, workers, `CREATE EXTENSION IF NOT EXISTS citus; CREATE EXTENSION IF NOT EXISTS vector`); err != nil {
		return "", err
	}
	if coordinator != nil {
		if _, err := db.Exec(ctx, `SELECT citus_set_coordinator_host($1, $2)`, coordinator.name, coordinator.port); err != nil {
			return "", fmt.Errorf("register the coordinator: %w", err)
		}
	}
	for _, w := range workers {
		if _, err := db.Exec(ctx, `SELECT citus_add_node($1, $2)`, w.name, w.port); err != nil {
			return "", fmt.Errorf("add worker %s:%d: %w", w.name, w.port, err)
		}
	}
	if migrate {
		if _, err := migrations.Apply(ctx, db); err != nil {
			return "", fmt.Errorf("migrate %s: %w", name, err)
		}
	}
	return u, nil
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

// onWorkers runs sql in the current database of db on every worker, through
// the coordinator, and fails with every worker's error.
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
	var errs []error
	for rows.Next() {
		var (
			n      citusNode
			ok     bool
			result string
		)
		if err := rows.Scan(&n.name, &n.port, &ok, &result); err != nil {
			return err
		}
		if !ok {
			errs = append(errs, fmt.Errorf("worker %s:%d: %s", n.name, n.port, result))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// dropCitus drops database name on every node: on the workers first,
// through the coordinator, then on the coordinator. Citus could propagate
// the coordinator's DROP DATABASE, but each node's maintenance daemon keeps
// connecting to the database on the other nodes, so a drop can find a
// session it must wait for ("database is being accessed by other users")
// on one node after it dropped the database on another, and then never
// succeed again. So connections are refused everywhere first, and each
// node's drop, which does nothing where the database is gone, is tried
// again until every node has dropped it.
func dropCitus(ctx context.Context, admin, name string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to the coordinator: %w", err)
	}
	defer conn.Close(context.Background())
	id := pgx.Identifier{name}.Sanitize()
	var valid bool
	err = conn.QueryRow(ctx, `SELECT datconnlimit <> -2 FROM pg_database WHERE datname = $1`, name).Scan(&valid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if valid {
		// Propagated to every node. A database a failed drop left invalid
		// can only be dropped.
		if _, err := conn.Exec(ctx, `SET citus.enable_create_database_propagation = on`); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH ALLOW_CONNECTIONS false"); err != nil {
			return fmt.Errorf("refuse connections: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, `SET citus.enable_create_database_propagation = off`); err != nil {
		return err
	}
	drop := "DROP DATABASE IF EXISTS " + id + " WITH (FORCE)"
	for try := 1; ; try++ {
		err := dropEverywhere(ctx, conn, drop)
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

// dropEverywhere runs drop on every worker, then on the coordinator.
func dropEverywhere(ctx context.Context, conn *pgx.Conn, drop string) error {
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport, success, result FROM run_command_on_workers($1)`, drop)
	if err != nil {
		return err
	}
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
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	_, err = conn.Exec(ctx, drop)
	return err
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
