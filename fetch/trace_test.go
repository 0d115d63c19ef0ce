package fetch

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// A page read under a traced call is a span with its host and whether the
// cache answered, the request below it with its status and bytes, and the
// extraction of its text; a refused address is a failed request.
func TestTracePageReads(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "Lighthouses keep ships off the rocks.")
	}))
	t.Cleanup(page.Close)
	allowed, err := New(Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	refusing, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, call := tp.Tracer("test").Start(context.Background(), "call")
	url := page.URL + "/private/path?token=secret"
	for range 2 {
		if _, err := allowed.Get(ctx, url); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := refusing.Get(ctx, url); err == nil {
		t.Fatal("loopback fetched without the allow-list")
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := allowed.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	call.End()

	spans := exp.GetSpans()
	var reads, gets, extracts []tracetest.SpanStub
	for _, s := range spans {
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "/private/path") || strings.Contains(v, "secret") {
				t.Errorf("span %q holds the URL's path or query: %s=%s", s.Name, kv.Key, v)
			}
		}
		switch s.Name {
		case "read page":
			reads = append(reads, s)
		case "GET":
			gets = append(gets, s)
		case "extract":
			extracts = append(extracts, s)
		}
	}
	if len(reads) != 3 || len(gets) != 3 || len(extracts) != 1 {
		t.Fatalf("%d reads, %d requests, %d extractions; want 3, 3 (the fetch, the refusal, Do) and 1", len(reads), len(gets), len(extracts))
	}
	first, cached, refused := value(reads[0]), value(reads[1]), value(reads[2])
	if first[telemetry.CacheHitKey] != "false" || cached[telemetry.CacheHitKey] != "true" || first[telemetry.ServerAddrKey] != "127.0.0.1" ||
		first[telemetry.TextCharsKey] == "" {
		t.Errorf("reads %v and %v", first, cached)
	}
	if refused[telemetry.ErrorTypeKey] != "blocked" || reads[2].Status.Code != codes.Error {
		t.Errorf("refused read %v %v, want a failure of class blocked", refused, reads[2].Status)
	}
	fetched := value(gets[0])
	if gets[0].Parent.SpanID() != reads[0].SpanContext.SpanID() || fetched[telemetry.HTTPStatusKey] != "200" ||
		fetched[telemetry.HTTPBodySizeKey] != "37" || fetched[telemetry.ContentTypeKey] != "text/plain" {
		t.Errorf("request %v", fetched)
	}
	if g := value(gets[1]); g[telemetry.ErrorTypeKey] != "blocked" {
		t.Errorf("refused request %v", g)
	}
	if g := value(gets[2]); gets[2].Parent.SpanID() != call.SpanContext().SpanID() || g[telemetry.HTTPStatusKey] != "200" || g[telemetry.HTTPBodySizeKey] != "37" {
		t.Errorf("Do's request %v, want its status and the bytes read before Close", g)
	}
	if extracts[0].Parent.SpanID() != reads[0].SpanContext.SpanID() {
		t.Error("extraction is not below the read")
	}
}

func value(s tracetest.SpanStub) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value.String()
	}
	return m
}
