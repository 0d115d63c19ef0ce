package fetch

import (
	"context"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// startRequest starts the span of one request to a page's server, under
// the span of the call that reads it (none outside a traced call). It
// names the server by its host: the path and query of a URL can hold what
// a trace must not.
func startRequest(ctx context.Context, method string, u *url.URL) (context.Context, trace.Span) {
	ctx, span := telemetry.Start(ctx, method, trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(telemetry.HTTPMethodKey.String(method), telemetry.ServerAddress(u.Hostname()),
			telemetry.URLSchemeKey.String(u.Scheme))
		if p, err := strconv.Atoi(u.Port()); err == nil {
			span.SetAttributes(telemetry.ServerPortKey.Int(p))
		}
	}
	return ctx, span
}

// endRequest ends the span of a request: the status the server answered,
// the bytes of the body read and its type, or the class of the failure.
func endRequest(span trace.Span, status int, res *Resource, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if status != 0 {
		span.SetAttributes(telemetry.HTTPStatusKey.Int(status))
	}
	if res != nil {
		span.SetAttributes(telemetry.HTTPBodySizeKey.Int(len(res.Body)), telemetry.ContentTypeKey.String(res.ContentType))
	}
	if err != nil {
		telemetry.Fail(span, errorClass(err))
	}
}

// errorClass names the class of a failure to read a page, for its span.
func errorClass(err error) string {
	class, _ := Describe(err)
	return class
}
