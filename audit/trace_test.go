package audit

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// A batch holding sampled calls is written under a span of its own,
// linked to them; a batch of calls nobody traced makes no span.
func TestWriteIsTracedForSampledCalls(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	pool := poolVia(t, dbURL, hostOf(t, dbURL))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	// A long flush interval: each batch is written by Close or a full
	// batch, so the two batches stay apart.
	w := NewWriter(pool, Options{BatchSize: 2, FlushInterval: time.Hour, Tracer: tp})
	_, untraced := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("t").Start(context.Background(), "call")
	_, traced := tp.Tracer("t").Start(context.Background(), "call")
	traced.End()
	for range 2 {
		w.Record(Entry{ToolName: "web_search", Trace: untraced.SpanContext()})
	}
	waitFor(t, func() bool { return w.Stats().Written == 2 })
	w.Record(Entry{ToolName: "web_search", Trace: traced.SpanContext()})
	w.Record(Entry{ToolName: "web_search"})
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var writes []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "audit write" {
			writes = append(writes, s)
		}
	}
	if len(writes) != 1 {
		t.Fatalf("%d audit write spans, want 1 (the batch with a sampled call)", len(writes))
	}
	s := writes[0]
	if s.Parent.IsValid() || len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != traced.SpanContext().SpanID() {
		t.Fatalf("audit write %+v, want a root linked to the sampled call", s)
	}
}
