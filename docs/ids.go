package docs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Files and chunks get ids that carry their conversation: the first 32
// bits of a new id are the conversation's key, the first 32 bits of the
// SHA-256 of its name (the database's conversation_key function, migration
// 011), and the rest is random except for the version (8, a UUID laid out
// by its maker) and variant bits. A statement about a chunk known by its id
// alone (get_chunk) then asks conversation_keys, one row per conversation,
// which conversations have that key, and names them: on a distributed
// database it goes to the conversation's node instead of every node.
// Ids written before migration 011 are random (version 4): those are
// looked up in every conversation.

// conversationKey returns the key of a conversation, as the database's
// conversation_key computes it.
func conversationKey(conversationID string) int32 {
	sum := sha256.Sum256([]byte(conversationID))
	return int32(binary.BigEndian.Uint32(sum[:4]))
}

// newID returns a new file or chunk id of the conversation.
func newID(conversationID string) uuid.UUID {
	var id uuid.UUID
	if _, err := rand.Read(id[4:]); err != nil {
		// crypto/rand does not fail on the systems Go supports.
		panic("docs: random id: " + err.Error())
	}
	binary.BigEndian.PutUint32(id[:4], uint32(conversationKey(conversationID)))
	id[6] = id[6]&0x0f | 0x80 // version 8
	id[8] = id[8]&0x3f | 0x80 // RFC 9562 variant
	return id
}

// idKey returns the conversation key an id carries, and false for an id
// that carries none (written before ids carried their conversation).
func idKey(id uuid.UUID) (int32, bool) {
	if id.Version() != 8 || id.Variant() != uuid.RFC4122 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(id[:4])), true
}

// homes returns the conversations that may hold the file or chunk id: the
// conversations of the key the id carries (none when there is no such
// conversation), or nil for an id that carries no key, which any
// conversation may hold.
func homes(ctx context.Context, q querier, id string) ([]string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return nil, err
	}
	key, ok := idKey(u)
	if !ok {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT conversation_id FROM conversation_keys WHERE key = $1`, key)
	if err != nil {
		return nil, dbError("docs: find the conversation of "+id, err)
	}
	convs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, dbError("docs: find the conversation of "+id, err)
	}
	if convs == nil {
		convs = []string{}
	}
	return convs, nil
}

// idWhere returns the condition that selects the row of a table aliased
// alias whose id is argument $n, within convs (argument $n+1) unless convs
// is nil, and the arguments to append. Naming the conversation lets a
// distributed database send the statement to one node.
func idWhere(alias string, n int, id string, convs []string) (string, []any) {
	switch len(convs) {
	case 0:
		if convs == nil {
			return fmt.Sprintf("%s.id = $%d", alias, n), []any{id}
		}
	case 1:
		// An array parameter of one element is not enough for a
		// distributed database to pick the shard.
		return fmt.Sprintf("%s.id = $%d AND %s.conversation_id = $%d", alias, n, alias, n+1), []any{id, convs[0]}
	}
	return fmt.Sprintf("%s.id = $%d AND %s.conversation_id = ANY($%d::text[])", alias, n, alias, n+1), []any{id, convs}
}
