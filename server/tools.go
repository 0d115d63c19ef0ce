package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
)

// toolDef is one tool mcpsearch has: its definition, whether a server
// offers it, its timeout, its input schema and how it is added to an MCP
// server. catalogue is the one list of them; per-tool settings, the
// middleware and the README reference all read it.
type toolDef struct {
	tool    *mcp.Tool
	on      func(s *Server) bool
	timeout func(c config.Config) time.Duration
	// input returns the input schema: inferred from the input type, then
	// constrained (ranges, lengths, enums) so clients see the limits and
	// the SDK enforces them before a handler runs.
	input func(s *Server) *jsonschema.Schema
	add   func(s *Server, m *mcp.Server, t *mcp.Tool)
	// scopeOf reads the scope of arguments the schema refused, so that
	// the audit still records the conversation such a call named.
	scopeOf func(args json.RawMessage) (scope, bool)
}

// defineTool ties a tool's definition to its typed handler.
func defineTool[In scoped, Out any](t *mcp.Tool, on func(*Server) bool, timeout func(config.Config) time.Duration,
	constrain func(*Server, *jsonschema.Schema), handler func(*Server) func(context.Context, In) (*mcp.CallToolResult, Out, error)) toolDef {
	return toolDef{
		tool:    t,
		on:      on,
		timeout: timeout,
		input: func(s *Server) *jsonschema.Schema {
			sc, err := jsonschema.For[In](nil)
			if err != nil {
				// The input types are this package's own: a failure is a
				// bug every test catches.
				panic(fmt.Sprintf("input schema of %s: %v", t.Name, err))
			}
			constrain(s, sc)
			return sc
		},
		add: func(s *Server, m *mcp.Server, t *mcp.Tool) {
			mcp.AddTool(m, t, typed(s.log, s.cfg.DefaultConversation, handler(s)))
		},
		scopeOf: func(args json.RawMessage) (scope, bool) {
			var in In
			if json.Unmarshal(args, &in) != nil {
				return scope{}, false
			}
			return in.scope(), true
		},
	}
}

// catalogue lists every tool, in the order clients see them.
func catalogue() []toolDef {
	toolTimeout := func(c config.Config) time.Duration { return c.ToolTimeout }
	docsOn := func(s *Server) bool { return s.docsOn() }
	return []toolDef{
		defineTool(webSearchTool(), func(s *Server) bool { return s.deps.Search != nil && s.cfg.WebSearchEnabled },
			func(c config.Config) time.Duration { return c.WebSearchTimeout },
			(*Server).webSearchSchema, func(s *Server) func(context.Context, WebSearchInput) (*mcp.CallToolResult, WebSearchOutput, error) {
				return s.webSearch
			}),
		defineTool(fetchURLTool(), func(s *Server) bool { return s.deps.Fetch != nil && s.cfg.FetchURLEnabled },
			func(c config.Config) time.Duration { return c.FetchURLTimeout },
			(*Server).fetchURLSchema, func(s *Server) func(context.Context, FetchURLInput) (*mcp.CallToolResult, FetchURLOutput, error) {
				return s.fetchURL
			}),
		defineTool(searchDocsTool(), docsOn, toolTimeout, searchDocsSchema,
			func(s *Server) func(context.Context, SearchDocsInput) (*mcp.CallToolResult, SearchDocsOutput, error) {
				return s.searchDocs
			}),
		defineTool(listFilesTool(), docsOn, toolTimeout, conversationSchema,
			func(s *Server) func(context.Context, ListFilesInput) (*mcp.CallToolResult, ListFilesOutput, error) {
				return s.listFiles
			}),
		defineTool(listConversationsTool(), docsOn, toolTimeout, listConversationsSchema,
			func(s *Server) func(context.Context, ListConversationsInput) (*mcp.CallToolResult, ListConversationsOutput, error) {
				return s.listConversations
			}),
		defineTool(getChunkTool(), docsOn, toolTimeout, getChunkSchema,
			func(s *Server) func(context.Context, GetChunkInput) (*mcp.CallToolResult, GetChunkOutput, error) {
				return s.getChunk
			}),
	}
}

// ToolNames returns the name of every tool mcpsearch has, offered or not.
func ToolNames() []string {
	var names []string
	for _, d := range catalogue() {
		names = append(names, d.tool.Name)
	}
	return names
}

// CheckToolSettings refuses per-tool settings of tools mcpsearch does not
// have, naming the closest tool, so a misspelt name does not pass silently.
func CheckToolSettings(cfg config.Config) error {
	names := ToolNames()
	for tool := range cfg.RateLimits {
		if !slices.Contains(names, tool) {
			return fmt.Errorf("rate limit for unknown tool %q: the tools are %s", tool, strings.Join(names, ", "))
		}
	}
	return nil
}

// toolSet is the tools one Server offers and their timeouts.
type toolSet struct {
	defs   []toolDef
	byName map[string]toolDef
}

func (s *Server) enabledTools() toolSet {
	ts := toolSet{byName: map[string]toolDef{}}
	for _, d := range catalogue() {
		if !d.on(s) {
			continue
		}
		t := *d.tool
		t.InputSchema = d.input(s)
		d.tool = &t
		ts.defs = append(ts.defs, d)
		ts.byName[d.tool.Name] = d
	}
	return ts
}

func (ts toolSet) lookup(name string) (toolDef, bool) {
	d, ok := ts.byName[name]
	return d, ok
}

// timeoutFor returns the timeout of an offered tool.
func (s *Server) timeoutFor(d toolDef) time.Duration {
	if t := d.timeout(s.cfg); t > 0 {
		return t
	}
	return s.cfg.ToolTimeout
}

// prop returns a property of an object schema, which must exist.
func prop(sc *jsonschema.Schema, name string) *jsonschema.Schema {
	p, ok := sc.Properties[name]
	if !ok {
		panic("no property " + name)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// enum lists the allowed values of a string; "" is allowed too, meaning
// the default, since models often send empty optional arguments.
func enum(values ...string) []any {
	out := []any{""}
	for _, v := range values {
		out = append(out, v)
	}
	return out
}
