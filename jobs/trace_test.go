package jobs

import (
	"context"
	"reflect"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// A job is a trace of its own, linked to the call that started it, which
// the worker that takes it up finds in the database.
func TestJobTraceLinksToItsCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	emb := newGate(t)
	emb.release()
	p := &pages{body: map[string]string{"https://example.test/a.txt": "The page about lighthouses."}}
	e := newEnv(t, emb, Options{Fetch: p, Tracer: tp})

	ctx, call := tp.Tracer("test").Start(context.Background(), "tools/call add_document")
	traced, err := e.r.AddURL(ctx, "c1", "https://example.test/a.txt", "k")
	call.End()
	if err != nil {
		t.Fatal(err)
	}
	untraced, err := e.r.AddURL(context.Background(), "c1", "https://example.test/a.txt", "k")
	if err != nil {
		t.Fatal(err)
	}
	var inputs []Input
	for _, id := range []string{traced.ID, untraced.ID} {
		inputs = append(inputs, waitJob(t, e.r.Store(), id, 30*time.Second, ended).Input)
	}
	// The link is kept beside what the job was asked, not shown with it.
	if !reflect.DeepEqual(inputs[0], inputs[1]) {
		t.Errorf("the traced job's input %+v differs from the untraced one's %+v", inputs[0], inputs[1])
	}
	spans := waitSpans(t, exp, "job "+KindURL, 2)
	for _, s := range spans {
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if s.Parent.IsValid() || s.SpanContext.TraceID() == call.SpanContext().TraceID() {
			t.Errorf("job span %+v is in another trace, want one of its own", s)
		}
		switch attrs[string(telemetry.JobIDKey)] {
		case traced.ID:
			if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != call.SpanContext().SpanID() {
				t.Errorf("traced job's links %+v, want the call", s.Links)
			}
		case untraced.ID:
			if len(s.Links) != 0 {
				t.Errorf("untraced job's links %+v, want none", s.Links)
			}
		default:
			t.Errorf("job span of no job: %v", attrs)
		}
		if attrs[string(telemetry.JobKindKey)] != KindURL || s.SpanKind != trace.SpanKindInternal {
			t.Errorf("job span %v", attrs)
		}
	}
}

// waitSpans waits for n spans named name, which end once their worker is
// done with the job.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, name string, n int) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var found tracetest.SpanStubs
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				found = append(found, s)
			}
		}
		if len(found) >= n {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans named %q, want %d", len(found), name, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
