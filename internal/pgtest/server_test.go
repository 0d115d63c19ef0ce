package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/migrations"
)

// TestServerRestarts starts a server and a Citus cluster of the test's
// own, makes a migrated database on each, restarts them, and finds the
// database's rows again on a new connection, while a connection of before
// the restart is found ended; then stops them, and starts them again.
func TestServerRestarts(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(testing.TB) *Server
	}{
		{"postgres", StartServer},
		{"citus", func(t testing.TB) *Server { return StartCitus(t, 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := c.start(t)
			u := s.NewDatabase(t)
			ctx := context.Background()
			before := connect(t, u)
			if v, err := migrations.Current(ctx, before); err != nil || v != migrations.Latest() {
				t.Fatalf("schema version %d, %v; want %d", v, err, migrations.Latest())
			}
			distributed, err := migrations.Distributed(ctx, before)
			if err != nil || distributed != (c.name == "citus") {
				t.Fatalf("distributed = %v, %v on %s", distributed, err, c.name)
			}
			if _, err := before.Exec(ctx, `INSERT INTO jobs (conversation_id, id, kind, input, caller) VALUES ('c', gen_random_uuid(), 'upload', '{}', 'test')`); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			s.Restart(t)
			t.Logf("restarted in %v", time.Since(t0).Round(time.Millisecond))
			if _, err := before.Exec(ctx, `SELECT 1`); err == nil {
				t.Error("a connection made before the restart still works")
			}
			var n int
			if err := connect(t, u).QueryRow(ctx, `SELECT count(*) FROM jobs WHERE conversation_id = 'c'`).Scan(&n); err != nil || n != 1 {
				t.Errorf("after the restart: %d jobs, %v; want the one written before", n, err)
			}
			// The same in two halves, the server down between them.
			s.Stop(t)
			if conn, err := pgx.Connect(ctx, u); err == nil {
				conn.Close(ctx)
				t.Error("a stopped server accepts connections")
			}
			s.Start(t)
			if err := connect(t, u).QueryRow(ctx, `SELECT count(*) FROM jobs WHERE conversation_id = 'c'`).Scan(&n); err != nil || n != 1 {
				t.Errorf("after a stop and a start: %d jobs, %v; want the one written before", n, err)
			}
		})
	}
}
