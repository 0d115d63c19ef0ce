package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/docs"
)

// ListConversationsInput is the list_conversations tool's arguments.
type ListConversationsInput struct {
	Limit  int    `json:"limit,omitempty" jsonschema:"how many conversations to list, most recent upload first, 1 to 500 (default 50)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page, to read on; leave it out to start with the most recent upload"`
}

// scope: list_conversations lists only what the caller's key may see; it
// names no conversation itself.
func (ListConversationsInput) scope() scope { return noConversation() }

// ListConversationsOutput is the list_conversations tool's structured result.
type ListConversationsOutput struct {
	Conversations []ConversationInfo `json:"conversations"`
	// Total counts the conversations the caller may see, in every page.
	Total int `json:"total" jsonschema:"how many conversations hold files that this caller may see, in every page"`
	// NextCursor continues the listing; absent on the last page.
	NextCursor string `json:"next_cursor,omitempty" jsonschema:"send it as cursor for the next page; absent on the last page"`
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

func listConversationsTool() declared {
	return docsTool(&mcp.Tool{
		Name:  "list_conversations",
		Title: "List conversations with files",
		Description: "List the conversations that hold uploaded files, most recent upload first, a page at a time, with how many files each has (ready, processing, failed) and how many chunks, and how many conversations there are in all. " +
			"Use it to find the conversation_id for search_docs and list_files when the user has not given one; when next_cursor is given, send it as cursor to read on.",
		Annotations: withTitle(docsReadOnly, "List conversations with files"),
	}, "call list_conversations again with cursor set to next_cursor, or a smaller limit",
		func(_ docsTools, sc *jsonschema.Schema) { pageSchema(sc) }, docsTools.listConversations)
}

func (d docsTools) listConversations(ctx context.Context, in ListConversationsInput) (*mcp.CallToolResult, ListConversationsOutput, error) {
	q := docs.ConversationQuery{Limit: in.Limit, Cursor: strings.TrimSpace(in.Cursor)}
	// A key limited to some conversations sees those only.
	if only := identityFrom(ctx).conversations(); only != nil {
		q.Only = only
	}
	p, err := d.store.ListConversationsPage(ctx, q)
	if err != nil {
		return nil, ListConversationsOutput{}, fmt.Errorf("list conversations: %w", err)
	}
	all := ListConversationsOutput{Conversations: make([]ConversationInfo, 0, len(p.Conversations)), Total: p.Total, NextCursor: p.Next}
	if def := d.defaultConversation; def != "" && identityFrom(ctx).allows(def) {
		all.Default = def
	}
	for _, c := range p.Conversations {
		all.Conversations = append(all.Conversations, ConversationInfo{ID: c.ID, Files: c.Files, Ready: c.Ready, Processing: c.Processing,
			Failed: c.Failed, Chunks: c.Chunks, LastUpload: c.LastUpload.UTC().Format("2006-01-02T15:04:05Z")})
	}
	render := func(k int) (ListConversationsOutput, string) {
		out := all
		if k < len(all.Conversations) {
			out.Conversations, out.NextCursor = all.Conversations[:k], p.CursorAfter(k-1)
		}
		return out, d.conversationsText(q, out, len(all.Conversations)-k)
	}
	// A page keeps at least one conversation, so that paging moves on.
	k := min(len(all.Conversations), max(1, d.limit.fitting(len(all.Conversations), func(k int) (string, any) {
		out, text := render(max(k, 1))
		return text, out
	})))
	out, text := render(k)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
}

// conversationsText is what the model reads of a page of conversations:
// how many there are, each one's id and files (and those processing or
// failed), and how to read on. Chunk counts and times are left to the
// structured content.
func (d docsTools) conversationsText(q docs.ConversationQuery, out ListConversationsOutput, leftOut int) string {
	var b strings.Builder
	if out.Total == 0 {
		b.WriteString("No conversation holds files yet.")
	} else {
		which := "the most recent upload first"
		if q.Cursor != "" {
			which = "continuing"
		}
		verb := "hold"
		if out.Total == 1 {
			verb = "holds"
		}
		fmt.Fprintf(&b, "%s %s files; %d listed, %s:\n", plural(out.Total, "conversation"), verb, len(out.Conversations), which)
	}
	for _, c := range out.Conversations {
		fmt.Fprintf(&b, "%s: %s", c.ID, plural(c.Files, "file"))
		switch {
		case c.Processing > 0 && c.Failed > 0:
			fmt.Fprintf(&b, " (%d processing, %d failed)", c.Processing, c.Failed)
		case c.Processing > 0:
			fmt.Fprintf(&b, " (%d processing)", c.Processing)
		case c.Failed > 0:
			fmt.Fprintf(&b, " (%d failed)", c.Failed)
		}
		b.WriteString("\n")
	}
	if leftOut > 0 {
		fmt.Fprintf(&b, "\n%s\n", d.limit.note(fmt.Sprintf("%s of this page did not fit; the cursor below starts with them", plural(leftOut, "conversation"))))
	}
	if out.NextCursor != "" {
		fmt.Fprintf(&b, "\nMore conversations follow: call list_conversations again with cursor %q to read on.\n", out.NextCursor)
	}
	if out.Default != "" {
		fmt.Fprintf(&b, "\nThe default conversation, used when a call names none, is %s.", out.Default)
	}
	return b.String()
}
