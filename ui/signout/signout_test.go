package signout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/pg"
)

// TestStore: a session signed out on one replica is seen as such by
// another on the same database at once, and a row outlives its session
// only until the next sign-out.
func TestStore(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	a, b := open(t, url), open(t, url)
	if out, err := b.Has(ctx, "s1"); err != nil || out {
		t.Fatalf("before the sign-out: %v %v", out, err)
	}
	if err := a.Add(ctx, "s1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := a.Add(ctx, "s1", time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("signed out twice: %v", err)
	}
	if out, err := b.Has(ctx, "s1"); err != nil || !out {
		t.Fatalf("the other replica: %v %v, want signed out", out, err)
	}
	if err := a.Add(ctx, "old", time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(ctx, "s2", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM ui_signouts`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows after an expired one: %d %v, want the two live ones", n, err)
	}
}

func open(t *testing.T, url string) *Store {
	t.Helper()
	pool, err := pg.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return New(pool)
}

func TestMemory(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	_ = m.Add(ctx, "old", time.Now().Add(-time.Minute))
	_ = m.Add(ctx, "s1", time.Now().Add(time.Hour))
	if out, _ := m.Has(ctx, "s1"); !out {
		t.Fatal("s1 is not signed out")
	}
	if _, ok := m.ids["old"]; ok {
		t.Error("an expired session is kept")
	}
}

// BenchmarkHas is the look-up each request of the page makes, among
// 100,000 sessions signed out and not yet expired.
func BenchmarkHas(b *testing.B) {
	ctx := context.Background()
	url := pgtest.NewDatabase(b)
	pool, err := pg.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `INSERT INTO ui_signouts (session_id, expires_at)
		SELECT 's' || i, now() + interval '1 hour' FROM generate_series(1, 100000) i`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE ui_signouts`); err != nil {
		b.Fatal(err)
	}
	s := New(pool)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Has(ctx, fmt.Sprintf("s%d", i%200000)); err != nil {
			b.Fatal(err)
		}
	}
}
