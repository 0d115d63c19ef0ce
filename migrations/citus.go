package migrations

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// distributeSQL makes the documents tables distributed on a Citus cluster.
//
//go:embed citus/distribute.sql
var distributeSQL string

// localData lists the tables distributeSQL distributes that may have held
// rows on the coordinator, in an order their foreign keys allow: Citus
// copies the rows to the shards and leaves the coordinator's own copy,
// which is then emptied.
var localData = []string{"chunks", "file_bytes", "files", "conversation_stats", "conversation_models",
	"keyword_removals", "conversation_purges", "jobs", "sources", "source_pages", "vector_indexes", "conversation_keys", "chat_mcp_tool_calls", "ui_signouts"}

// Distributed reports whether db is a Citus coordinator whose documents
// tables are distributed.
func Distributed(ctx context.Context, db DB) (bool, error) {
	citus, done, err := citusState(ctx, db)
	return citus && done, err
}

// citusState reports whether the database has the citus extension, and
// whether its files table is distributed.
func citusState(ctx context.Context, db DB) (citus, distributed bool, err error) {
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return false, false, fmt.Errorf("look for Citus: %w", err)
	}
	if !citus {
		return false, false, nil
	}
	if err := db.QueryRow(ctx, `
		SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = to_regclass('files'))`).Scan(&distributed); err != nil {
		return true, false, fmt.Errorf("read Citus's tables: %w", err)
	}
	return true, distributed, nil
}

// distribute runs distributeSQL when the database is a Citus coordinator
// whose documents tables are still local: detected, not configured, so
// `mcpsearch migrate` distributes a new database and a single-node one
// moved onto Citus alike. It reports whether it distributed anything.
func distribute(ctx context.Context, db DB) (bool, error) {
	ran := false
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		citus, done, err := citusState(ctx, tx)
		if err != nil || !citus || done {
			return err
		}
		if _, err := tx.Exec(ctx, distributeSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		for _, t := range localData {
			if _, err := tx.Exec(ctx, `SELECT truncate_local_data_after_distributing_table($1::regclass)`, t); err != nil {
				return fmt.Errorf("empty the coordinator's copy of %s: %w", t, err)
			}
		}
		ran = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("distribute the documents tables on Citus: %w", err)
	}
	return ran, nil
}
