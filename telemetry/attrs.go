package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// SchemaURL is the version of the semantic conventions the spans follow:
// 1.41.0, the newest whose Go package defines the MCP attributes.
const SchemaURL = semconv.SchemaURL

// Attributes of the semantic conventions that mcpsearch's spans carry.
var (
	// MCP requests (the conventions for MCP servers).
	MCPMethodKey          = semconv.McpMethodNameKey
	MCPSessionKey         = semconv.McpSessionIDKey
	MCPProtocolVersionKey = semconv.McpProtocolVersionKey
	JSONRPCRequestIDKey   = semconv.JSONRPCRequestIDKey
	RPCStatusCodeKey      = semconv.RPCResponseStatusCodeKey
	GenAIToolKey          = semconv.GenAIToolNameKey
	GenAIOperationKey     = semconv.GenAIOperationNameKey
	NetworkTransportKey   = semconv.NetworkTransportKey
	NetworkProtocolKey    = semconv.NetworkProtocolNameKey

	// The embedder (the conventions for GenAI embeddings).
	GenAIProviderKey = semconv.GenAIProviderNameKey
	GenAIModelKey    = semconv.GenAIRequestModelKey

	// HTTP, on both sides.
	HTTPMethodKey   = semconv.HTTPRequestMethodKey
	HTTPRouteKey    = semconv.HTTPRouteKey
	HTTPStatusKey   = semconv.HTTPResponseStatusCodeKey
	HTTPBodySizeKey = semconv.HTTPResponseBodySizeKey
	ServerAddrKey   = semconv.ServerAddressKey
	ServerPortKey   = semconv.ServerPortKey
	URLSchemeKey    = semconv.URLSchemeKey

	ErrorTypeKey = semconv.ErrorTypeKey
)

// Attributes of mcpsearch's own, under the mcpsearch namespace.
const (
	// TransportKey is the transport a call came over: stdio, http, sse
	// or rest.
	TransportKey = attribute.Key("mcpsearch.transport")
	// OutcomeKey is how a call ended: ok, or the contract's error code
	// (RATE_LIMITED, TIMEOUT, ...), or protocol_error.
	OutcomeKey = attribute.Key("mcpsearch.outcome")
	// APIKeyNameKey is the name the operator gave the API key of a call
	// (never the key).
	APIKeyNameKey = attribute.Key("mcpsearch.api_key.name")
	// ConversationIDKey is the conversation a call touches, when the
	// operator allows its id in traces (MCP_trace_conversation_id).
	ConversationIDKey = attribute.Key("mcpsearch.conversation.id")
	// ConversationHashKey is the conversation a call touches, hashed
	// (Conversation).
	ConversationHashKey = attribute.Key("mcpsearch.conversation.hash")
	// QueryKey is the text a call searched for, when the operator allows
	// it (MCP_trace_query_text).
	QueryKey = attribute.Key("mcpsearch.query")
	// JobIDKey and JobKindKey name a job.
	JobIDKey   = attribute.Key("mcpsearch.job.id")
	JobKindKey = attribute.Key("mcpsearch.job.kind")
	// RateLimitAllowedKey, RateLimitStoreKey and RateLimitFallbackKey
	// describe a call's rate limit: whether it was let through, where
	// the buckets are (memory or postgres) and whether the store failed
	// to decide and the call was decided without it.
	RateLimitAllowedKey  = attribute.Key("mcpsearch.rate_limit.allowed")
	RateLimitStoreKey    = attribute.Key("mcpsearch.rate_limit.store")
	RateLimitFallbackKey = attribute.Key("mcpsearch.rate_limit.fallback")
	// InstanceKey is the SearXNG instance a search went to: its base URL
	// without credentials.
	InstanceKey = attribute.Key("mcpsearch.searxng.instance")
	// ResultsKey counts the results a search returned.
	ResultsKey = attribute.Key("mcpsearch.searxng.results")
	// CacheHitKey tells whether an answer came from a cache.
	CacheHitKey = attribute.Key("mcpsearch.cache.hit")
	// ContentTypeKey is the media type of a page or file read.
	ContentTypeKey = attribute.Key("mcpsearch.content_type")
	// FileBytesKey is the size of a file read.
	FileBytesKey = attribute.Key("mcpsearch.file.bytes")
	// TextCharsKey is the length of the text read from a page or file.
	TextCharsKey = attribute.Key("mcpsearch.text.chars")
	// ChunksKey counts the chunks a text was cut into.
	ChunksKey = attribute.Key("mcpsearch.chunks")
	// FilesKey counts the files of a batch.
	FilesKey = attribute.Key("mcpsearch.files")
	// TextsKey counts the texts given to the embedder.
	TextsKey = attribute.Key("mcpsearch.embed.texts")
	// RowsKey counts the rows of an audit write.
	RowsKey = attribute.Key("mcpsearch.audit.rows")
	// PagesKey counts the pages a search's reading tried; PagesReadKey
	// those read, PassagesKey the passages cut from them and returned.
	PagesKey     = attribute.Key("mcpsearch.research.pages")
	PagesReadKey = attribute.Key("mcpsearch.research.pages_read")
	PassagesKey  = attribute.Key("mcpsearch.research.passages")
)

// ErrorType is the error.type attribute.
func ErrorType(class string) attribute.KeyValue { return ErrorTypeKey.String(class) }

// ServerAddress is the server.address attribute.
func ServerAddress(host string) attribute.KeyValue { return ServerAddrKey.String(host) }
