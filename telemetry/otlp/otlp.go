// Package otlp sets up the OpenTelemetry SDK that exports mcpsearch's
// traces over OTLP, from the standard environment variables. Tracing is off
// unless the environment names where traces go: OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (or OTEL_TRACES_EXPORTER=otlp, which
// sends them to the OTLP default, localhost). What the SDK and its exporters
// read themselves they read from the process environment: the endpoint, its
// headers, TLS and timeout settings, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
// the span limits and the batch processor's settings. This package reads
// only what chooses the exporter: whether tracing is on, and
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
// (http/protobuf, the default, or grpc).
package otlp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options say what Setup needs besides the environment.
type Options struct {
	// Environ is the process environment, as os.Environ gives it: it
	// decides whether tracing is on and over which protocol. The SDK
	// reads the rest of OTEL_* from the process environment itself.
	Environ []string
	// Version is mcpsearch's version, the service.version of every span.
	Version string
}

// Provider is the SDK exporting traces. Shutdown flushes it.
type Provider struct {
	tp       *sdktrace.TracerProvider
	protocol string
	endpoint string
}

// Setup returns the provider the environment asks for, or nil when it
// asks for none (tracing off). An unknown protocol or exporter is an error
// naming its variable.
func Setup(ctx context.Context, o Options) (*Provider, error) {
	env := newEnviron(o.Environ)
	on, err := enabled(env)
	if err != nil || !on {
		return nil, err
	}
	protocol := strings.ToLower(env.first("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"))
	var exp sdktrace.SpanExporter
	switch protocol {
	case "", "http/protobuf":
		protocol = "http/protobuf"
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: traces are exported with http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// The service is named mcpsearch unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise: the environment's
	// detector comes last and wins.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "mcpsearch"), attribute.String("service.version", o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (parent-based, always on,
	// when unset), read by the SDK.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(redacting{exp}), sdktrace.WithResource(res))
	return &Provider{tp: tp, protocol: protocol, endpoint: env.first("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")}, nil
}

// enabled reports whether the environment turns tracing on.
func enabled(env environ) (bool, error) {
	if strings.EqualFold(env.get("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exporter := strings.ToLower(env.get("OTEL_TRACES_EXPORTER")); exporter {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: traces are exported with otlp (or none)", exporter)
	}
	return env.first("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") != "", nil
}

// TracerProvider is the provider spans are started from.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tp }

// Describe says where traces go, for the start-up log line: the protocol
// and the endpoint's host, without its path or credentials.
func (p *Provider) Describe() []any {
	return []any{"protocol", p.protocol, "endpoint", endpointHost(p.endpoint)}
}

// Shutdown exports the spans not yet sent and stops the provider; ctx
// bounds the wait.
func (p *Provider) Shutdown(ctx context.Context) error {
	if err := p.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// endpointHost is an endpoint as host:port, or "default" when none is set.
func endpointHost(endpoint string) string {
	if endpoint == "" {
		return "default"
	}
	rest := endpoint
	if _, after, ok := strings.Cut(rest, "://"); ok {
		rest = after
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return rest
}

// environ is a process environment by name.
type environ map[string]string

func newEnviron(kv []string) environ {
	env := environ{}
	for _, e := range kv {
		if k, v, ok := strings.Cut(e, "="); ok {
			env[k] = v
		}
	}
	return env
}

func (e environ) get(name string) string { return strings.TrimSpace(e[name]) }

// first is the first of names that is set.
func (e environ) first(names ...string) string {
	for _, n := range names {
		if v := e.get(n); v != "" {
			return v
		}
	}
	return ""
}
