package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/extract/ocr"
	"github.com/mcpsearch/mcpsearch/jobs"
	"github.com/mcpsearch/mcpsearch/migrations"
	"github.com/mcpsearch/mcpsearch/oauth"
	"github.com/mcpsearch/mcpsearch/sources"
	"github.com/mcpsearch/mcpsearch/ui"
	"github.com/mcpsearch/mcpsearch/ui/signout"
)

// uiTransport names the web page's tool calls (its search playground) and
// its own actions in logs, metrics and audit rows.
const uiTransport = "ui"

// uiRoute returns the web page (package ui) over this server: the backend
// below applies each caller's rights with the checks of the upload API and
// the tools. Should its embedded templates not parse (a mistake of the
// build), every page says so.
func (s *Server) uiRoute() http.Handler {
	h, err := ui.New(newUIBackend(s), ui.Options{Logger: s.log})
	if err != nil {
		s.log.Error("web page", "error", err)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "the web page of this build is broken: "+err.Error(), http.StatusInternalServerError)
		})
	}
	return h
}

// signouts keep the page's signed-out sessions (package signout).
type signouts interface {
	Add(ctx context.Context, id string, until time.Time) error
	Has(ctx context.Context, id string) (bool, error)
}

// uiBackend is ui.Backend over the server.
type uiBackend struct {
	s *Server
	// keys are the API keys by their id on the page.
	keys map[string]*APIKey
	// signouts are the sessions signed out: in the database every replica
	// reads, or in this process without one.
	signouts signouts
	// provider signs people in through the identity provider; nil when
	// the page offers no such sign-in.
	provider *uiProvider

	mu sync.Mutex
	// sessions are the in-process MCP sessions of the page's tool calls,
	// one per key or person's grant.
	sessions map[string]*mcp.ClientSession
	ocr      *ocr.Engine
}

func newUIBackend(s *Server) *uiBackend {
	b := &uiBackend{s: s, keys: map[string]*APIKey{}, sessions: map[string]*mcp.ClientSession{}}
	for i := range s.deps.APIKeys {
		k := &s.deps.APIKeys[i]
		b.keys[uiKeyID(k)] = k
	}
	if pooled, ok := s.deps.Docs.(interface{ Pool() *pgxpool.Pool }); ok {
		b.signouts = signout.New(pooled.Pool())
	} else {
		b.signouts = signout.NewMemory()
	}
	if p, err := newUIProvider(s); err != nil {
		s.log.Error("web page: no sign-in through the identity provider", "error", err)
	} else {
		b.provider = p
	}
	return b
}

