// Package pgtest gives tests their own fresh PostgreSQL database.
//
// Tests reach PostgreSQL through the DATABASE_URL environment variable, which
// `make test` sets by running scripts/pg.sh. The role in it must be allowed to
// create databases. Setting MCPSEARCH_TEST_SKIP_DB=1 skips tests that need a
// database instead of failing them.
//
// NewDatabase clones a template database that has every migration applied, so
// a fresh, migrated database costs one CREATE DATABASE instead of a full
// migration run. The template's name carries a fingerprint of the migrations:
// changing a migration builds a new template, and test binaries running in
// parallel (go test runs packages concurrently) build each template once,
// under an advisory lock.
//
// On a Citus cluster (the database of DATABASE_URL has the citus extension)
// a test database is made on every node instead, each node copying its own
// copy of a template in which Citus and pgvector are created, the workers
// registered and the migrations applied: see NewCitusDatabase, which gives
// tests a database on the cluster of MCPSEARCH_CITUS_URL whatever
// DATABASE_URL names. So a suite runs on a Citus cluster when DATABASE_URL
// names its coordinator (make test-citus).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/migrations"
)

// Environment variables read by this package.
const (
	// EnvURL names the variable holding the URL of a database whose role may
	// create databases.
	EnvURL = "DATABASE_URL"
	// EnvSkip names the variable that, set to 1, skips database tests.
	EnvSkip = "MCPSEARCH_TEST_SKIP_DB"
)

// Name prefixes of the databases this package creates, so leftovers of a
// killed test run are recognisable.
const (
	templatePrefix = "mcpsearch_tmpl_"
	testPrefix     = "mcpsearch_test_"
)

// templateLockKey serialises template builds across test binaries; advisory
// locks are scoped to the database every binary connects to first.
const templateLockKey int64 = 0x6d637073_746d706c // "mcpstmpl"

// setupTimeout bounds every administrative step, so a wedged server fails
// the test instead of hanging it.
const setupTimeout = 2 * time.Minute

// built remembers, per test binary, which templates exist, so the catalog is
// consulted once per binary and not once per test.
var (
	builtMu sync.Mutex
	built   = map[string]bool{}
)

// NewDatabase returns the URL of a new database with every migration
// applied, private to the caller and dropped when the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabaseOn(t, adminURL(t))
}

// newDatabaseOn is NewDatabase on the server, or cluster, of admin.
func newDatabaseOn(t testing.TB, admin string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if onCitus(ctx, t, admin) {
		return newCitus(t, admin, true)
	}
	tmpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: template database: %v", err)
	}
	return create(ctx, t, admin, tmpl)
}

// NewEmptyDatabase returns the URL of a new database without any migration
// applied, for tests of migrations and of schema checks. It is dropped when
// the test ends.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	admin := adminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if onCitus(ctx, t, admin) {
		return newCitus(t, admin, false)
	}
	return create(ctx, t, admin, "template0")
}

// AdminURL returns DATABASE_URL, or ends the test: skipped when
// MCPSEARCH_TEST_SKIP_DB=1, failed when the variable is missing. Tests of
// connection failures derive broken URLs from it.
func AdminURL(t testing.TB) string {
	t.Helper()
	return adminURL(t)
}

// adminURL returns DATABASE_URL, or ends the test: skipped when
// MCPSEARCH_TEST_SKIP_DB=1, failed when the variable is missing.
func adminURL(t testing.TB) string {
	t.Helper()
	if os.Getenv(EnvSkip) == "1" {
		t.Skipf("%s=1: skipping a test that needs PostgreSQL", EnvSkip)
	}
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Fatalf("%s is not set. This test needs PostgreSQL with pgvector: run `make test`, "+
			"or `export %s=\"$(scripts/pg.sh)\"` and rerun; set %s=1 to skip database tests.", EnvURL, EnvURL, EnvSkip)
	}
	return u
}

// create makes a database named after testPrefix from template tmpl,
// registers its removal and returns its URL.
func create(ctx context.Context, t testing.TB, admin, tmpl string) string {
	t.Helper()
	name := testPrefix + randomHex(8)
	if err := execAdmin(ctx, admin, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{tmpl}.Sanitize())); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		// FORCE ends connections a test left open, such as a pool that was
		// not closed.
		if err := execAdmin(ctx, admin, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{name}.Sanitize())); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// ensureTemplate returns the name of the migrated template database for the
// embedded migrations, building it when the cluster lacks it.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	name := templatePrefix + migrations.Fingerprint()
	builtMu.Lock()
	defer builtMu.Unlock()
	if built[admin+"\x00"+name] {
		return name, nil
	}

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", EnvURL, err)
	}
	defer conn.Close(context.Background())
	// A session lock, released when conn closes, because CREATE DATABASE
	// cannot run inside a transaction.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLockKey); err != nil {
		return "", err
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if err := buildTemplate(ctx, conn, admin, name); err != nil {
			return "", err
		}
	}
	built[admin+"\x00"+name] = true
	return name, nil
}

// buildTemplate migrates a scratch database and renames it to name, so that
// a build cut short never leaves a half-migrated template under the real
// name. The caller holds the template lock.
func buildTemplate(ctx context.Context, conn *pgx.Conn, admin, name string) error {
	scratch := name + "_build"
	if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{scratch}.Sanitize())); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE template0", pgx.Identifier{scratch}.Sanitize())); err != nil {
		return err
	}
	u, err := WithDatabase(admin, scratch)
	if err != nil {
		return err
	}
	mc, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	_, err = migrations.Apply(ctx, mc)
	// Cloning fails while any session is connected to the template, so this
	// connection ends before the rename.
	mc.Close(context.Background())
	if err != nil {
		return fmt.Errorf("migrate %s: %w", scratch, err)
	}
	_, err = conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", pgx.Identifier{scratch}.Sanitize(), pgx.Identifier{name}.Sanitize()))
	return err
}

// execAdmin runs one statement on a short-lived connection to the admin
// database.
func execAdmin(ctx context.Context, admin, sql string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", EnvURL, err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// WithDatabase returns connString, a URL or a keyword/value string, naming
// database name instead of its own.
func WithDatabase(connString, name string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvURL, err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value form the last setting of a keyword wins.
	return connString + " dbname=" + name, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
