package jobs

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/pg"
)

// notifyLimit bounds the wait for a notification the tests expect: the
// alternative, none coming, would wait for ever.
const notifyLimit = 30 * time.Second

// nextSignal waits for a value on c, or fails the test.
func nextSignal(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(notifyLimit):
		t.Fatalf("no notification within %v: %s", notifyLimit, what)
	}
}

// untilEnded waits for job id to end, reading it through s each time c
// says it may have moved, and fails the test when c stays silent.
func untilEnded(t *testing.T, s *Store, c <-chan struct{}, id, who string) Job {
	t.Helper()
	for {
		j, err := s.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if Final(j.Status) {
			return j
		}
		nextSignal(t, c, who+" waits for job "+id+" ("+j.Status+")")
	}
}

// TestWatchTellsEveryReplica follows a job through Runner.Watch in the
// process that runs it and through the watcher of another process on the
// same database, which hears of it only from PostgreSQL's notifications:
// each is told as the job moves, up to its end, without reading it in
// between. The other process's connection, ended by the server, is made
// again, its waiters told to read their jobs meanwhile, and notifications
// reach it again.
func TestWatchTellsEveryReplica(t *testing.T) {
	t.Parallel()
	emb := newGate(t)
	e := newEnv(t, emb, Options{})
	ctx := context.Background()

	pool, err := pg.Open(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	other, err := docs.NewStore(pool, emb, docs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := newWatcher(other, slog.New(slog.DiscardHandler))
	t.Cleanup(w.close)
	otherJobs := NewStore(other)

	j, _, _, err := e.r.AddFiles(ctx, "watched", KindDocument, Input{Title: "notes"}, "tester",
		[]docs.Upload{text("a.md", "# Alpha\n\nThe alpha document speaks of rivers."), text("b.txt", "The beta document speaks of hills.")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	here, stopHere := e.r.Watch(j.ID)
	defer stopHere()
	there, stopThere := w.watch(j.ID)
	defer stopThere()
	// Each watcher's first watch connects it; once listening it tells its
	// waiters to read their jobs, since what came before is not delivered.
	nextSignal(t, here, "this process's watcher listening")
	nextSignal(t, there, "the other process's watcher listening")
	if got, err := otherJobs.Get(ctx, j.ID); err != nil || Final(got.Status) {
		t.Fatalf("before its files are processed the job is %+v, %v; want it running", got, err)
	}

	// The files are processed once the embedder lets them.
	emb.release()
	if got := untilEnded(t, otherJobs, there, j.ID, "the other process"); got.Status != Succeeded {
		t.Errorf("the other process saw the job end %s, want succeeded", got.Status)
	}
	if got := untilEnded(t, e.r.Store(), here, j.ID, "this process"); got.Status != Succeeded {
		t.Errorf("this process saw the job end %s, want succeeded", got.Status)
	}

	// The server ends the listening sessions (as a restart does). A
	// waiter for a job nobody announces is then told to read it: what was
	// announced while the connection was down is lost.
	quiet, stopQuiet := w.watch(uuid.NewString())
	defer stopQuiet()
	ended, err := e.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`)
	if err != nil {
		t.Fatal(err)
	}
	if ended.RowsAffected() != 2 {
		t.Fatalf("ended %d listening sessions, want the 2 watchers'", ended.RowsAffected())
	}
	nextSignal(t, quiet, "the other process's waiters told to read their jobs once its connection is lost")
	// Both listen again.
	deadline := time.Now().Add(notifyLimit)
	for {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d watchers listen again %v after their sessions ended, want 2", n, notifyLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	id := uuid.NewString()
	again, stopAgain := w.watch(id)
	defer stopAgain()
	e.r.Store().announce(ctx, id)
	nextSignal(t, again, "a job announced after the other process listened again")
}
