// Package migrations holds mcpsearch's database schema as numbered SQL files
// and applies them.
//
// A migration is a file named NNN_name.sql (NNN is its version, counting from
// 001) embedded into the binary. Apply runs the ones a database lacks, each in
// its own transaction, and records them in schema_migrations with a checksum
// so that an edited, already-applied file is reported instead of silently
// diverging. Applied migrations are never edited: a change is a new file.
package migrations

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
)

//go:embed *.sql
var files embed.FS

// lockKey is the pg_advisory_xact_lock key that serialises Apply across
// processes, so replicas starting together do not race. It is an arbitrary
// constant that only needs to differ from other advisory locks on the
// database.
const lockKey int64 = 0x6d637073_6d696772 // "mcpsmigr"

// ErrChecksum reports an applied migration whose embedded file has changed
// since it was applied.
var ErrChecksum = errors.New("applied migration has changed")

// DB is what Apply and Current need: *pgx.Conn and *pgxpool.Pool both
// satisfy it.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migration is one embedded SQL file.
type Migration struct {
	// Version is the file's number.
	Version int
	// Name is the file name, such as "001_docs.sql".
	Name string
	// SQL is the file's content.
	SQL string
	// Checksum is the hex sha256 of SQL.
	Checksum string
}

var namePattern = regexp.MustCompile(`^(\d{3,})_[a-z0-9_]+\.sql$`)

// All returns the embedded migrations in version order. It fails when a file
// name does not follow NNN_name.sql or two files share a version.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := namePattern.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrations: %s: name must look like 001_name.sql", e.Name())
		}
		v, err := strconv.Atoi(m[1])
		if err != nil || v < 1 {
			return nil, fmt.Errorf("migrations: %s: bad version", e.Name())
		}
		b, err := fs.ReadFile(files, path.Join(".", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		sum := sha256.Sum256(b)
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations: %s and %s share version %d", ms[i-1].Name, ms[i].Name, ms[i].Version)
		}
	}
	return ms, nil
}

// mustAll returns All's result; the embedded files are fixed at build time
// and a test checks them, so an error is a programming mistake.
func mustAll() []Migration {
	ms, err := All()
	if err != nil {
		panic(err)
	}
	return ms
}

// Latest returns the highest embedded version: the schema version this
// build needs.
func Latest() int {
	ms := mustAll()
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

// Fingerprint returns a short hex digest of every embedded migration's name
// and content. Test helpers name template databases with it, so a changed
// migration set gets a fresh template.
func Fingerprint() string {
	h := sha256.New()
	for _, m := range mustAll() {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Name, m.Checksum)
	}
	h.Write([]byte(distributeSQL))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ErrOutdated reports a database whose schema is older than this build's
// migrations, or that has none: `mcpsearch migrate` brings it up to date.
var ErrOutdated = errors.New("database schema is outdated")

// OutdatedError is the error Check returns for an outdated schema: the
// version the database is at (0 for none) and the one this build needs.
type OutdatedError struct {
	Current, Latest int
}

func (e *OutdatedError) Error() string {
	if e.Current == 0 {
		return "the database has no mcpsearch schema yet: run `mcpsearch migrate` first"
	}
	return fmt.Sprintf("the database is at schema version %d and this build needs %d: run `mcpsearch migrate` first", e.Current, e.Latest)
}

func (e *OutdatedError) Unwrap() error { return ErrOutdated }

// Check returns nil when the database has every embedded migration, an
// *OutdatedError when it lacks some, and the database's error when it
// cannot be read: the one schema check the server and every command make.
func Check(ctx context.Context, db DB) error {
	cur, err := Current(ctx, db)
	if err != nil {
		return err
	}
	if want := Latest(); cur < want {
		return &OutdatedError{Current: cur, Latest: want}
	}
	return nil
}

// Current returns the highest version applied to the database, or 0 when no
// migration has been applied (schema_migrations does not exist).
func Current(ctx context.Context, db DB) (int, error) {
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := db.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Apply applies every embedded migration the database lacks, in version
// order, each in its own transaction under an advisory lock, and returns the
// names of those it applied (none when the schema is current). It fails with
// ErrChecksum, before applying anything, when an applied migration's file has
// changed. Versions in the database that this build does not know (applied
// by a newer build) are left alone. On a Citus coordinator it then
// distributes the documents tables, once (see citus/distribute.sql).
func Apply(ctx context.Context, db DB) ([]string, error) {
	ms, err := All()
	if err != nil {
		return nil, err
	}
	if err := inTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			CREATE TABLE IF NOT EXISTS schema_migrations (
				version    integer PRIMARY KEY,
				name       text NOT NULL,
				checksum   text NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now()
			)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		return verify(ctx, tx, ms)
	}); err != nil {
		return nil, err
	}

	var applied []string
	for _, m := range ms {
		done := false
		err := inTx(ctx, db, func(tx pgx.Tx) error {
			// Another process may have applied it since verify ran.
			err := tx.QueryRow(ctx, `SELECT true FROM schema_migrations WHERE version = $1`, m.Version).Scan(&done)
			switch {
			case err == nil:
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
			// The simple protocol runs a file of many statements in one call.
			if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)`,
				m.Version, m.Name, m.Checksum)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if !done {
			applied = append(applied, m.Name)
		}
	}
	ran, err := distribute(ctx, db)
	if err != nil {
		return applied, err
	}
	if ran {
		applied = append(applied, "citus/distribute.sql")
	}
	return applied, nil
}

// verify fails with ErrChecksum when an applied migration's embedded file
// differs from what was applied.
func verify(ctx context.Context, tx pgx.Tx, ms []Migration) error {
	byVersion := make(map[int]Migration, len(ms))
	for _, m := range ms {
		byVersion[m.Version] = m
	}
	rows, err := tx.Query(ctx, `SELECT version, checksum FROM schema_migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	type row struct {
		version int
		sum     string
	}
	applied, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.version, &x.sum)
		return x, err
	})
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	for _, a := range applied {
		m, ok := byVersion[a.version]
		if ok && m.Checksum != a.sum {
			return fmt.Errorf("%w: %s was applied with checksum %.12s but the file now has %.12s; add a new migration instead of editing an applied one",
				ErrChecksum, m.Name, a.sum, m.Checksum)
		}
	}
	return nil
}

// inTx runs fn in a transaction holding the migrations advisory lock, which
// is released at commit or rollback.
func inTx(ctx context.Context, db DB, fn func(pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
