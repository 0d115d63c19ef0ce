package jobs

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mcpsearch/mcpsearch/docs"
)

// position is where a page of jobs ends: the last job's creation time and
// id, the order List reads them in. A nil at starts at the newest job.
type position struct {
	at *time.Time
	id string
}

// idArg is the id as a statement's argument: NULL on the first page.
func (p position) idArg() any {
	if p.at == nil {
		return nil
	}
	return p.id
}

// makeCursor encodes the position after the job created at with id id.
// Cursors are opaque to callers; a job created later does not shift the
// pages after it.
func makeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id))
}

// parseCursor decodes a cursor of makeCursor; "" is the first page.
func parseCursor(cursor string) (position, error) {
	if cursor == "" {
		return position{}, nil
	}
	bad := fmt.Errorf("jobs: %w: cursor %q is not one list_jobs returned", docs.ErrInvalidArgument, cursor)
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return position{}, bad
	}
	at, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return position{}, bad
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return position{}, bad
	}
	if _, err := uuid.Parse(id); err != nil {
		return position{}, bad
	}
	return position{at: &t, id: id}, nil
}
