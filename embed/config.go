package embed

import (
	"fmt"
	"strings"

	"github.com/mcpsearch/mcpsearch/embed/model2vec"
)

// Provider names accepted by Config.Provider.
const (
	ProviderLocal     = "local"
	ProviderOpenAI    = "openai"
	ProviderOllama    = "ollama"
	ProviderModel2Vec = "model2vec"
)

// Config selects and configures an embedder from user settings. A setting the
// chosen provider cannot use is an error rather than silently ignored, except
// BatchSize, which local has no use for.
type Config struct {
	// Provider is "local" (the default), "openai", "ollama" or "model2vec".
	Provider string
	// Model is the remote model name; required for openai and ollama. For
	// local it may only repeat the local model name ("local-hash-v1-384").
	// For model2vec it is a catalogue name (model2vec.Catalogue) or the
	// name of a folder in ModelsDir; empty means model2vec.DefaultModel.
	Model string
	// ModelDir is a model2vec model folder to load as it is, such as one
	// copied by hand to a machine without network access. Only model2vec
	// takes it.
	ModelDir string
	// ModelsDir is the folder `mcpsearch models pull` installs model2vec
	// models into, one subfolder per model. Other providers ignore it, so
	// that it can always hold its default.
	ModelsDir string
	// BaseURL is the server root for openai and ollama; empty means the
	// provider's default.
	BaseURL string
	// APIKey is the bearer token for openai (and for an ollama behind an
	// authenticating proxy).
	APIKey string
	// Dimensions is the vector size: for local 0 means 384; for remote
	// providers 0 means learnt from the server.
	Dimensions int
	// BatchSize is the most texts per request for remote providers; 0 means 64.
	BatchSize int
	// SendDimensions asks an openai model for vectors of Dimensions (see
	// OpenAIConfig.SendDimensions).
	SendDimensions bool
}

// New returns the embedder cfg describes. Errors wrap ErrConfig and name the
// setting that is missing or wrong.
func New(cfg Config) (Embedder, error) {
	provider := strings.ToLower(strings.TrimSpace(cfg.Provider))
	if provider == "" {
		provider = ProviderLocal
	}
	if cfg.ModelDir != "" && provider != ProviderModel2Vec {
		return nil, fmt.Errorf("%w: a model folder is for provider %s only, not %s", ErrConfig, ProviderModel2Vec, provider)
	}
	switch provider {
	case ProviderModel2Vec:
		if cfg.BaseURL != "" || cfg.APIKey != "" || cfg.SendDimensions {
			return nil, fmt.Errorf("%w: provider model2vec takes no base URL, API key or send-dimensions", ErrConfig)
		}
		m, err := model2vec.Open(model2vec.OpenConfig{
			Model: cfg.Model,
			Dir:   cfg.ModelDir,
			Store: model2vec.Store{Dir: cfg.ModelsDir},
		})
		if err != nil {
			// A configured model that cannot be loaded stops the
			// start; it never falls back to another embedder.
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if cfg.Dimensions != 0 && cfg.Dimensions != m.Dimensions() {
			return nil, fmt.Errorf("%w: model %s has %d dimensions, not %d (leave the dimensions at 0)", ErrConfig, m.Model(), m.Dimensions(), cfg.Dimensions)
		}
		return m, nil
	case ProviderLocal:
		if cfg.BaseURL != "" || cfg.APIKey != "" || cfg.SendDimensions {
			return nil, fmt.Errorf("%w: provider local takes no base URL, API key or send-dimensions", ErrConfig)
		}
		l, err := NewLocal(cfg.Dimensions)
		if err != nil {
			return nil, err
		}
		if m := strings.TrimSpace(cfg.Model); m != "" && m != l.Model() {
			return nil, fmt.Errorf("%w: provider local has the single model %q for these dimensions, not %q (leave the model empty)", ErrConfig, l.Model(), m)
		}
		return l, nil
	case ProviderOpenAI:
		return NewOpenAI(OpenAIConfig{
			BaseURL:        cfg.BaseURL,
			APIKey:         cfg.APIKey,
			Model:          cfg.Model,
			Dimensions:     cfg.Dimensions,
			SendDimensions: cfg.SendDimensions,
			BatchSize:      cfg.BatchSize,
		})
	case ProviderOllama:
		if cfg.SendDimensions {
			return nil, fmt.Errorf("%w: provider ollama takes no send-dimensions", ErrConfig)
		}
		return NewOllama(OllamaConfig{
			BaseURL:    cfg.BaseURL,
			APIKey:     cfg.APIKey,
			Model:      cfg.Model,
			Dimensions: cfg.Dimensions,
			BatchSize:  cfg.BatchSize,
		})
	default:
		return nil, fmt.Errorf("%w: unknown provider %q (want %s, %s, %s or %s)", ErrConfig, cfg.Provider, ProviderLocal, ProviderOpenAI, ProviderOllama, ProviderModel2Vec)
	}
}
