package docs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// dirtyEmbedder fails with a message holding bytes PostgreSQL refuses in
// text: a NUL and invalid UTF-8, as a provider echoing a file's bytes might.
type dirtyEmbedder struct{ embed.Embedder }

func (dirtyEmbedder) Embed(context.Context, []string) ([][]float32, error) {
	return nil, fmt.Errorf("provider said \x00\xff\xfe%s: %w", strings.Repeat("x", 3000), embed.ErrBadResponse)
}

func TestFailedFilesAlwaysReachFailedWithACleanReason(t *testing.T) {
	t.Parallel()
	local, err := embed.NewLocal(384)
	if err != nil {
		t.Fatal(err)
	}
	// A database each: the workers of an Ingester claim any file waiting
	// in theirs, so a file submitted to one store could be processed by
	// the other's.
	dirty := openStore(t, pgtest.NewDatabase(t), dirtyEmbedder{local}, IngestOptions{})
	small := openStore(t, pgtest.NewDatabase(t), local, IngestOptions{MaxTextBytes: 1000})
	ctx := context.Background()
	tests := []struct {
		name    string
		store   *testStore
		submit  bool
		data    []byte
		wantErr error
		reason  string
	}{
		{"reason with NUL and invalid UTF-8, Ingest", dirty, false, []byte(prose(21, 200)), embed.ErrBadResponse, "embedding failed"},
		{"reason with NUL and invalid UTF-8, Submit", dirty, true, []byte(prose(22, 200)), nil, "embedding failed"},
		{"text over MaxTextBytes", small, false, []byte(prose(23, 400)), extract.ErrTooLarge, "limit"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conv := fmt.Sprintf("clean-%d", i)
			var f File
			var err error
			if tt.submit {
				if f, err = tt.store.Submit(ctx, conv, "a.txt", "", tt.data); err != nil {
					t.Fatal(err)
				}
				f = waitFiles(t, tt.store, conv, 1)[0]
			} else {
				f, err = tt.store.Ingest(ctx, conv, "a.txt", "", tt.data)
				if !errors.Is(err, ErrProcessing) || !errors.Is(err, tt.wantErr) {
					t.Fatalf("Ingest = %v; want ErrProcessing and %v", err, tt.wantErr)
				}
			}
			stored, err := tt.store.GetFile(ctx, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Status != StatusFailed || !strings.Contains(stored.Error, tt.reason) {
				t.Errorf("stored file = %s %q; want failed, the reason mentioning %q", stored.Status, stored.Error, tt.reason)
			}
			if !utf8.ValidString(stored.Error) || strings.ContainsRune(stored.Error, 0) || len(stored.Error) > 1024 {
				t.Errorf("stored reason %q is not clean, short UTF-8", stored.Error)
			}
		})
	}
}
