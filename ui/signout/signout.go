// Package signout keeps the sessions of the web page that were signed out,
// so that every replica refuses them: a session is a signed cookie that
// any replica accepts until it expires, and signing out lists it here
// until then. Store keeps the list in PostgreSQL (the table ui_signouts,
// migration 018), read by every replica on every request of the page;
// Memory keeps it in the process, for a server without a database.
package signout

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Store keeps the signed-out sessions in PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Add records that session id, which would have lasted until until, was
// signed out, and forgets the sessions that have expired since they were:
// their cookies are refused for their age alone.
func (s *Store) Add(ctx context.Context, id string, until time.Time) error {
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO ui_signouts (session_id, expires_at) VALUES ($1, $2) ON CONFLICT (session_id) DO NOTHING`, id, until); err != nil {
		return fmt.Errorf("signout: record: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM ui_signouts WHERE expires_at < now()`); err != nil {
		return fmt.Errorf("signout: forget expired sessions: %w", err)
	}
	return nil
}

// Has reports whether session id was signed out.
func (s *Store) Has(ctx context.Context, id string) (bool, error) {
	var out bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM ui_signouts WHERE session_id = $1)`, id).Scan(&out); err != nil {
		return false, fmt.Errorf("signout: look up: %w", err)
	}
	return out, nil
}

// Memory keeps the signed-out sessions in this process: a server without
// a database has no other replica to tell.
type Memory struct {
	mu  sync.Mutex
	ids map[string]time.Time
	now func() time.Time
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{ids: map[string]time.Time{}, now: time.Now} }

// Add records that session id, valid until until, was signed out.
func (m *Memory) Add(_ context.Context, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, t := range m.ids {
		if t.Before(now) {
			delete(m.ids, k)
		}
	}
	m.ids[id] = until
	return nil
}

// Has reports whether session id was signed out.
func (m *Memory) Has(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ids[id]
	return ok, nil
}
