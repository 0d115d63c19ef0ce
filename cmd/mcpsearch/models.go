package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/embed/hub"
	"github.com/mcpsearch/mcpsearch/embed/model2vec"
)

// modelSettings are the settings that say which model2vec model is used
// and where it lives.
var modelSettings = []string{"embed-provider", "embed-model", "embed-models-dir", "embed-model-dir"}

func runModels(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 {
		return usageError{errors.New("usage: mcpsearch models pull [NAME...] | mcpsearch models list (see 'mcpsearch models --help')")}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		printHelp(env.stdout, newFlagSet("models", nil), helpFor("models"))
		return flag.ErrHelp
	case "pull":
		return modelsPull(ctx, env, args[1:])
	case "list":
		return modelsList(env, args[1:])
	}
	return usageError{fmt.Errorf("unknown models command %q: want pull or list", args[0])}
}

// modelsStore is the store of pulled models of cfg.
func modelsStore(cfg config.Config) (model2vec.Store, error) {
	if cfg.EmbedModelsDir == "" {
		return model2vec.Store{}, usageError{errors.New("no models folder: set MCP_embed_models_dir (or HOME, for the default ~/.local/share/mcpsearch/models)")}
	}
	return model2vec.Store{Dir: cfg.EmbedModelsDir}, nil
}

func modelsPull(ctx context.Context, env *environment, args []string) error {
	cfg, fs, err := loadConfig(env, "models pull", flagsFirst(args), nil)
	if err != nil {
		return err
	}
	names := fs.Args()
	if len(names) == 0 {
		// Without a name, the configured model: what a server started
		// with the same settings will load.
		switch {
		case cfg.EmbedProvider != embed.ProviderModel2Vec:
			fmt.Fprintf(env.stdout, "MCP_embed_provider is %s, which needs no model2vec model: nothing to pull (name one to pull it anyway: mcpsearch models pull %s)\n",
				cfg.EmbedProvider, model2vec.DefaultModel)
			return nil
		case cfg.EmbedModelDir != "":
			e, err := newEmbedder(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "MCP_embed_model_dir %s holds %s (%d dimensions): nothing to pull\n", cfg.EmbedModelDir, e.Model(), e.Dimensions())
			return nil
		}
		names = []string{orDefault(cfg.EmbedModel, model2vec.DefaultModel)}
	}
	store, err := modelsStore(cfg)
	if err != nil {
		return err
	}
	client := &hub.Client{BaseURL: cfg.HubURL, Token: cfg.HubToken, UserAgent: "mcpsearch/" + version,
		// No overall timeout: a large file takes minutes; the client
		// ends a download that stalls.
		HTTP: &http.Client{Transport: http.DefaultTransport}}
	tty := false
	if f, ok := env.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	var failed []string
	for _, name := range names {
		if err := pullOne(ctx, env, client, store, name, tty); err != nil {
			if ctx.Err() != nil {
				return err
			}
			fmt.Fprintf(env.stderr, "mcpsearch: %v\n", err)
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d models not pulled (%s); run the command again to resume", len(failed), len(names), strings.Join(failed, ", "))
	}
	return nil
}

// flagsFirst moves the flags of args before the names, so that flags may
// follow them (models pull NAME --embed-models-dir DIR). Every flag of
// models pull takes a value, given after "=" or as the next argument.
func flagsFirst(args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(append(flags, args[i:]...), rest...)
		case !strings.HasPrefix(a, "-") || a == "-":
			rest = append(rest, a)
		case strings.Contains(a, "=") || a == "-h" || a == "-help" || a == "--help" || i+1 == len(args):
			flags = append(flags, a)
		default:
			flags = append(flags, a, args[i+1])
			i++
		}
	}
	return append(flags, rest...)
}

