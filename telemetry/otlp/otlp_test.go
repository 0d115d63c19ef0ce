package otlp

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     []string
		want    bool
		wantErr string
	}{
		{"nothing set", nil, false, ""},
		{"endpoint", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318"}, true, ""},
		{"traces endpoint", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://collector:4318/v1/traces"}, true, ""},
		{"blank endpoint", []string{"OTEL_EXPORTER_OTLP_ENDPOINT= "}, false, ""},
		{"exporter otlp without endpoint", []string{"OTEL_TRACES_EXPORTER=otlp"}, true, ""},
		{"exporter none", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "OTEL_TRACES_EXPORTER=none"}, false, ""},
		{"sdk disabled", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "OTEL_SDK_DISABLED=true"}, false, ""},
		{"console exporter", []string{"OTEL_TRACES_EXPORTER=console"}, false, "OTEL_TRACES_EXPORTER=console"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := enabled(newEnviron(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("enabled = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestSetup(t *testing.T) {
	ctx := context.Background()
	if p, err := Setup(ctx, Options{}); p != nil || err != nil {
		t.Fatalf("Setup without OTEL_* = %v, %v; want tracing off", p, err)
	}
	for _, protocol := range []string{"http/protobuf", "grpc", ""} {
		env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol}
		p, err := Setup(ctx, Options{Environ: env, Version: "test"})
		if err != nil || p == nil {
			t.Fatalf("protocol %q: Setup = %v, %v", protocol, p, err)
		}
		if p.TracerProvider() == nil {
			t.Fatal("no provider")
		}
		want := protocol
		if want == "" {
			want = "http/protobuf"
		}
		if got := p.Describe(); got[1] != want || got[3] != "127.0.0.1:4318" {
			t.Errorf("protocol %q: Describe() = %v", protocol, got)
		}
		// Nothing was traced: shutting down sends nothing.
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Setup(ctx, Options{Environ: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"}})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/json") {
		t.Fatalf("http/json: %v, want an error naming the variable", err)
	}
}

func TestEndpointHost(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "default",
		"http://collector:4318":                 "collector:4318",
		"https://user:token@collector:4318/x?y": "collector:4318",
		"collector:4317":                        "collector:4317",
	} {
		if got := endpointHost(in); got != want {
			t.Errorf("endpointHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// Spans of other libraries lose the text of their errors: their status
// keeps its code, their exception events go. mcpsearch's own keep their
// class.
func TestRedactingExporter(t *testing.T) {
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(redacting{mem}))
	ctx := context.Background()
	_, lib := tp.Tracer("github.com/exaring/otelpgx").Start(ctx, "SELECT")
	lib.RecordError(errors.New(`invalid input syntax for type uuid: "secret-argument"`))
	lib.SetStatus(codes.Error, `invalid input syntax for type uuid: "secret-argument"`)
	lib.AddEvent("kept")
	lib.End()
	_, own := tp.Tracer(telemetry.ScopeName).Start(ctx, "searxng search")
	telemetry.Fail(own, "timeout")
	own.End()
	spans := mem.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	if st := spans[0].Status; st.Code != codes.Error || st.Description != "" {
		t.Errorf("library span's status %+v, want an error without its text", st)
	}
	if ev := spans[0].Events; len(ev) != 1 || ev[0].Name != "kept" {
		t.Errorf("library span's events %+v, want the exception gone", ev)
	}
	if st := spans[1].Status; st.Code != codes.Error || st.Description != "timeout" {
		t.Errorf("own span's status %+v, want its class", st)
	}
}
