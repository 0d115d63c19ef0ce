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
