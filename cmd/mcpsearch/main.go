// Command mcpsearch serves web search through SearXNG and search over
// uploaded documents in PostgreSQL + pgvector to AI agents over the Model
// Context Protocol (stdio, SSE and streamable HTTP).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand of the CLI.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *environment, args []string) error
}

// environment is what a subcommand may touch of the process.
type environment struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// environ is the process environment, as os.Environ gives it.
	environ []string
}

func commands() []command {
	return []command{
		{"serve", "serve MCP over stdio, SSE or streamable HTTP", runServe},
		{"migrate", "create or update the database schema (safe to re-run)", runMigrate},
		{"ingest", "add files or folders to a conversation: ingest --conversation ID PATH...", runIngest},
		{"reembed", "move every stored chunk to the configured embedding model", runReembed},
		{"eval", "measure search quality on a BEIR dataset: eval --dataset DIR", runEval},
		{"audit", "show or prune the tool call audit: audit tail [-n N], audit prune --older-than 30d", runAudit},
		{"config", "print the effective configuration, secrets redacted", runConfig},
		{"version", "print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &environment{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, environ: os.Environ()}
	err := run(ctx, env, os.Args[1:])
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "mcpsearch:", err)
		}
		os.Exit(exitCode(err))
	}
}

// usageError marks errors in how the command was called (exit status 2).
type usageError struct{ error }

func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

func run(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.stderr)
		if len(args) == 0 {
			return usageError{errors.New("missing command")}
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	usage(env.stderr)
	return usageError{fmt.Errorf("unknown command %q", args[0])}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: mcpsearch COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'mcpsearch COMMAND --help' for the flags of a command. Every flag can also be set")
	fmt.Fprintln(w, "through the environment variable named in its help.")
}

func runVersion(_ context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "mcpsearch", version)
	return nil
}

func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
