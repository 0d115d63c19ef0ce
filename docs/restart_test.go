package docs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestWorkSurvivesADatabaseRestart stops the database, a server and a
// Citus cluster of the test's own, while a worker processes files, lets
// the worker finish them while it is down, and starts it again: the
// outcomes are stored once the database is back, each file processed
// once, rather than left claimed until their lease expires and processed
// again.
func TestWorkSurvivesADatabaseRestart(t *testing.T) {
	t.Parallel()
	pgtest.EachServer(t, func(t *testing.T, srv *pgtest.Server) {
		gate := newGatedEmbedder(t)
		counted := &countingEmbedder{Embedder: gate, seen: map[string]int{}}
		s := openStore(t, srv.NewDatabase(t), counted, IngestOptions{Workers: 1})
		ctx := context.Background()
		const conv = "restarted"
		for i := range 3 {
			if _, err := s.Submit(ctx, conv, fmt.Sprintf("note-%d.txt", i), "", []byte(prose(uint64(40+i), 300))); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-gate.started:
		case <-time.After(30 * time.Second):
			t.Fatal("no worker took the files up within 30 s")
		}
		srv.Stop(t)
		// The worker ends its files while the database is down: its
		// first attempts to store them fail, and are tried again
		// every second at most. The pause lets a few of them fail.
		close(gate.release)
		time.Sleep(time.Second)
		srv.Start(t)
		back := time.Now()
		files := waitFiles(t, s, conv, 3)
		t.Logf("the files were ready %v after the database was back", time.Since(back).Round(time.Millisecond))
		for _, f := range files {
			if f.Status != StatusReady {
				t.Errorf("%s is %s (%s), want ready", f.FileName, f.Status, f.Error)
			}
		}
		if n := counted.twice(); n != 0 {
			t.Errorf("%d chunks were embedded again after the restart: the work done meanwhile was lost", n)
		}
		var again int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM files WHERE conversation_id = $1 AND attempts <> 1`, conv).Scan(&again); err != nil {
			t.Fatal(err)
		}
		if again != 0 {
			t.Errorf("%d files count more than one attempt", again)
		}
		checkStats(t, s.Pool(), conv)
	})
}

// countingEmbedder counts the times each text is embedded.
type countingEmbedder struct {
	embed.Embedder
	mu   sync.Mutex
	seen map[string]int
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out, err := c.Embedder.Embed(ctx, texts)
	if err == nil {
		c.mu.Lock()
		for _, text := range texts {
			c.seen[text]++
		}
		c.mu.Unlock()
	}
	return out, err
}

// twice returns how many texts were embedded more than once.
func (c *countingEmbedder) twice() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.seen {
		if k > 1 {
			n++
		}
	}
	return n
}
