package docs

import (
	"context"
	"time"
)

// DeleteConversation deletes every file of a conversation, with their
// chunks, stored upload bytes and statistics, and returns how many files it
// deleted; an unknown conversation deletes none and is not an error. Files
// still processing are deleted too; their processing then stores nothing.
// Errors wrap ErrInvalidArgument for an id CheckConversationID refuses.
//
// The conversation disappears at once, whatever its size: it is no longer
// listed or searched, its files are no longer found, and it can be filled
// again straight away. Its rows are deleted afterwards, a few thousand at a
// time, by the background work of any Ingester on the database, or by
// Purge.
func (s *Store) DeleteConversation(ctx context.Context, conversationID string) (int, error) {
	conversationID, err := CheckConversationID(conversationID)
	if err != nil {
		return 0, err
	}
	n, err := s.deleteConversation(ctx, conversationID)
	if err != nil {
		return 0, err
	}
	// Other processes notice through the conversation's new epoch; this
	// one frees the index's memory at once.
	s.keywords.Drop(conversationID, nil)
	return n, nil
}

// Purge deletes the rows of deleted conversations until none is left, or
// ctx ends, calling progress (when not nil) after each step with the
// number of steps so far. Each step is a transaction deleting at most a
// few thousand rows; processes purging at the same time share the work.
// A server's Ingester purges in the background; commands that delete a
// conversation and exit call Purge.
func (s *Store) Purge(ctx context.Context, progress func(steps int)) error {
	for steps := 1; ; steps++ {
		worked, err := s.purgeStep(ctx)
		if err != nil || !worked {
			return err
		}
		if progress != nil {
			progress(steps)
		}
	}
}

// maintain runs the Ingester's background work until Close: every
// PollInterval it purges deleted conversations, and every IndexPolicy
// interval it checks the vector index of its embedder's model and builds
// it when it is due.
func (in *Ingester) maintain() {
	policy := in.opts.Index.withDefaults(in.st.exactChunks)
	purge := time.NewTicker(in.opts.PollInterval)
	defer purge.Stop()
	var index <-chan time.Time
	if policy.Interval > 0 {
		t := time.NewTicker(policy.Interval)
		defer t.Stop()
		index = t.C
	}
	for {
		select {
		case <-in.stop:
			return
		case <-purge.C:
			in.purge()
		case <-index:
			start := time.Now()
			built, err := in.st.BuildIndex(in.workCtx, policy, false)
			if err != nil && in.workCtx.Err() == nil {
				in.log.Warn("docs: vector index", "error", err)
			}
			if built {
				in.counters.indexBuilds.Add(1)
				in.counters.indexNanos.Add(int64(time.Since(start)))
			}
		}
	}
}

// purge runs purge steps until none is left or Close begins.
func (in *Ingester) purge() {
	for {
		select {
		case <-in.stop:
			return
		default:
		}
		worked, err := in.st.purgeStep(in.workCtx)
		if err != nil && in.workCtx.Err() == nil {
			in.log.Warn("docs: purging deleted conversations", "error", err)
		}
		if err != nil || !worked {
			return
		}
	}
}
