package pg

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// Statements are spans below the span of their context, when it records,
// and none otherwise; their text only when asked, their arguments never.
func TestTracer(t *testing.T) {
	url := pgtest.NewDatabase(t)
	if NewTracer(nil, true) != nil {
		t.Fatal("a tracer without a provider")
	}
	for _, sqlText := range []bool{false, true} {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		pool, err := Open(context.Background(), url, WithTracer(NewTracer(tp, sqlText)))
		if err != nil {
			t.Fatal(err)
		}
		const arg = "argument-7f3e"
		var got string
		if err := pool.QueryRow(context.Background(), "SELECT $1::text", arg).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if n := len(exp.GetSpans()); n != 0 {
			t.Fatalf("%d spans of a statement outside a trace", n)
		}
		ctx, call := tp.Tracer("test").Start(context.Background(), "call")
		if err := pool.QueryRow(ctx, "SELECT $1::text", arg).Scan(&got); err != nil {
			t.Fatal(err)
		}
		call.End()
		pool.Close()
		var stmt *tracetest.SpanStub
		for _, s := range exp.GetSpans() {
			// The statement, not the preparation of it below.
			if s.Name == "SELECT" && s.Parent.SpanID() == call.SpanContext().SpanID() {
				stmt = &s
			}
			for _, kv := range s.Attributes {
				if strings.Contains(kv.Value.String(), arg) {
					t.Errorf("span %q holds the statement's argument in %s", s.Name, kv.Key)
				}
			}
		}
		if stmt == nil {
			t.Fatalf("sql text %v: no statement span below the call: %v", sqlText, exp.GetSpans())
		}
		text := ""
		for _, kv := range stmt.Attributes {
			if kv.Key == "db.query.text" {
				text = kv.Value.AsString()
			}
		}
		if want := map[bool]string{true: "SELECT $1::text"}[sqlText]; text != want {
			t.Errorf("sql text %v: db.query.text = %q, want %q", sqlText, text, want)
		}
		_ = tp.Shutdown(context.Background())
	}
}
