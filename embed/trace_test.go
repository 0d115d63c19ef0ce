package embed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The embedder's call is a span with its provider, model and number of
// texts, never the texts or the key; a refusal is named by its status.
func TestTraceEmbedder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"message":"bad key"}}`))
	}))
	t.Cleanup(srv.Close)
	remote, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL, APIKey: "sk-secret-key", Model: "text-embedding-3-small", Dimensions: 3})
	if err != nil {
		t.Fatal(err)
	}
	local, err := NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, call := tp.Tracer("test").Start(context.Background(), "call")
	texts := []string{"private text one", "private text two"}
	if _, err := remote.Embed(ctx, texts); err == nil {
		t.Fatal("a refused key embedded")
	}
	if _, err := local.Embed(ctx, texts[:1]); err != nil {
		t.Fatal(err)
	}
	call.End()
	want := map[string]map[string]string{
		"embeddings text-embedding-3-small": {"gen_ai.provider.name": "openai", "gen_ai.request.model": "text-embedding-3-small",
			"mcpsearch.embed.texts": "2", "error.type": "401"},
		"embeddings " + local.Model(): {"gen_ai.provider.name": "local", "mcpsearch.embed.texts": "1", "gen_ai.operation.name": "embeddings"},
	}
	for _, s := range exp.GetSpans() {
		got := map[string]string{}
		for _, kv := range s.Attributes {
			got[string(kv.Key)] = kv.Value.String()
			if v := kv.Value.String(); strings.Contains(v, "private text") || strings.Contains(v, "sk-secret") {
				t.Errorf("span %q holds %s=%q", s.Name, kv.Key, v)
			}
		}
		w, ok := want[s.Name]
		if !ok {
			continue
		}
		delete(want, s.Name)
		for k, v := range w {
			if got[k] != v {
				t.Errorf("span %q: %s = %q, want %q", s.Name, k, got[k], v)
			}
		}
		if failed := s.Status.Code == codes.Error; failed != (w["error.type"] != "") || s.Parent.SpanID() != call.SpanContext().SpanID() {
			t.Errorf("span %q status %v under %v", s.Name, s.Status, s.Parent.SpanID())
		}
	}
	if len(want) != 0 {
		t.Errorf("no span for %v", want)
	}
}
