package embed

import (
	"fmt"
	"strings"
)

// Provider names accepted by Config.Provider.
const (
	ProviderLocal  = "local"
	ProviderOpenAI = "openai"
	ProviderOllama = "ollama"
)

// Config selects and configures an embedder from user settings. A setting the
// chosen provider cannot use is an error rather than silently ignored, except
// BatchSize, which local has no use for.
type Config struct {
	// Provider is "local" (the default), "openai" or "ollama".
	Provider string
	// Model is the remote model name; required for openai and ollama. For
	// local it may only repeat the local model name ("local-hash-v1-384").
	Model string
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
	switch provider {
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
		return nil, fmt.Errorf("%w: unknown provider %q (want %s, %s or %s)", ErrConfig, cfg.Provider, ProviderLocal, ProviderOpenAI, ProviderOllama)
	}
}