// uiKeyID names a key in the page's sessions: derived from its hash, so
// that it reveals nothing of the key and changes with it.
func uiKeyID(k *APIKey) string {
	m := hmac.New(sha256.New, k.hash[:])
	m.Write([]byte("mcpsearch ui key id"))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

func (b *uiBackend) principal(k *APIKey) ui.Principal {
	m := hmac.New(sha256.New, k.hash[:])
	m.Write([]byte("mcpsearch ui session seal"))
	return ui.Principal{ID: uiKeyID(k), Name: k.Name, Conversations: k.Conversations, Write: k.write, Seal: m.Sum(nil)}
}

// Open: the page asks for no key where the other routes ask for no
// credential. A server whose only credentials are an identity provider's
// tokens is not open: its page signs people in there (with
// MCP_ui_oauth_client_id) or asks for a key and accepts none.
func (b *uiBackend) Open() bool { return !b.s.accessControlled() }

func (b *uiBackend) SignIn(secret string) (ui.Principal, bool) {
	if b.Open() || secret == "" {
		return ui.Principal{}, false
	}
	k := b.s.match(secret)
	if k == nil {
		return ui.Principal{}, false
	}
	return b.principal(k), true
}

func (b *uiBackend) Principal(id string) (ui.Principal, bool) {
	k, ok := b.keys[id]
	if !ok || b.Open() {
		return ui.Principal{}, false
	}
	return b.principal(k), true
}

func (b *uiBackend) Provider() ui.Provider {
	if b.provider == nil || b.Open() {
		return nil
	}
	return b.provider
}

func (b *uiBackend) OriginAllowed(origin string) bool { return b.s.originAllowed(origin) }

func (b *uiBackend) SignOut(ctx context.Context, id string, until time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return b.signouts.Add(ctx, id, until)
}

func (b *uiBackend) SignedOut(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return b.signouts.Has(ctx, id)
}

func (b *uiBackend) Features() ui.Features {
	s := b.s
	docsOn := s.docsOn()
	jobsOn := docsOn && s.deps.Jobs != nil
	urls := jobsOn && s.deps.Fetch != nil && s.cfg.FetchURLEnabled
	f := ui.Features{Docs: docsOn, Jobs: jobsOn, URLs: urls, Crawl: urls && s.deps.Sources != nil, Writes: s.cfg.WritesOn(), Keys: len(s.deps.APIKeys) > 0,
		Audit: s.deps.Audit != nil && s.deps.Audit.Mode() == "database", MaxFileBytes: s.cfg.MaxFileBytes, Tools: s.toolNames(),
		Playground: ui.RateLimit{PerMinute: s.cfg.UISearch.PerMinute, Burst: s.cfg.UISearch.Burst}}
	if docsOn {
		f.Threshold, f.Semantic = s.deps.Docs.DefaultThreshold(), embed.Semantic(s.deps.Docs.Embedder())
	}
	return f
}

// identity is the caller p stands for, as the server's other routes know
// it: a key's (refused once the key is removed), or the grant a person's
// token gave when they signed in.
func (b *uiBackend) identity(p ui.Principal) (identity, error) {
	switch {
	case b.Open():
		return identity{}, nil
	case p.Subject != "":
		if b.provider == nil {
			return identity{}, &ui.Error{Status: http.StatusUnauthorized, Message: "This server no longer signs people in through an identity provider: sign in with an API key."}
		}
		return identity{token: &tokenGrant{subject: p.Subject, write: p.Write, conversations: p.Conversations, writeScope: b.s.cfg.AuthScopeWrite}}, nil
	}
	k, ok := b.keys[p.ID]
	if !ok {
		return identity{}, &ui.Error{Status: http.StatusUnauthorized, Message: "This key is no longer accepted: sign in again."}
	}
	return identity{key: k}, nil
}

// who names the caller in the page's words: "Key admin", "alice".
func who(id identity) string {
	if id.token != nil {
		return id.token.subject
	}
	return "Key " + id.name()
}

// conversation checks that id may see conv.
func (b *uiBackend) conversation(id identity, conv string) error {
	if strings.TrimSpace(conv) == "" {
		return &ui.Error{Status: http.StatusBadRequest, Message: "Name the conversation."}
	}
	if !id.allows(conv) {
		return &ui.Error{Status: http.StatusForbidden, Message: fmt.Sprintf("%s may not see conversation %q.", who(id), conv)}
	}
	return nil
}

// writes says why id may not change documents; nil when it may.
func (b *uiBackend) writes(id identity) error {
	switch {
	case !b.s.cfg.WritesOn():
		return &ui.Error{Status: http.StatusForbidden, Message: "This server is read-only (MCP_read_only): it adds, deletes and cancels nothing."}
	case id.canWrite():
		return nil
	case id.token != nil:
		return &ui.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"%s may only read: adding, deleting and cancelling need the scope %s at your identity provider; sign in again once it grants it.", id.token.subject, id.token.writeScope)}
	}
	return &ui.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
		"Key %s may only read: it cannot add, delete or cancel. Give it scopes=read,write in the keys file.", id.name())}
}

// docs says why the documents store cannot be used; nil when it can.
func (b *uiBackend) docs() error {
	if !b.s.docsOn() {
		return &ui.Error{Status: http.StatusNotFound, Message: "The documents store is off on this server (it needs DATABASE_URL, with MCP_docs_enabled on)."}
	}
	return nil
}

