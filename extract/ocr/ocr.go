// Package ocr recognises the text of scanned pages and images with the
// external tesseract program, rendering PDF pages with pdftoppm (both from
// Debian: tesseract-ocr with a language pack such as tesseract-ocr-eng, and
// poppler-utils). It never links an OCR library: without the programs the
// Engine reports itself unavailable and callers keep the text they have.
//
// Pages are recognised one at a time per document, each within a time
// limit; Options.Workers bounds how many tesseract processes one Engine
// runs at once across all documents.
package ocr

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mode says when pages are recognised.
type Mode string

// The modes.
const (
	// ModeAuto recognises the pages of a PDF that have no text layer, or
	// almost none, and every image.
	ModeAuto Mode = "auto"
	// ModeOff recognises nothing; the pages that need OCR are reported.
	ModeOff Mode = "off"
	// ModeForce recognises every page of a PDF, its text layer replaced
	// (for PDFs whose text layer is garbage), and every image.
	ModeForce Mode = "force"
)

// ParseMode reads a Mode from its name; "" is ModeAuto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeOff, ModeForce:
		return m, nil
	}
	return "", fmt.Errorf("ocr: mode %q: want auto, off or force", s)
}

// Defaults of Options.
const (
	DefaultDPI         = 300
	DefaultWorkers     = 1
	DefaultPageTimeout = 60 * time.Second
	DefaultMaxPages    = 200
	// DefaultMinChars is the number of letters and digits below which a
	// PDF page's text layer counts as almost none.
	DefaultMinChars = 32
	// DefaultMaxPixels bounds the pixels of one page or image handed to
	// tesseract (a page is rendered at a lower resolution to fit): 60
	// million, an A0 sheet at 150 dpi, or an A4 page at 1,000 dpi.
	DefaultMaxPixels = 60_000_000
	// maxPageText bounds what one page may yield, against a program gone
	// wrong.
	maxPageText = 4 << 20
)

// Options configure an Engine. Zero fields take the defaults.
type Options struct {
	// Mode is ModeAuto when empty.
	Mode Mode
	// Languages are tesseract language codes, such as "eng" or "deu";
	// ["eng"] when empty. Languages not installed are left out, with a
	// warning from Probe.
	Languages []string
	// DPI is the resolution PDF pages are rendered at (70 to 1200).
	DPI int
	// Workers bounds the pages recognised at once by the engine.
	Workers int
	// PageTimeout bounds rendering and recognising one page.
	PageTimeout time.Duration
	// MaxPages bounds the pages recognised in one document; the others
	// are reported as needing OCR.
	MaxPages int
	// MinChars is the number of letters and digits below which a PDF
	// page's text layer is taken for none in ModeAuto.
	MinChars int
	// MaxPixels bounds the pixels of a rendered page or an image.
	MaxPixels int
	// Tesseract, Pdftoppm and Pdfinfo name the programs, looked up on
	// PATH when they hold no slash; "tesseract", "pdftoppm" and "pdfinfo"
	// when empty.
	Tesseract, Pdftoppm, Pdfinfo string
	// TempDir holds the copy of a PDF the renderer reads; the system's
	// temporary directory when empty.
	TempDir string
}

