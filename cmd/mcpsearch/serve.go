package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/searxng"
	"github.com/mcpsearch/mcpsearch/server"
)

// loadConfig reads the environment, then the command's flags, and
// validates the result. Flags override the environment.
func loadConfig(env *environment, name string, args []string, extra func(fs *flag.FlagSet)) (config.Config, *flag.FlagSet, error) {
	cfg := config.Default()
	if err := cfg.LoadEnv(env.lookup); err != nil {
		return cfg, nil, usageError{err}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	cfg.RegisterFlags(fs)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return cfg, fs, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fs, usageError{fmt.Errorf("invalid configuration:\n%w", err)}
	}
	return cfg, fs, nil
}

func runServe(ctx context.Context, env *environment, args []string) error {
	cfg, _, err := loadConfig(env, "serve", args, nil)
	if err != nil {
		return err
	}
	log := newLogger(env.stderr, cfg.LogFormat, cfg.LogLevel)
	var deps server.Deps
	if cfg.WebSearchEnabled {
		c, err := searxng.New(cfg.SearXNGURL, searxng.WithTimeout(cfg.WebSearchTimeout), searxng.WithUserAgent("mcpsearch/"+version))
		if err != nil {
			return fmt.Errorf("MCP_web_search_searxng_url: %w", err)
		}
		deps.Search = c
	}
	srv := server.New(cfg, deps, log, version)
	log.Info("mcpsearch starting", "version", version, "transports", strings.Join(cfg.Transports, ","), "web_search", deps.Search != nil)
	if cfg.Serves("stdio") {
		return srv.ServeStdio(ctx)
	}
	return srv.ServeHTTP(ctx, nil)
}

func runConfig(_ context.Context, env *environment, args []string) error {
	cfg, _, err := loadConfig(env, "config", args, nil)
	if err != nil {
		return err
	}
	for _, kv := range cfg.Describe() {
		fmt.Fprintf(env.stdout, "%s=%s\n", kv[0], kv[1])
	}
	return nil
}
