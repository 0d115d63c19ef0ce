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
	"runtime/debug"
	"syscall"

	"github.com/mcpsearch/mcpsearch/config"
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
		{"ingest", "add files, folders or URLs to a conversation: ingest --conversation ID PATH|URL...", runIngest},
		{"sync", "sync a conversation's sites and folders: sync --conversation ID [--source ID]", runSync},
		{"delete", "delete a whole conversation's files: delete --conversation ID", runDelete},
		{"reembed", "move every stored chunk to the configured embedding model", runReembed},
		{"index", "build the vector index over the chunks stored since its last build", runIndex},
		{"models", "download or list model2vec embedding models: models pull [NAME], models list", runModels},
		{"eval", "measure search quality on a BEIR dataset: eval --dataset DIR", runEval},
		{"audit", "show or prune the tool call audit: audit tail [-n N], audit prune --older-than 30d", runAudit},
		{"config", "print the effective configuration, secrets redacted", runConfig},
		{"version", "print the version", runVersion},
	}
}

func main() {
	// Set once, before anything reads it: serve reports it to clients too.
	if info, ok := debug.ReadBuildInfo(); ok {
		version = buildVersion(version, info)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &environment{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, environ: os.Environ()}
	err := run(ctx, env, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpsearch:", err)
		os.Exit(exitCode(err))
	}
}

// buildVersion returns v, the version set at build time, or for a binary
// built without one ("dev", as go build and go install leave it) what the
// toolchain stamped into info: the module version, or else dev- and the
// commit it was built from, marked -dirty when the tree had changes.
func buildVersion(v string, info *debug.BuildInfo) string {
	if v != "dev" || info == nil {
		return v
	}
	if mv := info.Main.Version; mv != "" && mv != "(devel)" {
		return mv
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return v
	}
	out := "dev-" + rev[:min(12, len(rev))]
	if dirty {
		out += "-dirty"
	}
	return out
}

// usageError marks errors in how the command was called (exit status 2).
type usageError struct{ error }

func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// run runs the command named by args[0]. Help asked for goes to stdout and
// succeeds; usage printed after a mistake goes to stderr with exit status 2.
func run(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 {
		usage(env.stderr)
		return usageError{errors.New("missing command")}
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(env.stdout)
		return nil
	case "help":
		if len(args) == 1 {
			usage(env.stdout)
			return nil
		}
		// "mcpsearch help audit tail" is "mcpsearch audit tail --help".
		args = append(args[1:len(args):len(args)], "--help")
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(ctx, env, args[1:])
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
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
	fmt.Fprintln(w, "\nRun 'mcpsearch COMMAND --help' for the flags of a command. Every setting flag can also be")
	fmt.Fprintln(w, "set through the environment variable named in its help.")
}

// commandHelp is what --help shows of one command besides its flags, and
// which settings of config.Config the command reads.
type commandHelp struct {
	usage    string
	about    string
	examples []string
	// settings are the flag names of the settings the command reads; a
	// command given allSettings takes every one.
	settings []string
	// args reports whether the command takes arguments after its flags.
	args bool
}

// allSettings stands for every setting, for commands that read them all.
var allSettings = []string{"*"}

// Groups of settings, by flag name, that several commands read: a setting
// joins a group in its own entry (config.Group).
var (
	databaseSettings = config.Flags(config.Database)
	embedSettings    = config.Flags(config.Embed)
	pipelineSettings = config.Flags(config.Pipeline)
	fetchSettings    = config.Flags(config.Download)
	hubSettings      = config.Flags(config.Hub)
)

func join(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// helpFor returns the help of the command whose flag set is named name:
// a command of commands(), or "audit tail" and "audit prune".
func helpFor(name string) commandHelp {
	switch name {
	case "serve":
		return commandHelp{
			usage: "mcpsearch serve [flags]",
			about: "Serve web search (through SearXNG), page reading and search over uploaded documents to MCP clients,\n" +
				"over stdio (the default) or over streamable HTTP and legacy SSE. The documents tools and the audit\n" +
				"need DATABASE_URL, migrated with 'mcpsearch migrate'.",
			examples: []string{"mcpsearch serve",
				"MCP_API_KEYS=KEY DATABASE_URL=postgres://USER:PASSWORD@HOST/DB mcpsearch serve --transport http,sse --addr 0.0.0.0:8080"},
			settings: allSettings,
		}
	case "migrate":
		return commandHelp{
			usage:    "mcpsearch migrate [flags]",
			about:    "Create or update the database schema at DATABASE_URL. Safe to re-run: only missing migrations are applied.",
			examples: []string{"DATABASE_URL=postgres://USER:PASSWORD@HOST/DB mcpsearch migrate"},
			settings: databaseSettings,
		}
	case "ingest":
		return commandHelp{
			usage: "mcpsearch ingest --conversation ID [flags] PATH|URL...",
			about: "Add files to a conversation's documents, as an upload does: PDF, text, Markdown and HTML. Folders are\n" +
				"walked; their hidden files and folders, files of other types and files over the size limit are\n" +
				"skipped and listed. Files named on the command line are always tried. An http(s) URL is fetched\n" +
				"with fetch_url's client and address rules and kept with the URL as its source.",
			examples: []string{"mcpsearch ingest --conversation handbook ./handbook release-notes.pdf",
				"mcpsearch ingest --conversation research https://go.dev/doc/effective_go",
				"mcpsearch ingest --conversation notes --sync ~/notes",
				"mcpsearch ingest --conversation pgdocs --crawl https://www.postgresql.org/docs/17/ --max-pages 2000"},
			settings: join(databaseSettings, embedSettings, pipelineSettings, fetchSettings, []string{"log-format"}),
			args:     true,
		}
	case "sync":
		return commandHelp{
			usage: "mcpsearch sync --conversation ID [--source SOURCE_ID] [flags]",
			about: "Sync a conversation's sources: every site crawled with ingest --crawl is crawled again with conditional\n" +
				"requests (only changed pages are read and embedded again, pages gone are removed, new ones added), and\n" +
				"every folder ingested with ingest --sync that is on this machine is synced by size, time and content.",
			examples: []string{"mcpsearch sync --conversation handbook", "mcpsearch sync --conversation handbook --source SOURCE_ID"},
			settings: join(databaseSettings, embedSettings, pipelineSettings, fetchSettings, []string{"log-format"}),
		}
	case "delete":
		return commandHelp{
			usage:    "mcpsearch delete --conversation ID [flags]",
			about:    "Delete every file of a conversation, with its chunks, as DELETE /v1/conversations/{id} does.",
			examples: []string{"mcpsearch delete --conversation handbook"},
			settings: join(databaseSettings, embedSettings, []string{"log-format"}),
		}
	case "reembed":
		return commandHelp{
			usage:    "mcpsearch reembed [flags]",
			about:    "Compute every stored chunk's vector again with the configured embedder, after MCP_embed_* changed.",
			examples: []string{"MCP_embed_provider=ollama MCP_embed_model=nomic-embed-text mcpsearch reembed"},
			settings: join(databaseSettings, embedSettings, []string{"log-format", "log-level"}),
		}
	case "index":
		return commandHelp{
			usage: "mcpsearch index [flags]",
			about: "Build the vector (HNSW) index of the configured embedder's model now, over every stored chunk, and\n" +
				"replace the one searches use. A running server does this on its own once a large conversation has\n" +
				"enough chunks outside the index and uploads pause; this command is for scripts after a bulk ingest.\n" +
				"It does nothing when every chunk is already covered.",
			examples: []string{"mcpsearch ingest --conversation handbook ./handbook && mcpsearch index"},
			settings: join(databaseSettings, embedSettings, []string{"index-build-memory-mb", "log-format", "log-level"}),
		}
	case "eval":
		return commandHelp{
			usage: "mcpsearch eval --dataset DIR [flags]",
			about: "Measure search quality (nDCG@10, recall) on a BEIR dataset: its corpus is ingested into a scratch\n" +
				"conversation of the database at DATABASE_URL, searched with every judged query, then deleted.",
			examples: []string{"mcpsearch eval --dataset docs/eval/testdata/minibeir --modes hybrid,keyword"},
			settings: join(databaseSettings, embedSettings, pipelineSettings, []string{"log-format"}),
		}
	case "models":
		return commandHelp{
			usage: "mcpsearch models pull [NAME...] [flags]\n       mcpsearch models list [flags]",
			about: "Download model2vec embedding models from the Hugging Face hub, or list them. Run 'mcpsearch models pull --help'\n" +
				"or 'mcpsearch models list --help' for their flags.",
			examples: []string{"mcpsearch models pull potion-retrieval-32M", "mcpsearch models list"},
		}
	case "models pull":
		return commandHelp{
			usage: "mcpsearch models pull [NAME...] [flags]",
			about: "Download a model2vec model into MCP_embed_models_dir: a catalogue model (potion-retrieval-32M, potion-base-8M),\n" +
				"pinned to a commit and checksums, or any hub repository owner/name[@revision], pinned when pulled. Without\n" +
				"NAME, the configured model (MCP_embed_model, or potion-retrieval-32M). Every file's size and SHA-256 is\n" +
				"checked and the folder appears complete or not at all; an interrupted pull resumes where it stopped, and a\n" +
				"model already installed intact is not downloaded again (a repository named without a revision keeps the\n" +
				"revision it was installed at).",
			examples: []string{"mcpsearch models pull",
				"mcpsearch models pull potion-base-8M",
				"MCP_embed_models_dir=/srv/models mcpsearch models pull minishlab/potion-base-8M@main"},
			settings: join(modelSettings, hubSettings),
			args:     true,
		}
	case "models list":
		return commandHelp{
			usage: "mcpsearch models list [flags]",
			about: "List the catalogue and the models in MCP_embed_models_dir with their state (installed, damaged, not installed),\n" +
				"mark the configured one, and load it as a server would at start: the command fails when it cannot.",
			examples: []string{"mcpsearch models list", "MCP_embed_provider=model2vec mcpsearch models list"},
			settings: embedSettings,
		}
	case "audit":
		return commandHelp{
			usage: "mcpsearch audit tail [-n N] [flags]\n       mcpsearch audit prune --older-than AGE [flags]",
			about: "Show or prune the audit of tool calls stored at DATABASE_URL. Run 'mcpsearch audit tail --help' or\n" +
				"'mcpsearch audit prune --help' for their flags.",
			examples: []string{"mcpsearch audit tail -n 50", "mcpsearch audit prune --older-than 30d"},
		}
	case "audit tail":
		return commandHelp{
			usage:    "mcpsearch audit tail [-n N] [flags]",
			about:    "Show the most recent tool calls, oldest first.",
			examples: []string{"mcpsearch audit tail -n 50"},
			settings: databaseSettings,
		}
	case "audit prune":
		return commandHelp{
			usage:    "mcpsearch audit prune --older-than AGE [flags]",
			about:    "Delete the audit rows of tool calls older than AGE: whole days (30d) or a duration (12h, 90m).",
			examples: []string{"mcpsearch audit prune --older-than 30d"},
			settings: databaseSettings,
		}
	case "config":
		return commandHelp{
			usage:    "mcpsearch config [flags]",
			about:    "Print the effective value of every setting, from the environment and flags, secrets redacted.",
			examples: []string{"MCP_transport=http mcpsearch config --addr 127.0.0.1:9090"},
			settings: allSettings,
		}
	case "version":
		return commandHelp{usage: "mcpsearch version", about: "Print the version of this build.", examples: []string{"mcpsearch version"}}
	}
	return commandHelp{usage: "mcpsearch " + name + " [flags]"}
}

// newFlagSet returns the flag set of the command name with a flag for each
// setting the command reads, bound to cfg (which may be nil for a command
// that reads none). It prints nothing: parseFlags does.
func newFlagSet(name string, cfg *config.Config) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	h := helpFor(name)
	switch {
	case len(h.settings) == 0:
		return fs
	case len(h.settings) == 1 && h.settings[0] == allSettings[0]:
		cfg.RegisterFlags(fs)
		return fs
	}
	// Register every setting on a scratch set, then keep the command's: the
	// flags stay bound to cfg and keep their parsers and help.
	every := flag.NewFlagSet(name, flag.ContinueOnError)
	cfg.RegisterFlags(every)
	for _, n := range h.settings {
		f := every.Lookup(n)
		if f == nil {
			panic(fmt.Sprintf("command %s lists the setting flag --%s, which config does not define", name, n))
		}
		fs.Var(f.Value, f.Name, f.Usage)
	}
	return fs
}

// parseFlags parses args with fs. --help (or -h) prints the command's help
// to stdout and returns flag.ErrHelp, which run turns into success; a flag
// fs does not know, or an argument the command takes none of, is a usage
// error.
func parseFlags(env *environment, fs *flag.FlagSet, args []string) error {
	h := helpFor(fs.Name())
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(env.stdout, fs, h)
		return err
	case err != nil:
		return usageError{fmt.Errorf("%s: %w (see 'mcpsearch %s --help')", fs.Name(), err, fs.Name())}
	case fs.NArg() > 0 && !h.args:
		return usageError{fmt.Errorf("%s takes no arguments, got %q (see 'mcpsearch %s --help')", fs.Name(), fs.Arg(0), fs.Name())}
	}
	return nil
}

func printHelp(w io.Writer, fs *flag.FlagSet, h commandHelp) {
	fmt.Fprintf(w, "Usage: %s\n", h.usage)
	if h.about != "" {
		fmt.Fprintf(w, "\n%s\n", h.about)
	}
	if len(h.examples) > 0 {
		fmt.Fprintln(w, "\nExample:")
		for _, e := range h.examples {
			fmt.Fprintln(w, "  "+e)
		}
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags (a setting named \"env NAME\" can also be set through that environment variable):")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

func runVersion(_ context.Context, env *environment, args []string) error {
	if err := parseFlags(env, newFlagSet("version", nil), args); err != nil {
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