// words turns a failure of the store, jobs or sources into the message
// the other routes give for it.
func (b *uiBackend) words(ctx context.Context, err error) error {
	var ue *ui.Error
	if err == nil || errors.As(err, &ue) {
		return err
	}
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return &ui.Error{Status: http.StatusNotFound, Message: "There is no such job: it may have been deleted with its conversation."}
	case errors.Is(err, sources.ErrNotFound):
		return &ui.Error{Status: http.StatusNotFound, Message: "There is no such source: it may have been deleted, or its conversation."}
	case errors.Is(err, docs.ErrInvalidID):
		// A mistyped or cut address is one that leads nowhere.
		return &ui.Error{Status: http.StatusNotFound, Message: "Nothing has that id: check the address, or find it again from its conversation."}
	case errors.Is(err, docs.ErrNotFound):
		return &ui.Error{Status: http.StatusNotFound, Message: "There is no such file or passage: it may have been deleted."}
	case errors.Is(err, jobs.ErrFinished):
		return &ui.Error{Status: http.StatusConflict, Message: "The job has already ended: there is nothing left to cancel."}
	case errors.Is(err, audit.ErrNoDatabase):
		return &ui.Error{Status: http.StatusNotFound, Message: "This server has no database: its audit rows go to its log."}
	case errors.Is(err, audit.ErrBadFilter):
		return &ui.Error{Status: http.StatusBadRequest, Message: strings.TrimPrefix(err.Error(), "audit: ")}
	case errors.Is(err, context.DeadlineExceeded):
		return err
	}
	te := classify(ctx, err)
	if te.cause != nil || te.Status >= 500 {
		b.s.log.Warn("ui", "error", err)
	}
	msg := te.Message
	if te.Status >= 500 && te.cause == nil && !te.Retryable {
		msg = "The server failed to answer; its log has the details."
	}
	return &ui.Error{Status: te.Status, Message: msg}
}

// Record writes an action of the page to the audit, as a row of its own
// (tool_name the action, transport ui, the key's name or the person's
// subject), and to the log. A key is never recorded, nor a token.
func (b *uiBackend) Record(ctx context.Context, p ui.Principal, e ui.Event) {
	s := b.s
	var key, subject string
	if p.Subject != "" {
		subject = p.Subject
	} else if !b.Open() && p.ID != "" {
		key = p.Name
	}
	took := s.now().Sub(e.Start)
	attrs := []any{"action", e.Action, "transport", uiTransport, "ms", took.Milliseconds()}
	switch {
	case subject != "":
		attrs = append(attrs, "subject", subject)
	case key != "":
		attrs = append(attrs, "api_key", key)
	}
	if e.Conversation != "" {
		attrs = append(attrs, "conversation", e.Conversation)
	}
	if e.JobID != "" {
		attrs = append(attrs, "job", e.JobID)
	}
	code, msg := uiOutcome(e.Err)
	level := slog.LevelInfo
	if code != "" {
		level = slog.LevelWarn
		attrs = append(attrs, "outcome", code, "error", msg)
	} else {
		attrs = append(attrs, "outcome", "ok")
	}
	s.log.Log(ctx, level, "web page action", attrs...)
	if s.deps.Audit == nil {
		return
	}
	var args json.RawMessage
	if e.Touched != nil {
		args, _ = json.Marshal(e.Touched)
	}
	s.deps.Audit.Record(audit.Entry{ToolName: e.Action, ConversationID: e.Conversation, Arguments: args, Transport: uiTransport,
		APIKey: key, Subject: subject, ClientName: "mcpsearch-ui", ClientVersion: s.version, JobID: e.JobID,
		LatencyMS: int(took.Milliseconds()), CreatedAt: e.Start, ErrorCode: code, Error: msg})
}

// uiOutcome is the audit's error code and message of an action's failure,
// "" for a success.
func uiOutcome(err error) (string, string) {
	if err == nil {
		return "", ""
	}
	status := http.StatusInternalServerError
	var ue *ui.Error
	if errors.As(err, &ue) {
		status = ue.Status
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return CodeAuthError, err.Error()
	case status == http.StatusTooManyRequests:
		return CodeRateLimited, err.Error()
	case status == http.StatusGatewayTimeout || errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout, err.Error()
	}
	return CodeToolError, err.Error()
}

// uiProvider signs people in to the page through the identity provider:
// the page is a confidential OAuth client of MCP_auth_issuer
// (MCP_ui_oauth_client_id), and a person has what their access token
// grants, checked as the server checks any.
type uiProvider struct {
	s      *Server
	client *oauth.Client
	name   string
	seal   []byte
}

