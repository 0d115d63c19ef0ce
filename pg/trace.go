package pg

import (
	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// NewTracer returns the tracer of statements of tp, for WithTracer or a
// pool's ConnConfig.Tracer: a span per statement, batch, COPY, connection
// and wait for a pooled connection, each a child of the span of the
// statement's context when that span records (a call, a job), so that
// background work outside a trace makes none. Spans carry the database's
// address, name and user and, when sqlText is set, the statement's text
// (with its placeholders: arguments are never recorded). With a nil tp
// (tracing off) it returns nil.
func NewTracer(tp trace.TracerProvider, sqlText bool) pgx.QueryTracer {
	if tp == nil {
		return nil
	}
	opts := []otelpgx.Option{
		otelpgx.WithTracerProvider(tp),
		// Statements are counted in Prometheus's metrics already.
		otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
	}
	if !sqlText {
		opts = append(opts, otelpgx.WithDisableSQLStatementInAttributes())
	}
	return otelpgx.NewTracer(opts...)
}
