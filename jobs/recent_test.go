package jobs

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/pg"
)

func TestRecentSpansConversationsNewestFirst(t *testing.T) {
	emb := newGate(t)
	e := newEnv(t, emb, Options{})
	ctx := context.Background()
	// Six jobs over three conversations: five cancelled, then one whose
	// file the gate holds, running until the end.
	var ids []string
	for i, conv := range []string{"c1", "c2", "c3", "c1", "c2"} {
		// Held, as their caller holds them, so that no worker takes one
		// for a job whose process stopped before the cancel. The first
		// and the fourth read a source.
		in := Input{Title: conv}
		if i%3 == 0 {
			in.SourceID = "s1"
		}
		job, err := e.r.Store().CreateHeld(ctx, conv, KindDocument, in, "tester", uuid.NewString(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// Ended, without files: cancelled.
		if _, err := e.r.Cancel(ctx, job.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
	}
	running, _, _, err := e.r.AddFiles(ctx, "c3", KindDocument, Input{Title: "held"}, "tester", []docs.Upload{text("held.md", "Held by the gate.")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.release)
	ids = append(ids, running.ID)
	slices.Reverse(ids)

	read := func(q RecentQuery) []string {
		t.Helper()
		var got []string
		for {
			p, err := e.r.Recent(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range p.Jobs {
				got = append(got, j.ID)
			}
			if p.Next == "" {
				return got
			}
			q.Cursor = p.Next
		}
	}
	if got := read(RecentQuery{Limit: 2}); !slices.Equal(got, ids) {
		t.Fatalf("every job, two a page: %v, want %v", got, ids)
	}
	if got := read(RecentQuery{Active: true}); !slices.Equal(got, ids[:1]) {
		t.Fatalf("active jobs: %v, want %v", got, ids[:1])
	}
	if got := read(RecentQuery{Ended: true, Limit: 3}); !slices.Equal(got, ids[1:]) {
		t.Fatalf("ended jobs: %v, want %v", got, ids[1:])
	}
	// ids, newest first, are c3 (running), c2, c1, c3, c2, c1.
	if got := read(RecentQuery{Conversations: []string{"c1", "c2"}}); !slices.Equal(got, []string{ids[1], ids[2], ids[4], ids[5]}) {
		t.Fatalf("jobs of c1 and c2: %v", got)
	}
	// The jobs of a source are its syncs: the first and the fourth.
	if got := read(RecentQuery{Conversations: []string{"c1"}, Source: "s1", Limit: 1}); !slices.Equal(got, []string{ids[2], ids[5]}) {
		t.Fatalf("jobs of source s1: %v, want %v", got, []string{ids[2], ids[5]})
	}
	if got := read(RecentQuery{Conversations: []string{}}); len(got) != 0 {
		t.Fatalf("jobs of no conversation: %v", got)
	}
	p, err := e.r.Recent(ctx, RecentQuery{Limit: 1})
	if err != nil || p.Jobs[0].Status != Running && p.Jobs[0].Status != Queued {
		t.Fatalf("the held job: %+v %v", p.Jobs, err)
	}

	// A cursor continues its own listing only.
	if _, err := e.r.Recent(ctx, RecentQuery{Active: true, Cursor: p.Next}); !errors.Is(err, docs.ErrInvalidArgument) {
		t.Fatalf("another listing's cursor: %v", err)
	}
	if _, err := e.r.Recent(ctx, RecentQuery{Limit: docs.MaxListLimit + 1}); !errors.Is(err, docs.ErrInvalidArgument) {
		t.Fatalf("limit out of range: %v", err)
	}
}

// BenchmarkRecent reads the first page of the newest jobs, of every
// conversation, among a million jobs (one in a hundred still running, a
// URL still being fetched): the web page's jobs page for a key that sees
// every conversation.
func BenchmarkRecent(b *testing.B) {
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	emb, err := embed.NewLocal(384)
	if err != nil {
		b.Fatal(err)
	}
	st, err := docs.NewStore(pool, emb, docs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO jobs (conversation_id, id, kind, status, submitted, created_at)
		SELECT 'c' || (g % 5000), gen_random_uuid(), 'url',
		       CASE WHEN g % 100 = 0 THEN 'running' ELSE 'succeeded' END, g % 100 <> 0, now() - g * interval '1 second'
		FROM generate_series(1, 1000000) g`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE jobs`); err != nil {
		b.Fatal(err)
	}
	js := NewStore(st)
	first, err := js.Recent(ctx, RecentQuery{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		q    RecentQuery
	}{
		{"all", RecentQuery{}},
		{"all-page-2", RecentQuery{Cursor: first.Next}},
		{"running", RecentQuery{Active: true}},
		{"ended", RecentQuery{Ended: true}},
		{"two-conversations", RecentQuery{Conversations: []string{"c1", "c2"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := js.Recent(ctx, c.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