// orDefault returns a, or b when a is empty.
func orDefault(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// pullOne pulls the model ref into store, or says it is there already.
func pullOne(ctx context.Context, env *environment, client *hub.Client, store model2vec.Store, ref string, tty bool) error {
	k, err := resolveModel(ctx, client, store, ref)
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	dest := store.Path(k.Name)
	if store.Check(k) == nil {
		fmt.Fprintf(env.stdout, "%s (%s@%s) is installed and intact in %s: nothing to download\n", k.Name, k.Snapshot.Repo, k.Snapshot.Revision[:12], dest)
		return nil
	}
	fmt.Fprintf(env.stderr, "pulling %s@%s into %s: %d files, %s\n", k.Snapshot.Repo, k.Snapshot.Revision[:12], dest, len(k.Snapshot.Files), megabytes(k.Snapshot.Bytes()))
	p := newPullProgress(env.stderr, tty, k.Snapshot)
	start := time.Now()
	_, err = store.Pull(ctx, client, k, p.update)
	p.finish(err == nil)
	var ue *url.Error
	if errors.As(err, &ue) && ctx.Err() == nil {
		return fmt.Errorf("%w (cannot reach the hub at %s: on a machine without network, copy a model folder pulled elsewhere into %s, or point MCP_embed_model_dir at one)",
			err, client.BaseURL, store.Dir)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "installed %s (%s@%s) in %s: %s in %.1fs\n", k.Name, k.Snapshot.Repo, k.Snapshot.Revision[:12], dest,
		megabytes(k.Snapshot.Bytes()), time.Since(start).Seconds())
	return nil
}

// resolveModel pins ref to a snapshot. A hub repository named without a
// revision that is installed already keeps its installed revision, so that
// running the same pull again (as the compose stack does at every start)
// neither needs the network nor moves the model under the stored vectors;
// naming a revision (owner/name@main) moves it.
func resolveModel(ctx context.Context, client *hub.Client, store model2vec.Store, ref string) (model2vec.Known, error) {
	ref = strings.TrimSpace(ref)
	if _, ok := model2vec.Find(ref); !ok && strings.Contains(ref, "/") && !strings.Contains(ref, "@") {
		name := model2vec.FolderName(ref)
		if snap, err := hub.ReadManifest(store.Path(name)); err == nil && strings.EqualFold(snap.Repo, ref) {
			k := model2vec.Known{Name: name, Snapshot: snap}
			if store.Check(k) == nil {
				return k, nil
			}
			// Damaged: pull the installed revision again.
			ref += "@" + snap.Revision
		}
	}
	return model2vec.Resolve(ctx, client, ref)
}

// pullProgress shows a download: on a terminal a bar redrawn as bytes
// arrive, otherwise a line per file as each is complete.
type pullProgress struct {
	w     io.Writer
	tty   bool
	files []hub.File
	// ends are the byte offsets, over the whole snapshot, at which each
	// file is complete: files are downloaded in order.
	ends    []int64
	total   int64
	printed int
	done    int64
	start   time.Time
	drawn   bool
}

func newPullProgress(w io.Writer, tty bool, s hub.Snapshot) *pullProgress {
	p := &pullProgress{w: w, tty: tty, files: s.Files, total: s.Bytes(), start: time.Now()}
	var end int64
	for _, f := range s.Files {
		end += f.Size
		p.ends = append(p.ends, end)
	}
	return p
}

func (p *pullProgress) update(pr hub.Progress) {
	p.done = pr.Done
	if p.tty {
		p.drawn = true
		fmt.Fprint(p.w, "\r\033[K"+p.bar(pr.File))
		return
	}
	p.printFiles(false)
}

// printFiles writes a line for each file complete and not yet listed; with
// all, for every file left.
func (p *pullProgress) printFiles(all bool) {
	for p.printed < len(p.files) && (all || p.done >= p.ends[p.printed]) {
		f := p.files[p.printed]
		fmt.Fprintf(p.w, "  %-24s %10s  done\n", f.Name, megabytes(f.Size))
		p.printed++
	}
}

// bar is the terminal's progress line: a bar, the file, bytes done, the
// rate and the time left at that rate.
func (p *pullProgress) bar(file string) string {
	const width = 24
	filled := 0
	if p.total > 0 {
		filled = int(int64(width) * min(p.done, p.total) / p.total)
	}
	elapsed := max(time.Since(p.start).Seconds(), 0.001)
	rate := float64(p.done) / elapsed
	left := "--"
	if rate > 0 && p.done < p.total {
		left = (time.Duration(float64(p.total-p.done)/rate) * time.Second).Round(time.Second).String()
	} else if p.done >= p.total {
		left = "0s"
	}
	return fmt.Sprintf("[%s%s] %s %s of %s  %s/s  left %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		file, megabytes(p.done), megabytes(p.total), megabytes(int64(rate)), left)
}

// finish ends the progress display; ok says the pull succeeded, so that
// every file is complete.
func (p *pullProgress) finish(ok bool) {
	switch {
	case p.tty && p.drawn:
		fmt.Fprintln(p.w)
	case !p.tty && ok:
		p.printFiles(true)
	}
}

func modelsList(env *environment, args []string) error {
	cfg, _, err := loadConfig(env, "models list", args, nil)
	if err != nil {
		return err
	}
	store, err := modelsStore(cfg)
	if err != nil {
		return err
	}
	installed, err := store.List()
	if err != nil {
		return fmt.Errorf("models folder %s: %w", store.Dir, err)
	}
	// configured is the store folder the settings select, if any.
	configured := ""
	if cfg.EmbedProvider == embed.ProviderModel2Vec && cfg.EmbedModelDir == "" {
		configured = model2vec.FolderName(orDefault(cfg.EmbedModel, model2vec.DefaultModel))
	}
	fmt.Fprintf(env.stdout, "models folder: %s\n\n", store.Dir)

	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CATALOGUE\tDIMENSIONS\tDOWNLOAD\tSTATE\tREPOSITORY@REVISION")
	listed := map[string]bool{}
	for _, k := range model2vec.Catalogue() {
		listed[k.Name] = true
		state := catalogueState(store, k)
		var marks []string
		if k.Name == model2vec.DefaultModel {
			marks = append(marks, "default")
		}
		if k.Name == configured {
			marks = append(marks, "configured")
		}
		if len(marks) > 0 {
			state += " (" + strings.Join(marks, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s@%s\n", k.Name, k.Dimensions, megabytes(k.Snapshot.Bytes()), state, k.Snapshot.Repo, k.Snapshot.Revision[:12])
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	var others []model2vec.Installed
	for _, in := range installed {
		if !listed[in.Name] {
			others = append(others, in)
		}
	}
	if len(others) > 0 {
		fmt.Fprintln(env.stdout)
		tw = tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "INSTALLED\tSIZE\tSTATE\tSOURCE")
		for _, in := range others {
			source, state := installedState(store, in)
			if in.Name == configured {
				state += " (configured)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", in.Name, megabytes(in.Bytes), state, source)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(env.stdout)
	if cfg.EmbedProvider != embed.ProviderModel2Vec {
		fmt.Fprintf(env.stdout, "configured: MCP_embed_provider=%s, which uses no model2vec model\n", cfg.EmbedProvider)
		return nil
	}
	what := "MCP_embed_model=" + orDefault(cfg.EmbedModel, model2vec.DefaultModel+" (the default)")
	if cfg.EmbedModelDir != "" {
		what = "MCP_embed_model_dir=" + cfg.EmbedModelDir
	}
	// The check a server makes at start: every file read and checked.
	e, err := newEmbedder(cfg)
	if err != nil {
		fmt.Fprintf(env.stdout, "configured: %s, which cannot be loaded\n", what)
		return err
	}
	fmt.Fprintf(env.stdout, "configured: %s, which loads as %s (%d dimensions)\n", what, e.Model(), e.Dimensions())
	return nil
}

// catalogueState says whether the catalogue model k is installed and
// intact.
func catalogueState(store model2vec.Store, k model2vec.Known) string {
	err := store.Check(k)
	switch {
	case err == nil:
		return "installed"
	case errors.Is(err, model2vec.ErrCorrupt):
		return "damaged: run mcpsearch models pull " + k.Name
	}
	if snap, err := hub.ReadManifest(store.Path(k.Name)); err == nil {
		return "other revision " + snap.Revision[:12] + " installed (in use as it is; pull to move to the pinned one, then reembed)"
	}
	if _, err := os.Stat(store.Path(k.Name)); err == nil {
		return "copied by hand (checked when loaded)"
	}
	return "not installed"
}

// installedState describes a model of the store outside the catalogue:
// where it came from, and whether its files still match its manifest.
func installedState(store model2vec.Store, in model2vec.Installed) (source, state string) {
	if in.Problem != "" {
		return "-", "unusable: " + in.Problem
	}
	if in.Repo == "" {
		return "copied by hand", "checked when loaded"
	}
	source = in.Repo + "@" + in.Revision[:min(12, len(in.Revision))]
	snap, err := hub.ReadManifest(in.Dir)
	if err != nil {
		return source, "unusable: " + err.Error()
	}
	if err := store.Check(model2vec.Known{Name: in.Name, Snapshot: snap}); err != nil {
		return source, "damaged: run mcpsearch models pull " + in.Repo
	}
	return source, "installed"
}
