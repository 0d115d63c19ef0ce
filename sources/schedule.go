package sources

import (
	"context"
	"time"

	"github.com/mcpsearch/mcpsearch/jobs"
)

// scheduleLock is the advisory lock key one replica at a time holds while
// it starts the periodic syncs.
const scheduleLock int64 = 0x6d637073_73796e63 // "mcpssync"

// SyncEvery starts, until ctx ends, a sync of every site source whose last
// sync is older than every, looking every check: the replica that gets the
// advisory lock starts the jobs (any replica runs them), the others pass.
// Folder sources are synced where the folder is, by the CLI.
func (s *Service) SyncEvery(ctx context.Context, every, check time.Duration) {
	t := time.NewTicker(check)
	defer t.Stop()
	for {
		if err := s.syncDue(ctx, every); err != nil && ctx.Err() == nil {
			s.sy.log.Warn("sources: periodic sync", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// syncDue starts the syncs due, under the advisory lock.
func (s *Service) syncDue(ctx context.Context, every time.Duration) error {
	conn, err := s.sy.st.pool.Acquire(ctx)
	if err != nil {
		return dbError("sources: schedule", err)
	}
	defer conn.Release()
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, scheduleLock).Scan(&got); err != nil {
		return dbError("sources: schedule", err)
	}
	if !got {
		return nil
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, scheduleLock)
	}()
	due, err := s.sy.st.Due(ctx, every, 100)
	if err != nil {
		return err
	}
	for _, src := range due {
		if src.Kind != KindSite {
			continue
		}
		j, err := s.Sync(ctx, src, "schedule")
		if err != nil {
			return err
		}
		s.sy.log.Info("sources: periodic sync started", "source_id", src.ID, "root", src.Root, "job_id", j.ID)
	}
	return nil
}

// Runner returns the jobs runner the Service adds its jobs to.
func (s *Service) Runner() *jobs.Runner { return s.r }
