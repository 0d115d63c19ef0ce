package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func newProvider(t *testing.T, opts ...sdktrace.TracerProviderOption) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithSyncer(exp)}, opts...)...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// With no span in the context (tracing off), Start hands the context back
// and allocates nothing, nor does anything a package does with the span.
func TestStartWithoutParentAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := Start(ctx, "searxng search", trace.SpanKindClient)
		if c != ctx {
			t.Fatal("Start changed the context")
		}
		if span.IsRecording() {
			span.SetAttributes(ServerAddress("example.org"))
		}
		Fail(span, "timeout")
		span.End()
		c, span = StartEmbeddings(ctx, "openai", "text-embedding-3-small", 3, true)
		span.End()
		_ = c
		c, span = StartRoot(ctx, nil, "job", trace.SpanKindInternal)
		span.End()
		_ = c
		_ = Traceparent(ctx)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run with tracing off, want 0", allocs)
	}
}

// A span starts only under a parent that records: an unsampled call has
// no children, a sampled one has them in its trace.
func TestStartFollowsTheParent(t *testing.T) {
	tp, exp := newProvider(t, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	ctx, root := tp.Tracer("test").Start(context.Background(), "call")
	_, child := Start(ctx, "searxng search", trace.SpanKindClient)
	child.End()
	root.End()
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if spans[0].Name != "searxng search" || spans[0].Parent.SpanID() != root.SpanContext().SpanID() ||
		spans[0].SpanKind != trace.SpanKindClient || spans[0].InstrumentationScope.Name != ScopeName {
		t.Fatalf("child %+v, want a client span under the call in scope %s", spans[0], ScopeName)
	}

	exp.Reset()
	off, _ := newProvider(t, sdktrace.WithSampler(sdktrace.NeverSample()))
	ctx, root = off.Tracer("test").Start(context.Background(), "call")
	c, child := Start(ctx, "searxng search", trace.SpanKindClient)
	if c != ctx || child.IsRecording() {
		t.Fatal("a span started under a call that is not sampled")
	}
	child.End()
	root.End()
}

func TestStartRootLinks(t *testing.T) {
	tp, exp := newProvider(t)
	ctx, call := tp.Tracer("test").Start(context.Background(), "call")
	parent := Traceparent(ctx)
	call.End()
	if !strings.HasPrefix(parent, "00-"+call.SpanContext().TraceID().String()+"-") {
		t.Fatalf("traceparent %q does not name the call's trace", parent)
	}
	link, ok := LinkTo(parent)
	if !ok {
		t.Fatalf("LinkTo(%q) found no span", parent)
	}
	_, job := StartRoot(ctx, tp, "job crawl", trace.SpanKindInternal, link)
	job.End()
	got := exp.GetSpans()[1]
	if got.Parent.IsValid() || got.SpanContext.TraceID() == call.SpanContext().TraceID() {
		t.Fatal("the job's span is in the call's trace, want one of its own")
	}
	if len(got.Links) != 1 || got.Links[0].SpanContext.SpanID() != call.SpanContext().SpanID() {
		t.Fatalf("links %+v, want the call", got.Links)
	}
	for _, bad := range []string{"", "nonsense", "00-00000000000000000000000000000000-0000000000000000-01"} {
		if _, ok := LinkTo(bad); ok {
			t.Errorf("LinkTo(%q) found a span", bad)
		}
	}
}

func TestConversationIsHashedUnlessAllowed(t *testing.T) {
	id := "conv-4711"
	if kv := Conversation(id, true); kv.Key != ConversationIDKey || kv.Value.AsString() != id {
		t.Fatalf("allowed: %v, want the id", kv)
	}
	kv := Conversation(id, false)
	if kv.Key != ConversationHashKey || strings.Contains(kv.Value.AsString(), id) || len(kv.Value.AsString()) != 16 {
		t.Fatalf("hashed: %v, want 16 hex digits without the id", kv)
	}
	if Conversation(id, false) != kv || Conversation("conv-4712", false) == kv {
		t.Fatal("the hash does not tell conversations apart, or changes")
	}
}

func TestHostDropsPathAndQuery(t *testing.T) {
	for raw, want := range map[string]string{
		"https://user:secret@example.org:8443/search?q=private#x": "example.org",
		"http://[::1]:8080/":     "::1",
		"::not a url":            "",
		"https://example.org/a?": "example.org",
	} {
		if got := Host(raw); got != want {
			t.Errorf("Host(%q) = %q, want %q", raw, got, want)
		}
	}
}

// A line logged with a sampled span's context names the span; others are
// untouched.
func TestLogHandlerNamesTheTrace(t *testing.T) {
	tp, _ := newProvider(t)
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	log.InfoContext(ctx, "tool call", "tool", "web_search")
	span.End()
	log.Info("no call")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	var traced, plain map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &traced); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &plain); err != nil {
		t.Fatal(err)
	}
	if traced["trace_id"] != span.SpanContext().TraceID().String() || traced["span_id"] != span.SpanContext().SpanID().String() ||
		traced["component"] != "test" {
		t.Fatalf("traced line %v, want the span's trace_id and span_id", traced)
	}
	if _, ok := plain["trace_id"]; ok {
		t.Fatalf("line without a span names one: %v", plain)
	}
}