func (o Options) withDefaults() Options {
	if o.Mode == "" {
		o.Mode = ModeAuto
	}
	if len(o.Languages) == 0 {
		o.Languages = []string{"eng"}
	}
	if o.DPI <= 0 {
		o.DPI = DefaultDPI
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.PageTimeout <= 0 {
		o.PageTimeout = DefaultPageTimeout
	}
	if o.MaxPages <= 0 {
		o.MaxPages = DefaultMaxPages
	}
	if o.MinChars <= 0 {
		o.MinChars = DefaultMinChars
	}
	if o.MaxPixels <= 0 {
		o.MaxPixels = DefaultMaxPixels
	}
	if o.Tesseract == "" {
		o.Tesseract = "tesseract"
	}
	if o.Pdftoppm == "" {
		o.Pdftoppm = "pdftoppm"
	}
	if o.Pdfinfo == "" {
		o.Pdfinfo = "pdfinfo"
	}
	return o
}

// languagePattern matches a tesseract language code, or a script such as
// "script/Latin".
var languagePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,31}(/[A-Za-z][A-Za-z0-9_]{0,31})?$`)

// Validate reports options a user must correct.
func (o Options) Validate() error {
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return err
	}
	for _, l := range o.Languages {
		if !languagePattern.MatchString(l) {
			return fmt.Errorf("ocr: language %q: want tesseract codes such as eng or deu", l)
		}
	}
	if o.DPI != 0 && (o.DPI < 70 || o.DPI > 1200) {
		return fmt.Errorf("ocr: dpi %d: want 70 to 1200", o.DPI)
	}
	if o.Workers < 0 || o.MaxPages < 0 || o.PageTimeout < 0 {
		return errors.New("ocr: workers, max pages and timeout must not be negative")
	}
	return nil
}

// Engine runs OCR. The nil *Engine is valid and recognises nothing, as
// ModeOff does.
type Engine struct {
	opts Options
	sem  chan struct{}

	probeOnce sync.Once
	status    Status
}

// New returns an Engine with opts, which must pass Validate. It starts no
// program; Probe does, once.
func New(opts Options) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	return &Engine{opts: opts, sem: make(chan struct{}, opts.Workers)}, nil
}

// Options returns the engine's options, defaults filled in.
func (e *Engine) Options() Options {
	if e == nil {
		return Options{Mode: ModeOff}.withDefaults()
	}
	return e.opts
}

// Mode returns the engine's mode; ModeOff for the nil Engine.
func (e *Engine) Mode() Mode {
	if e == nil {
		return ModeOff
	}
	return e.opts.Mode
}

// Enabled reports whether the engine is asked to recognise anything: not
// nil and not off. It may still be unavailable (see Probe).
func (e *Engine) Enabled() bool {
	return e != nil && e.opts.Mode != ModeOff
}

// Status is what Probe found.
type Status struct {
	// Mode is the engine's mode.
	Mode Mode
	// Available is true when tesseract runs and has at least one of the
	// languages asked for.
	Available bool
	// Tesseract is the program's path and Version its version line.
	Tesseract, Version string
	// Languages are the languages used: those asked for that are
	// installed. Installed lists every language tesseract has; Missing
	// the ones asked for that it lacks.
	Languages, Installed, Missing []string
	// Renderer is true when pdftoppm and pdfinfo were found, so that PDF
	// pages can be recognised, not only images.
	Renderer bool
	// Reason says why OCR is not available, or what is missing.
	Reason string
}

// LogValue lets Status be logged as one structured attribute.
func (s Status) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("mode", string(s.Mode)),
		slog.Bool("available", s.Available),
		slog.String("languages", strings.Join(s.Languages, "+")),
		slog.Bool("pdf_pages", s.Renderer),
	}
	if s.Version != "" {
		attrs = append(attrs, slog.String("tesseract", s.Version))
	}
	if len(s.Missing) > 0 {
		attrs = append(attrs, slog.String("missing_languages", strings.Join(s.Missing, ",")))
	}
	if s.Reason != "" {
		attrs = append(attrs, slog.String("reason", s.Reason))
	}
	return slog.GroupValue(attrs...)
}

// Probe finds the programs and the installed languages, once; later calls
// return the first answer. Servers log it at start-up:
//
//	slog.Info("ocr", "status", engine.Probe(ctx))
func (e *Engine) Probe(ctx context.Context) Status {
	if e == nil {
		return Status{Mode: ModeOff, Reason: "OCR is off"}
	}
	e.probeOnce.Do(func() { e.status = e.probe(ctx) })
	return e.status
}

func (e *Engine) probe(ctx context.Context) Status {
	s := Status{Mode: e.opts.Mode}
	if e.opts.Mode == ModeOff {
		s.Reason = "OCR is off"
	}
	path, err := exec.LookPath(e.opts.Tesseract)
	if err != nil {
		s.Reason = "the tesseract program is not installed (Debian: apt-get install tesseract-ocr tesseract-ocr-eng)"
		return s
	}
	s.Tesseract = path
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		s.Reason = fmt.Sprintf("tesseract --version failed: %v", err)
		return s
	}
	s.Version = firstLine(string(out))
	// --list-langs prints a heading line, then one language a line; older
	// versions print to stderr.
	out, err = exec.CommandContext(ctx, path, "--list-langs").CombinedOutput()
	if err != nil {
		s.Reason = fmt.Sprintf("tesseract --list-langs failed: %v", err)
		return s
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "List of") || !languagePattern.MatchString(l) || l == "osd" {
			continue
		}
		s.Installed = append(s.Installed, l)
	}
	for _, want := range e.opts.Languages {
		found := false
		for _, have := range s.Installed {
			if have == want {
				found = true
			}
		}
		if found {
			s.Languages = append(s.Languages, want)
		} else {
			s.Missing = append(s.Missing, want)
		}
	}
	_, errRender := exec.LookPath(e.opts.Pdftoppm)
	_, errInfo := exec.LookPath(e.opts.Pdfinfo)
	s.Renderer = errRender == nil && errInfo == nil
	switch {
	case len(s.Languages) == 0:
		s.Reason = fmt.Sprintf("none of the languages %s is installed (installed: %s; Debian: apt-get install tesseract-ocr-%s)",
			strings.Join(e.opts.Languages, ", "), strings.Join(s.Installed, ", "), e.opts.Languages[0])
		return s
	case len(s.Missing) > 0:
		s.Reason = "languages not installed, left out: " + strings.Join(s.Missing, ", ")
	case !s.Renderer:
		s.Reason = "pdftoppm or pdfinfo is not installed (Debian: apt-get install poppler-utils): only images can be recognised, not PDF pages"
	}
	s.Available = e.opts.Mode != ModeOff
	return s
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l)
}

// ErrUnavailable reports OCR that cannot run: off, or tesseract missing.
var ErrUnavailable = errors.New("OCR is not available")

// available returns nil when pages can be recognised, or an error wrapping
// ErrUnavailable that says why not.
func (e *Engine) available(ctx context.Context, pdf bool) error {
	if !e.Enabled() {
		return fmt.Errorf("%w: OCR is off", ErrUnavailable)
	}
	s := e.Probe(ctx)
	switch {
	case !s.Available:
		return fmt.Errorf("%w: %s", ErrUnavailable, s.Reason)
	case pdf && !s.Renderer:
		return fmt.Errorf("%w: %s", ErrUnavailable, s.Reason)
	}
	return nil
}

// Available returns nil when the engine can recognise images (and, with
// pdf, PDF pages), or an error wrapping ErrUnavailable whose message says
// why not: "OCR is off", "the tesseract program is not installed (...)".
func (e *Engine) Available(ctx context.Context, pdf bool) error {
	return e.available(ctx, pdf)
}

// acquire takes a worker slot, waiting for one.
func (e *Engine) acquire(ctx context.Context) error {
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Engine) release() { <-e.sem }

// recognise runs tesseract on the image in data and returns its output as
// it is, a form feed after each page. dpi, when above 0, tells tesseract
// the image's resolution.
func (e *Engine) recognise(ctx context.Context, data []byte, dpi int) (string, error) {
	s := e.Probe(ctx)
	args := []string{"stdin", "stdout", "-l", strings.Join(s.Languages, "+")}
	if dpi > 0 {
		args = append(args, "--dpi", strconv.Itoa(dpi))
	}
	cmd := exec.CommandContext(ctx, s.Tesseract, args...)
	// One thread per process: Workers says how many run at once, and
	// tesseract's own threads only contend with them.
	cmd.Env = append(os.Environ(), "OMP_THREAD_LIMIT=1")
	cmd.Stdin = bytes.NewReader(data)
	out := &limitedBuffer{limit: maxPageText}
	errOut := &limitedBuffer{limit: 4096}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("tesseract: %v: %s", err, firstLine(errOut.String()))
	}
	if out.over {
		return "", fmt.Errorf("tesseract: more than %d bytes of text for one page", maxPageText)
	}
	return out.String(), nil
}

// cleanText normalises tesseract's output: form feeds (page ends) and
// trailing spaces go, runs of blank lines become one.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\r", "")
	lines := strings.Split(s, "\n")
	var b strings.Builder
	blank := false
	for _, l := range lines {
		l = strings.TrimRight(strings.ReplaceAll(l, "\f", ""), " \t")
		if l == "" {
			blank = b.Len() > 0
			continue
		}
		if blank {
			b.WriteString("\n\n")
		} else if b.Len() > 0 {
			b.WriteByte('\n')
		}
		blank = false
		b.WriteString(l)
	}
	return b.String()
}

// limitedBuffer keeps at most limit bytes and notes whether more came.
type limitedBuffer struct {
	bytes.Buffer
	limit int
	over  bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); room < len(p) {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// run runs a program for its output, bounded to limit bytes.
func run(ctx context.Context, limit int, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	out := &limitedBuffer{limit: limit}
	errOut := &limitedBuffer{limit: 4096}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s: %v: %s", name, err, firstLine(errOut.String()))
	}
	if out.over {
		return nil, fmt.Errorf("%s: output over %d bytes", name, limit)
	}
	return out.Bytes(), nil
}

// copyTemp writes data to a new file in dir and returns its path.
func copyTemp(dir, pattern string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("ocr: temporary file: %w", err)
	}
	_, err = io.Copy(f, bytes.NewReader(data))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("ocr: temporary file: %w", err)
	}
	return f.Name(), nil
}

// ParseLanguages reads a list of tesseract languages as a setting gives
// it: codes joined with "+" (tesseract's own form, "eng+deu") or commas,
// spaces ignored. The result is for Options.Languages, which Validate
// checks.
func ParseLanguages(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ',' || r == ' ' })
}
