// Package embed turns text into vectors. It knows nothing of Postgres or MCP:
// the docs package stores what an Embedder returns.
package embed

import "context"

// Embedder turns texts into fixed-size vectors.
//
// Model names the model and its settings so that vectors of two models are
// never compared: the docs store keys every stored vector by Model().
type Embedder interface {
	// Model is a stable name such as "local-hash-v1-384" or "openai/text-embedding-3-small".
	Model() string
	// Dimensions is the length of every vector Embed returns.
	Dimensions() int
	// Embed returns one vector per text, in order. Implementations batch
	// internally; callers may pass any number of texts.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Lexical is implemented by embedders whose vectors are built from a text's
// words and word pieces instead of being learnt from meaning, such as Local:
// a passage that says the same in other words scores low. What describes
// search to its users (the search_docs tool) asks Semantic.
type Lexical interface {
	Embedder
	// Lexical reports whether the vectors capture only words and word
	// pieces.
	Lexical() bool
}

// Semantic reports whether e's vectors capture meaning, so that a
// paraphrase or a synonym of a passage's words finds it: true for trained
// models (model2vec, models behind an OpenAI-compatible or Ollama API),
// false for an embedder that says it is Lexical.
func Semantic(e Embedder) bool {
	l, ok := e.(Lexical)
	return !ok || !l.Lexical()
}
