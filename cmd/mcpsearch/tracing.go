package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/telemetry"
	"github.com/mcpsearch/mcpsearch/telemetry/otlp"
)

// tracingFlush bounds the export of the spans left when serve stops.
const tracingFlush = 5 * time.Second

// startTracing sets up tracing as the standard OTEL_* environment asks
// (telemetry/otlp): off, it returns a nil provider and log as it is. On, it
// returns the provider, log with every line of a traced call carrying its
// trace_id and span_id, and stop, which exports the spans left.
func startTracing(ctx context.Context, env *environment, log *slog.Logger) (trace.TracerProvider, *slog.Logger, func(), error) {
	p, err := otlp.Setup(ctx, otlp.Options{Environ: env.environ, Version: version})
	if err != nil {
		return nil, log, nil, usageError{err}
	}
	if p == nil {
		return nil, log, func() {}, nil
	}
	log = slog.New(telemetry.LogHandler(log.Handler()))
	// The SDK reports what it could not export through its one handler.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "error", err) }))
	log.Info("tracing on", p.Describe()...)
	return p.TracerProvider(), log, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlush)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans not exported at shutdown", "error", err)
		}
	}, nil
}
