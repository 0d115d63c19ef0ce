package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ListConversationsInput is the list_conversations tool's arguments.
type ListConversationsInput struct {
	Limit int `json:"limit,omitempty" jsonschema:"how many conversations to list, most recent upload first, 1 to 200 (default 50)"`
}

// scope: list_conversations lists only what the caller's key may see; it
// names no conversation itself.
func (ListConversationsInput) scope() scope { return noConversation() }

// ListConversationsOutput is the list_conversations tool's structured result.
type ListConversationsOutput struct {
	Conversations []ConversationInfo `json:"conversations"`
	// Default is the server's default conversation, used when a call
	// names none; absent when there is none.
	Default string `json:"default_conversation,omitempty"`
}

// ConversationInfo is one conversation holding files.
type ConversationInfo struct {
	ID         string `json:"conversation_id"`
	Files      int    `json:"files"`
	Ready      int    `json:"ready"`
	Processing int    `json:"processing"`
	Failed     int    `json:"failed"`
	Chunks     int    `json:"chunks"`
	LastUpload string `json:"last_upload"`
}

const defaultConversationsListed = 50

func listConversationsTool() declared {
	return docsTool(&mcp.Tool{
		Name:  "list_conversations",
		Title: "List conversations with files",
		Description: "List the conversations that hold uploaded files, most recent upload first, with how many files each has (ready, processing, failed) and how many chunks. " +
			"Use it to find the conversation_id for search_docs and list_files when the user has not given one.",
		Annotations: withTitle(docsReadOnly, "List conversations with files"),
	}, func(_ docsTools, sc *jsonschema.Schema) {
		l := prop(sc, "limit")
		l.Minimum, l.Maximum = ptr(1.0), ptr(200.0)
	}, docsTools.listConversations)
}

func (d docsTools) listConversations(ctx context.Context, in ListConversationsInput) (*mcp.CallToolResult, ListConversationsOutput, error) {
	limit := in.Limit
	if limit == 0 {
		limit = defaultConversationsListed
	}
	// A key limited to some conversations sees those only.
	var only []string
	if id := identityFrom(ctx); id.key != nil && id.key.Conversations != nil {
		only = id.key.Conversations
	}
	convs, err := d.store.ListConversations(ctx, only, limit)
	if err != nil {
		return nil, ListConversationsOutput{}, fmt.Errorf("list conversations: %w", err)
	}
	out := ListConversationsOutput{Conversations: make([]ConversationInfo, 0, len(convs))}
	if def := d.defaultConversation; def != "" && identityFrom(ctx).allows(def) {
		out.Default = def
	}
	var b strings.Builder
	if len(convs) == 0 {
		b.WriteString("No conversation holds files yet.")
	}
	for i, c := range convs {
		out.Conversations = append(out.Conversations, ConversationInfo{ID: c.ID, Files: c.Files, Ready: c.Ready, Processing: c.Processing,
			Failed: c.Failed, Chunks: c.Chunks, LastUpload: c.LastUpload.UTC().Format("2006-01-02T15:04:05Z")})
		fmt.Fprintf(&b, "%d. %s: %d files (%d ready, %d processing, %d failed), %d chunks, last upload %s\n",
			i+1, c.ID, c.Files, c.Ready, c.Processing, c.Failed, c.Chunks, c.LastUpload.UTC().Format("2006-01-02 15:04"))
	}
	if out.Default != "" {
		fmt.Fprintf(&b, "\nThe default conversation, used when a call names none, is %s.", out.Default)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, out, nil
}
