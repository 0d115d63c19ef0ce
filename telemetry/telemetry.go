// Package telemetry is how mcpsearch's packages trace their work with
// OpenTelemetry. It depends on the OpenTelemetry API alone; the SDK and the
// exporter are set up by telemetry/otlp, from the standard OTEL_*
// environment variables, when the operator turns tracing on.
//
// A span starts in two ways. Where a trace begins (an MCP request, an HTTP
// request of the REST facade or the upload API, a job, an audit write, a
// batch of files being processed) its owner holds the TracerProvider it was
// given, nil when tracing is off, and calls StartRoot or the provider's
// tracer. Everywhere else a package calls Start, which makes a child of the
// span in the context when that span records and does nothing otherwise:
// with tracing off no span is ever in a context, so Start returns the
// context it was given and allocates nothing, and no package needs to know
// whether tracing is on. Attributes are set only when the span records:
//
//	ctx, span := telemetry.Start(ctx, "searxng search", trace.SpanKindClient)
//	defer span.End()
//	if span.IsRecording() {
//		span.SetAttributes(telemetry.ServerAddress(host))
//	}
//
// Work done in parallel goes under one parent, each piece a child of it:
// the pages a tool reads at once, for example, are read with the context
// of one span, and fetch.Client.Get makes each page's "read page" span
// (host, cache, status, bytes, extraction) below it:
//
//	ctx, span := telemetry.Start(ctx, "read pages", trace.SpanKindInternal)
//	defer span.End()
//	for i, u := range urls {
//		wg.Go(func() { docs[i], errs[i] = fetcher.Get(ctx, u) })
//	}
//
// Nothing secret goes into an attribute: no API key, token, header value,
// document or query text, URL path or query (a page is named by its host),
// and no error message (they can quote all of these): a failure is named by
// its class with Fail.
package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of mcpsearch's spans.
const ScopeName = "github.com/mcpsearch/mcpsearch"

// Start starts a span named name as a child of the span in ctx, when that
// span records. Otherwise it returns ctx itself and the span of ctx, which
// does not record: calling End or setting attributes on it does nothing,
// and nothing is allocated.
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(ScopeName).Start(ctx, name, trace.WithSpanKind(kind))
}

// StartRoot starts a span named name that begins a trace of its own (a
// job, a background write), linked to the spans of links. With a nil tp
// (tracing off) it returns ctx and a span that does not record.
func StartRoot(ctx context.Context, tp trace.TracerProvider, name string, kind trace.SpanKind, links ...trace.Link) (context.Context, trace.Span) {
	if tp == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tp.Tracer(ScopeName).Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(kind), trace.WithLinks(links...))
}

// Fail marks span as failed, naming the failure by class, a short word
// such as "timeout" or "unreachable" (the error.type attribute). The
// error's own text is not recorded: messages can quote URLs, queries or
// what a server answered.
func Fail(span trace.Span, class string) {
	if !span.IsRecording() {
		return
	}
	if class == "" {
		class = "_OTHER"
	}
	span.SetStatus(codes.Error, class)
	span.SetAttributes(ErrorType(class))
}

// Traceparent returns the W3C traceparent of the span in ctx when it is
// sampled, for work that continues elsewhere (a job taken up later, maybe
// by another process) to link back to it; "" otherwise.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// LinkTo returns a link to the span a traceparent (from Traceparent)
// names; ok is false when it names none.
func LinkTo(traceparent string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// Host is the host of a URL, for a span about a page or a server: the path
// and query, which can hold search terms or tokens, are never recorded.
// "" when rawURL does not parse.
func Host(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Conversation names a conversation in a span: its id itself when the
// operator allows it (MCP_trace_conversation_id), else the first 16 hex
// digits of its SHA-256, which tells a conversation's calls apart and
// groups them without storing the id.
func Conversation(id string, plain bool) attribute.KeyValue {
	if plain {
		return ConversationIDKey.String(id)
	}
	sum := sha256.Sum256([]byte(id))
	return ConversationHashKey.String(hex.EncodeToString(sum[:8]))
}

// StartEmbeddings starts the span of one call of an embedder, as the
// conventions for GenAI embeddings name it ("embeddings <model>"): its
// provider, its model and how many texts it embeds, never the texts.
// remote marks a provider reached over the network.
func StartEmbeddings(ctx context.Context, provider, model string, texts int, remote bool) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		// Before the name is built, which would allocate.
		return ctx, parent
	}
	kind := trace.SpanKindInternal
	if remote {
		kind = trace.SpanKindClient
	}
	ctx, span := Start(ctx, "embeddings "+model, kind)
	span.SetAttributes(GenAIOperationKey.String("embeddings"), GenAIProviderKey.String(provider), GenAIModelKey.String(model),
		TextsKey.Int(texts))
	return ctx, span
}

// End ends span, failed with class when err is not nil.
func End(span trace.Span, err error, class func(error) string) {
	if err != nil && span.IsRecording() {
		Fail(span, class(err))
	}
	span.End()
}
