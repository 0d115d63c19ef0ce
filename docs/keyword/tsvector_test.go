package keyword

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestParseTSVector compares the parser with PostgreSQL's own reading of
// tsvectors holding quotes, backslashes, weights and no positions, sent in
// PostgreSQL's binary form.
func TestParseTSVector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	inputs := []string{
		`'plain':1`,
		`'it''s':1,3 'back\\slash':2 'weighted':4A,5B,6`,
		`'nopos' 'x':1`,
		`'ünïcödé':7 'a b':8`,
		``,
	}
	for _, in := range inputs {
		rows, err := conn.Query(ctx, `SELECT $1::tsvector`, pgx.QueryResultFormats{pgx.BinaryFormatCode}, in)
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		for rows.Next() {
			raw = slices.Clone(rows.RawValues()[0])
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows, err = conn.Query(ctx, `SELECT lexeme, greatest(cardinality(positions), 1) FROM unnest($1::tsvector)`, in)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{}
		var lex string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&lex, &n}, func() error { want[lex] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		if err := parseTSVector(raw, func(l []byte, c int) { got[string(l)] = c }); err != nil {
			t.Fatalf("parse %q: %v", in, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("parse %q = %v; want %v", in, got, want)
		}
		// Every truncation is refused.
		for cut := range len(raw) {
			if err := parseTSVector(raw[:cut], func([]byte, int) {}); err == nil && len(want) > 0 {
				t.Errorf("parse of %q cut to %d of %d bytes succeeded", in, cut, len(raw))
			}
		}
	}
}
