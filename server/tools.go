package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/oauth"
	"github.com/mcpsearch/mcpsearch/ratelimit"
)

// Deps are the domain services the tools call, as the small interfaces the
// server needs of them (declared with the tools that use them), so a tool
// test can use a fake where a database or a SearXNG adds nothing. A nil
// service means its tools are not offered.
type Deps struct {
	// Search runs web_search.
	Search WebSearcher
	// Fetch reads web pages for fetch_url and ingestion by URL.
	Fetch PageFetcher
	// Research reads web_search's result pages (its read argument) and
	// finds fetch_url's passages (its query argument); nil offers neither.
	Research Researcher
	// Reranker reorders search_docs's best candidates; nil keeps the
	// fused order. /readyz reports how its last call went.
	Reranker Reranker
	// Docs serves the documents tools, resources and upload API.
	Docs Documents
	// Jobs adds documents as jobs (add_document, the upload API) and
	// reads and cancels them; nil offers no job tool.
	Jobs Jobs
	// Sources crawls sites and syncs sources; nil offers no crawl and no
	// sources tool.
	Sources Sources
	// Ingest processes uploads into Docs; it is needed when Docs is set.
	Ingest Uploads
	// APIKeys are the keys accepted on the HTTP surfaces; none means no
	// key is asked for.
	APIKeys []APIKey
	// Tokens checks the identity provider's access tokens, accepted on
	// the HTTP surfaces beside the keys; nil accepts none.
	Tokens *oauth.Verifier
	// Audit receives a record of every tool call; nil records nothing.
	Audit *audit.Writer
	// RateLimits keeps the token buckets in PostgreSQL, one budget per key
	// and tool for every replica; nil keeps them in this process.
	RateLimits *ratelimit.Limiter
	// Tracing starts the spans of MCP requests and HTTP requests (see
	// tracing.go); nil, tracing off, starts none.
	Tracing trace.TracerProvider
}

// catalogue lists every tool mcpsearch has, in the order clients see them.
// Each is declared whole in its own file (see tool); the middleware, the
// per-tool settings, the error table, /readyz, the REST facade and OpenAPI
// document, the golden schemas and the reference in doc/tools.md all read this
// list. A new tool is one line here, and a new backend one field of Deps.
func catalogue() []declared {
	return []declared{
		webSearchTool(),
		fetchURLTool(),
		searchDocsTool(),
		listFilesTool(),
		listConversationsTool(),
		getChunkTool(),
		addDocumentTool(),
		getJobTool(),
		listJobsTool(),
		cancelJobTool(),
		deleteDocumentTool(),
		listSourcesTool(),
		syncSourceTool(),
		deleteSourceTool(),
	}
}

// tool declares one tool in one place: its definition, the handler its
// calls run on and what that is built from, the limits of its input, its
// timeout setting, how its backend's failures map to the contract, and the
// dependency /readyz checks for it. H is the handler: a small value holding
// what the tool's calls need (a backend, a few settings), whose methods
// answer the calls.
type tool[H any, In scoped, Out any] struct {
	def *mcp.Tool
	// handler builds H from the server's dependencies and settings, and
	// reports whether the server offers the tool (its backend is there and
	// its setting on). H is built either way, so that a tool can be
	// described where it is not offered.
	handler func(e toolEnv) (H, bool)
	// describe adapts the definition's text to H, as search_docs's to
	// what the server's embedder can match; nil keeps def as it is.
	describe func(h H, def *mcp.Tool)
	// constrain publishes the input's limits (ranges, lengths, enums) in
	// the schema inferred from In, so clients see them and the SDK enforces
	// them before a handler runs. nil adds none.
	constrain func(h H, sc *jsonschema.Schema)
	// run answers one call: a method of H, as a method expression.
	run func(h H, ctx context.Context, in In) (*mcp.CallToolResult, Out, error)
	// more says how to get the rest of a result cut to the size limit
	// (MCP_tool_result_max_kb), for the note that ends its text.
	more string
	// timeout reads the tool's own timeout setting; nil, or a result of 0,
	// means MCP_tool_timeout_ms.
	timeout func(c config.Config) time.Duration
	// failures map the errors of the tool's backend to the contract's.
	failures []failure
	// probe names the dependency /readyz checks while the tool is offered,
	// and ping checks it; "" for none.
	probe string
	ping  func(h H, ctx context.Context) error
	// write marks a tool that changes documents: it needs a key that may
	// write (scopes), and belongs to the docs_write toolset.
	write bool
}

