package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestTestdbClean runs scripts/testdb-clean.sh (make testdb-clean) with a
// prefix of its own, since the default prefixes would drop the databases
// of test packages running at the same time, and checks it drops exactly
// the databases with that prefix, connected to or not.
func TestTestdbClean(t *testing.T) {
	if os.Getenv(pgtest.EnvSkip) == "1" {
		t.Skipf("%s=1", pgtest.EnvSkip)
	}
	admin := os.Getenv(pgtest.EnvURL)
	if admin == "" {
		t.Fatalf("%s is not set: run make test, or export %s=\"$(bash scripts/pg.sh)\"", pgtest.EnvURL, pgtest.EnvURL)
	}
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("psql is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "mcpsearch_cleancheck_" + hex.EncodeToString(b) + "_"
	drop := []string{prefix + "tmpl", prefix + "test"}
	keep := "mcpsearch_cleankeep_" + hex.EncodeToString(b)

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, db := range append(slices.Clone(drop), keep) {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
		})
	}
	// A session left open, as by a killed test, must not stop the drop.
	u, err := pgtest.WithDatabase(admin, drop[0])
	if err != nil {
		t.Fatal(err)
	}
	open, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(context.Background())

	runIn(t, repoRoot, []string{pgtest.EnvURL + "=" + admin}, "bash", filepath.Join("scripts", "testdb-clean.sh"), prefix)

	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname = ANY($1)", append(slices.Clone(drop), keep))
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{keep}) {
		t.Errorf("after testdb-clean.sh %s the databases %v are left; want only %s", prefix, left, keep)
	}

	// Anything but a plain prefix is refused before it reaches SQL.
	cmd := exec.Command("bash", filepath.Join("scripts", "testdb-clean.sh"), "x'; DROP DATABASE postgres; --")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), pgtest.EnvURL+"="+admin)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("testdb-clean.sh took a prefix with quotes:\n%s", out)
	}
}