// newUIProvider returns the page's client of the identity provider; nil
// when MCP_ui_oauth_client_id is not set.
func newUIProvider(s *Server) (*uiProvider, error) {
	cfg := s.cfg
	if s.deps.Tokens == nil || cfg.UIOAuthClientID == "" {
		return nil, nil
	}
	base := cfg.PublicBase()
	cc := oauth.ClientConfig{ID: cfg.UIOAuthClientID, Secret: cfg.UIOAuthClientSecret, RedirectURL: base + "/ui/oauth/callback",
		Scopes: s.tokenScopes()}
	if len(cfg.AuthAudiences) == 0 {
		// Tokens must then name this server: ask for one that does (RFC
		// 8707). A provider that names the audience itself (Entra ID's
		// application id, with MCP_auth_audience) is asked nothing more.
		cc.Resource = base
	}
	c, err := s.deps.Tokens.Client(cc)
	if err != nil {
		return nil, fmt.Errorf("MCP_ui_oauth_client_id %s: %w", cfg.UIOAuthClientID, err)
	}
	name := cfg.AuthIssuer
	if u, err := url.Parse(cfg.AuthIssuer); err == nil {
		name = u.Host
	}
	// The seal of people's sessions: every replica has the same secret,
	// and a new secret ends every session signed with the old one.
	m := hmac.New(sha256.New, []byte(cfg.UIOAuthClientSecret))
	m.Write([]byte("mcpsearch ui person session\x00" + cfg.AuthIssuer + "\x00" + cfg.UIOAuthClientID))
	return &uiProvider{s: s, client: c, name: name, seal: m.Sum(nil)}, nil
}

func (p *uiProvider) Name() string { return p.name }
func (p *uiProvider) Seal() []byte { return p.seal }

func (p *uiProvider) AuthURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	return p.client.AuthURL(ctx, state, nonce, verifier)
}

// Finish completes a sign-in: the code exchanged and the tokens checked,
// the person has what their access token grants: the read scope to sign
// in at all, the write scope to change documents, and the conversations
// of the claim.
func (p *uiProvider) Finish(ctx context.Context, code, verifier, nonce string) (ui.Principal, error) {
	tok, err := p.client.Exchange(ctx, code, verifier, nonce)
	var unavailable *oauth.UnavailableError
	switch {
	case errors.As(err, &unavailable):
		p.s.log.Warn("web page: sign-in through the identity provider", "error", err)
		return ui.Principal{}, &ui.Error{Status: http.StatusBadGateway, Message: "The identity provider cannot be reached to complete the sign-in: try again shortly."}
	case errors.Is(err, oauth.ErrInvalidToken):
		reason := strings.TrimPrefix(strings.TrimPrefix(err.Error(), oauth.ErrInvalidToken.Error()), ": ")
		return ui.Principal{}, &ui.Error{Status: http.StatusForbidden, Message: "Your identity provider's access token is not one this server accepts: " + reason + "."}
	case errors.Is(err, oauth.ErrSignInRefused):
		reason := strings.TrimPrefix(strings.TrimPrefix(err.Error(), oauth.ErrSignInRefused.Error()), ": ")
		return ui.Principal{}, &ui.Error{Status: http.StatusForbidden, Message: "The sign-in was refused: " + reason + "."}
	case err != nil:
		return ui.Principal{}, err
	}
	read, write := p.s.cfg.AuthScopeRead, p.s.cfg.AuthScopeWrite
	w := tok.HasScope(write)
	if !w && !tok.HasScope(read) {
		return ui.Principal{}, &ui.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"%s is signed in at the identity provider, but their token lacks the scope %s that reading needs here: ask for it to be granted.", tok.Subject, read)}
	}
	return ui.Principal{Name: tok.Subject, Subject: tok.Subject, Write: w, Conversations: tok.Conversations}, nil
}

