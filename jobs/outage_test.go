package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestJobGivenBackAfterAnOutage stops the database, a server and a Citus
// cluster of the test's own, while a URL job's page is being fetched: the
// fetch ends while the database is down and the page cannot be stored.
// Rather than failing, the job is given back as soon as the database is
// back, fetched again and stored, and succeeds, its attempt interrupted by
// the outage not counted.
func TestJobGivenBackAfterAnOutage(t *testing.T) {
	t.Parallel()
	pgtest.EachServer(t, func(t *testing.T, srv *pgtest.Server) {
		emb := newGate(t)
		emb.release()
		const page = "https://example.test/lighthouses.txt"
		p := &pages{block: make(chan struct{}), body: map[string]string{page: "The page about lighthouses and their keepers."}}
		e := openEnv(t, srv.NewDatabase(t), emb, Options{Fetch: p})
		j, err := e.r.AddURL(context.Background(), "c1", page, "k")
		if err != nil {
			t.Fatal(err)
		}
		waitJob(t, e.r.Store(), j.ID, notifyLimit, func(j Job) bool { return j.Status == Running })
		srv.Stop(t)
		// The fetch ends while the database is down; the pause lets
		// the store of the page, and the first tries to give the job
		// back, fail.
		close(p.block)
		time.Sleep(time.Second)
		srv.Start(t)
		j = waitJob(t, e.r.Store(), j.ID, notifyLimit, ended)
		p.mu.Lock()
		calls := p.calls
		p.mu.Unlock()
		if j.Status != Succeeded || j.Files.Ready != 1 || j.Attempts != 1 || calls != 2 {
			t.Errorf("after the outage the job is %s (%q), %d files ready, %d attempts, the page fetched %d times; want succeeded, 1, 1 and 2",
				j.Status, j.Error, j.Files.Ready, j.Attempts, calls)
		}
	})
}
