package server

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// call is what the server knows of one tool call, decoded once and carried
// in the context from the middleware through the tool handler and back: rate
// limiting, the scope check, logs, metrics, audit and the X-RateLimit-*
// headers all read it instead of parsing the request again.
type call struct {
	Tool      string
	Transport string
	Identity  identity
	Session   string
	RequestID string
	Client    clientInfo
	Start     time.Time
	// Args are the arguments as the client sent them, for the audit.
	Args json.RawMessage

	mu sync.Mutex
	// conversation is the conversation the call touches: the one its
	// arguments name, known before it runs, refused or not (for get_chunk,
	// once the chunk is read).
	conversation string
	// ran is set when the typed handler is reached: arguments that never
	// reach it were refused by the input schema.
	ran bool
	// failure is the contract error the call ended with; nil on success.
	failure *ToolError
	// result is the structured content of a successful call.
	result any
	// job is the ingestion job the call started or touched.
	job string
	// limit is the caller's bucket of the tool once the rate limit decided
	// the call; limited is false before that or when the tool has no limit.
	limit   limitState
	limited bool
}

// clientInfo names the client program, from initialize or the request's
// _meta.
type clientInfo struct {
	Name, Version string
}

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callFrom returns the call being handled; a zero call outside a tool call,
// so that handlers can be tested on their own.
func callFrom(ctx context.Context) *call {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		return c
	}
	return &call{}
}

func (c *call) setConversation(conv string) {
	c.mu.Lock()
	c.conversation = conv
	c.mu.Unlock()
}

// setJob records the job the call started or touched, for the audit.
func (c *call) setJob(id string) {
	c.mu.Lock()
	c.job = id
	c.mu.Unlock()
}

func (c *call) setRan() {
	c.mu.Lock()
	c.ran = true
	c.mu.Unlock()
}

func (c *call) fail(te *ToolError) {
	c.mu.Lock()
	c.failure = te
	c.mu.Unlock()
}

// setLimit records the caller's bucket as the rate limit left it.
func (c *call) setLimit(st limitState) {
	c.mu.Lock()
	c.limit, c.limited = st, true
	c.mu.Unlock()
}

// limitState returns the caller's bucket as the rate limit left it; ok is
// false when the call was not limited.
func (c *call) limitState() (limitState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit, c.limited
}

func (c *call) succeed(result any) {
	c.mu.Lock()
	c.result = result
	c.mu.Unlock()
}

// outcome is a snapshot of how the call ended.
type outcome struct {
	conversation string
	ran          bool
	failure      *ToolError
	result       any
	job          string
}

func (c *call) outcome() outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return outcome{c.conversation, c.ran, c.failure, c.result, c.job}
}

// scope is how a tool's input names the conversation the call touches, so
// that a key limited to some conversations is checked before any tool runs.
// Every tool input declares it: a new tool cannot skip the check by naming
// its argument differently.
type scope struct {
	// conversation is the conversation the input names; "" with
	// perResult or none.
	conversation string
	// perResult marks tools that learn the conversation from what they
	// read (get_chunk); the handler checks it with allowConversation.
	perResult bool
}

// scoped is implemented by every tool input.
type scoped interface {
	scope() scope
}

// defaultable is implemented by inputs whose conversation may be left out
// when the server has a default conversation.
type defaultable interface {
	setDefaultConversation(id string)
}

// noConversation is the scope of tools that touch no conversation.
func noConversation() scope { return scope{} }

// inConversation is the scope of a tool that names its conversation.
func inConversation(conv string) scope { return scope{conversation: conv} }

// allowConversation records that the call touches conv and reports whether
// its caller may. Tools whose scope is perResult call it once they know.
func allowConversation(ctx context.Context, conv string) error {
	callFrom(ctx).setConversation(conv)
	if !identityFrom(ctx).allows(conv) {
		return errForbiddenConversation
	}
	return nil
}

// connIDs names the connections the SDK gives no id of their own (stdio,
// legacy SSE), so that every call's log line and audit row says which
// connection made it. Entries go when their session is collected.
type connIDs struct {
	mu sync.Mutex
	m  map[weak.Pointer[mcp.ServerSession]]string
}

// of returns the id of ss: the SDK's session id where there is one, else
// one made for the connection on its first call.
func (c *connIDs) of(ss *mcp.ServerSession) string {
	if id := ss.ID(); id != "" {
		return id
	}
	k := weak.Make(ss)
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.m[k]; ok {
		return id
	}
	if c.m == nil {
		c.m = map[weak.Pointer[mcp.ServerSession]]string{}
	}
	id := "conn-" + newRequestID()
	c.m[k] = id
	runtime.AddCleanup(ss, func(k weak.Pointer[mcp.ServerSession]) {
		c.mu.Lock()
		delete(c.m, k)
		c.mu.Unlock()
	}, k)
	return id
}
