package otlp

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// redacting exports spans without what a library instrumented by others
// (pgx's tracer) may have put in them from an error's text: PostgreSQL's
// messages can quote a statement's arguments ("invalid input syntax for
// type uuid: ..."). Such spans keep their error status and error class
// attributes (the SQLSTATE), and lose the status's description and their
// exception events. mcpsearch's own spans describe a failure by its class
// alone (telemetry.Fail) and record no exception.
type redacting struct{ sdktrace.SpanExporter }

func (r redacting) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = redactedSpan{s}
	}
	return r.SpanExporter.ExportSpans(ctx, out)
}

type redactedSpan struct{ sdktrace.ReadOnlySpan }

func (s redactedSpan) Status() sdktrace.Status {
	st := s.ReadOnlySpan.Status()
	if s.InstrumentationScope().Name != telemetry.ScopeName {
		st.Description = ""
	}
	return st
}

func (s redactedSpan) Events() []sdktrace.Event {
	events := s.ReadOnlySpan.Events()
	kept := events[:0:0]
	for _, e := range events {
		if e.Name != "exception" {
			kept = append(kept, e)
		}
	}
	return kept
}
