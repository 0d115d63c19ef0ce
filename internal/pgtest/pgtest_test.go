package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/migrations"
)

func TestNewDatabaseIsMigratedPrivateAndDropped(t *testing.T) {
	var first, second string
	t.Run("create", func(t *testing.T) {
		first = NewDatabase(t)
		second = NewDatabase(t)
		if first == second {
			t.Fatalf("two calls returned the same database %s", first)
		}
		for _, u := range []string{first, second} {
			conn := connect(t, u)
			v, err := migrations.Current(context.Background(), conn)
			if err != nil {
				t.Fatal(err)
			}
			if v != migrations.Latest() {
				t.Errorf("%s: schema version %d, want %d", u, v, migrations.Latest())
			}
		}
		// A write to one database is invisible in the other.
		if _, err := connect(t, first).Exec(context.Background(), `CREATE TABLE only_here (x int)`); err != nil {
			t.Fatal(err)
		}
		var exists bool
		if err := connect(t, second).QueryRow(context.Background(), `SELECT to_regclass('only_here') IS NOT NULL`).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Error("table created in one test database is visible in another")
		}
	})
	// The subtest's cleanups have run: both databases must be gone.
	admin := connect(t, adminURL(t))
	for _, u := range []string{first, second} {
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname = $1`, cfg.Database).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("database %s still exists after the test ended", cfg.Database)
		}
	}
}

func TestNewEmptyDatabaseHasNoSchema(t *testing.T) {
	conn := connect(t, NewEmptyDatabase(t))
	v, err := migrations.Current(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if v != 0 {
		t.Errorf("schema version %d, want 0", v)
	}
}

func TestWithDatabase(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"postgres://u:p@127.0.0.1:5432/main?sslmode=disable", "postgres://u:p@127.0.0.1:5432/other?sslmode=disable"},
		{"postgresql://u@h/main", "postgresql://u@h/other"},
		{"postgres://u@h", "postgres://u@h/other"},
		{"host=h user=u dbname=main", "host=h user=u dbname=main dbname=other"},
	}
	for _, tt := range tests {
		got, err := WithDatabase(tt.in, "other")
		if err != nil {
			t.Errorf("WithDatabase(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("WithDatabase(%q) = %q, want %q", tt.in, got, tt.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Errorf("ParseConfig(%q): %v", got, err)
		} else if cfg.Database != "other" {
			t.Errorf("%q names database %q, want other", got, cfg.Database)
		}
	}
}

func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