func (b *uiBackend) Status(ctx context.Context, p ui.Principal) ui.Status {
	s := b.s
	st := ui.Status{Version: s.version, Ready: true}
	checks := s.dependencyChecks(ctx, true)
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		c := checks[name]
		if c.Status == "down" {
			st.Ready = false
		}
		st.Checks = append(st.Checks, ui.Check{Name: name, Status: c.Status, Error: c.Error, Detail: c.Detail, MS: c.MS})
	}
	if d := s.deps.Docs; d != nil && s.docsOn() {
		e := d.Embedder()
		st.Embedder, st.Model, st.Dimensions, st.Semantic, st.Threshold = s.cfg.EmbedProvider, e.Model(), e.Dimensions(), embed.Semantic(e), d.DefaultThreshold()
		st.OCR = b.ocrStatus(ctx)
		st.Database, st.DatabaseDetail = b.database(ctx)
	} else {
		st.OCR = ui.OCRStatus{Mode: "off", Detail: "documents are off on this server"}
	}
	st.RateLimits = b.rateLimits()
	auth := "none: every caller is trusted"
	if !b.Open() {
		auth = fmt.Sprintf("%d API keys", len(s.deps.APIKeys))
		if s.deps.Tokens != nil {
			auth += ", and the tokens of " + s.cfg.AuthIssuer
		}
		if b.provider != nil {
			auth += "; people sign in to this page there"
		}
	}
	st.Settings = [][2]string{
		{"Transports", strings.Join(s.cfg.Transports, ", ")},
		{"Listening on", s.cfg.Addr},
		{"Access", auth},
		{"Writes", map[bool]string{true: "on", false: "off (MCP_read_only)"}[s.cfg.WritesOn()]},
		{"Write tools", map[bool]string{true: "offered to keys that may write", false: "off"}[s.cfg.WriteToolsOn()]},
		{"Largest upload", fmt.Sprintf("%d MB", s.cfg.MaxFileBytes>>20)},
		{"Workers", fmt.Sprint(s.cfg.Workers)},
		{"Tool timeout", s.cfg.ToolTimeout.String()},
	}
	if len(s.cfg.AllowedOrigins) > 0 {
		st.Settings = append(st.Settings, [2]string{"Allowed origins", strings.Join(s.cfg.AllowedOrigins, ", ")})
	}
	return st
}

// ocrStatus probes tesseract once, with the server's OCR settings.
func (b *uiBackend) ocrStatus(ctx context.Context) ui.OCRStatus {
	b.mu.Lock()
	if b.ocr == nil {
		mode, err := ocr.ParseMode(b.s.cfg.OCRMode)
		if err == nil {
			b.ocr, err = ocr.New(ocr.Options{Mode: mode, Languages: ocr.ParseLanguages(b.s.cfg.OCRLanguages)})
		}
		if err != nil {
			b.mu.Unlock()
			return ui.OCRStatus{Mode: b.s.cfg.OCRMode, Detail: err.Error()}
		}
	}
	engine := b.ocr
	b.mu.Unlock()
	ps := engine.Probe(ctx)
	detail := ps.Reason
	if ps.Available {
		detail = fmt.Sprintf("%s, languages %s", ps.Version, strings.Join(ps.Languages, "+"))
		if ps.Renderer {
			detail += "; scanned PDF pages and images"
		}
		if ps.Reason != "" {
			detail += "; " + ps.Reason
		}
	}
	return ui.OCRStatus{Mode: string(ps.Mode), Available: ps.Available, Detail: detail}
}

// database says what the documents store runs on: a single PostgreSQL
// or a Citus cluster, and its schema.
func (b *uiBackend) database(ctx context.Context) (string, string) {
	pooled, ok := b.s.deps.Docs.(interface{ Pool() *pgxpool.Pool })
	if !ok {
		return "PostgreSQL", ""
	}
	pool := pooled.Pool()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	kind := "PostgreSQL"
	distributed, err := migrations.Distributed(ctx, pool)
	if err != nil {
		return kind, "could not be read: the database does not answer"
	}
	if distributed {
		kind = "Citus (documents distributed by conversation)"
	}
	v, err := migrations.Current(ctx, pool)
	if err != nil {
		return kind, ""
	}
	return kind, fmt.Sprintf("schema %d of %d", v, migrations.Latest())
}

func (b *uiBackend) rateLimits() ui.RateLimits {
	cfg := b.s.cfg
	out := ui.RateLimits{Store: "memory", Default: ui.RateLimit{PerMinute: cfg.RateLimit.PerMinute, Burst: cfg.RateLimit.Burst},
		Playground: ui.RateLimit{PerMinute: cfg.UISearch.PerMinute, Burst: cfg.UISearch.Burst}}
	if b.s.deps.RateLimits != nil {
		out.Store = "postgres"
	}
	for _, tool := range b.s.toolNames() {
		rl := cfg.RateLimitFor(tool)
		if rl == cfg.RateLimit {
			continue
		}
		out.Tools = append(out.Tools, ui.ToolRateLimit{Tool: tool, RateLimit: ui.RateLimit{PerMinute: rl.PerMinute, Burst: rl.Burst, Global: rl.Global}})
	}
	return out
}