// declared is a tool declaration whatever its types.
type declared interface {
	name() string
	errorCases() []failure
	build(e toolEnv) toolDef
}

// toolEnv is what a tool's handler is built from.
type toolEnv struct {
	deps    Deps
	cfg     config.Config
	metrics *metrics
	log     *slog.Logger
}

// toolDef is a tool built for one Server.
type toolDef struct {
	// tool is the definition with its constrained input schema.
	tool    *mcp.Tool
	offered bool
	timeout time.Duration
	// add registers the tool on an MCP server.
	add func(m *mcp.Server)
	// conversationOf names the conversation a call's arguments target (the
	// default one for tools that take it), "" when they name none.
	conversationOf func(args json.RawMessage) string
	probe          string
	ping           func(ctx context.Context) error
	// write marks a tool that changes documents.
	write bool
}

func (t tool[H, In, Out]) name() string          { return t.def.Name }
func (t tool[H, In, Out]) errorCases() []failure { return t.failures }

func (t tool[H, In, Out]) build(e toolEnv) toolDef {
	h, offered := t.handler(e)
	sc, err := jsonschema.For[In](nil)
	if err != nil {
		// The input types are this package's own: a failure is a bug
		// every test catches.
		panic(fmt.Sprintf("input schema of %s: %v", t.def.Name, err))
	}
	if t.constrain != nil {
		t.constrain(h, sc)
	}
	def := *t.def
	if t.describe != nil {
		t.describe(h, &def)
	}
	def.InputSchema = sc
	d := toolDef{tool: &def, offered: offered, timeout: e.cfg.ToolTimeout, probe: t.probe, write: t.write}
	if t.timeout != nil {
		if to := t.timeout(e.cfg); to > 0 {
			d.timeout = to
		}
	}
	handle := func(ctx context.Context, in In) (*mcp.CallToolResult, Out, error) { return t.run(h, ctx, in) }
	capped := resultCap{limit: newResultLimit(e.cfg), more: t.more, log: e.log}
	d.add = func(m *mcp.Server) { mcp.AddTool(m, &def, typed(e.log, e.cfg.DefaultConversation, capped, handle)) }
	d.conversationOf = func(args json.RawMessage) string { return conversationOf[In](args, e.cfg.DefaultConversation) }
	if t.ping != nil {
		d.ping = func(ctx context.Context) error { return t.ping(h, ctx) }
	}
	return d
}

// conversationOf returns the conversation that args, the arguments of a
// call with input In, name: the default one for inputs that take it when
// they name none, "" for tools that name none or learn it from what they
// read. An argument of the wrong type leaves the others readable, so a call
// the schema refuses still names its conversation.
func conversationOf[In scoped](args json.RawMessage, defaultConv string) string {
	var in In
	_ = json.Unmarshal(args, &in)
	if d, ok := any(&in).(defaultable); ok && defaultConv != "" {
		d.setDefaultConversation(defaultConv)
	}
	if sc := in.scope(); !sc.perResult {
		return sc.conversation
	}
	return ""
}

// ToolNames returns the name of every tool mcpsearch has, offered or not.
func ToolNames() []string {
	var names []string
	for _, d := range catalogue() {
		names = append(names, d.name())
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

// toolSet is the tools one Server has: defs are those it offers.
type toolSet struct {
	defs   []toolDef
	byName map[string]toolDef
	// all are every tool, offered or not, for /readyz.
	all []toolDef
}

// buildTools builds every tool for e; describeAll offers them all, backend
// or not, so that a test can describe every tool mcpsearch has.
func buildTools(e toolEnv, describeAll bool) toolSet {
	ts := toolSet{byName: map[string]toolDef{}}
	for _, decl := range catalogue() {
		d := decl.build(e)
		ts.all = append(ts.all, d)
		if !d.offered && !describeAll {
			continue
		}
		ts.defs = append(ts.defs, d)
		ts.byName[d.tool.Name] = d
	}
	return ts
}

func (ts toolSet) lookup(name string) (toolDef, bool) {
	d, ok := ts.byName[name]
	return d, ok
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
