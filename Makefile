# mcpsearch: the two commands a new machine needs are `make run` and `make test`.
# Both start a local PostgreSQL with pgvector through scripts/pg.sh unless
# DATABASE_URL is already set.

GO        ?= go
BIN       := bin/mcpsearch
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
ADDR      ?= 127.0.0.1:8080
TRANSPORT ?= http,sse
# make install copies the binary to $(DESTDIR)$(BINDIR)/mcpsearch.
PREFIX    ?= /usr/local
BINDIR    ?= $(PREFIX)/bin

.PHONY: build install uninstall compose-env run test test-citus citus-stop testdb-clean interop-deps bench extract-fixtures fmt vet lint clean embed-goldens

# What the binary is built from (migrations are embedded), so that make
# install rebuilds only when the binary is older than its sources.
SOURCES   := $(shell find . -path ./interop/node_modules -prune -o -type f \( -name '*.go' -o -name '*.sql' -o -name go.mod -o -name go.sum \) -print)

GOBUILD    = CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/mcpsearch

build:
	$(GOBUILD)

$(BIN): $(SOURCES)
	$(GOBUILD)

# Install the binary, by default as /usr/local/bin/mcpsearch: `make build`,
# then `sudo make install` (which builds only if the binary is missing or
# older than its sources, so root needs no Go toolchain), or
# `make install PREFIX=$$HOME/.local` without root.
install: $(BIN)
	install -d '$(DESTDIR)$(BINDIR)'
	install -m 0755 $(BIN) '$(DESTDIR)$(BINDIR)/mcpsearch'

uninstall:
	rm -f '$(DESTDIR)$(BINDIR)/mcpsearch'

# Write .env, the secrets docker-compose.yml reads, unless it exists.
compose-env:
	@bash scripts/compose-env.sh

# Start the server for real on $(ADDR) (streamable HTTP at /mcp, SSE at /sse).
run: build
	@DATABASE_URL="$${DATABASE_URL:-$$(bash scripts/pg.sh)}" && export DATABASE_URL && \
	$(BIN) migrate && \
	exec $(BIN) serve --transport $(TRANSPORT) --addr $(ADDR)

# Every test: unit, Postgres (a real server, a fresh database per package),
# every transport end to end, and interop with the official TypeScript SDK.
test: interop-deps
	@DATABASE_URL="$${DATABASE_URL:-$$(bash scripts/pg.sh)}" && export DATABASE_URL && \
	MCPSEARCH_INTEROP=1 $(GO) test -race -count=1 -timeout 15m ./...

# The suites whose SQL Citus distributes, again on a Citus cluster: the
# documents store, jobs and sources, the shared rate limits, the distributed schema, the test
# databases, and every client end to end (the audit table included); every
# test database is made on the coordinator and the workers. The cluster is
# MCPSEARCH_CITUS_URL's, or the local one scripts/citus.sh starts (it needs
# Citus installed, or its source: see the script). Under -race like make
# test, which also reuses make test's build. The hostile-input suites are
# make test's alone: they check what the server makes of input before it
# sends a statement, and their megabyte arguments are half of the interop
# suite's time under the race detector. Reading web pages (fetch_url,
# web_search's read) touches no database: make test's too. make test runs the Citus-only tests
# too when MCPSEARCH_CITUS_URL is set.
CITUS_PACKAGES := ./docs ./jobs ./sources ./ratelimit ./ui/signout ./internal/citustest ./internal/pgtest ./interop
CITUS_SKIP     := ^(TestHostile|TestFetchURLTypeScript|TestResearchTypeScript)

test-citus: interop-deps
	@MCPSEARCH_CITUS_URL="$${MCPSEARCH_CITUS_URL:-$$(bash scripts/citus.sh)}" && export MCPSEARCH_CITUS_URL && \
	DATABASE_URL="$$MCPSEARCH_CITUS_URL" MCPSEARCH_REQUIRE_CITUS=1 MCPSEARCH_INTEROP=1 \
	$(GO) test -race -count=1 -timeout 30m -skip '$(CITUS_SKIP)' $(CITUS_PACKAGES)

# Stop the three servers of the local Citus cluster (scripts/citus.sh).
citus-stop:
	@bash scripts/citus.sh stop

# make test keeps one database per migration set, mcpsearch_tmpl_<hash>: the
# migrated template each test package clones, so the next run skips the
# migrations. This drops it, and any mcpsearch_test_* database a killed run
# left. Not while tests run against the same server.
testdb-clean:
	@DATABASE_URL="$${DATABASE_URL:-$$(bash scripts/pg.sh)}" bash scripts/testdb-clean.sh

# The Node clients of the interop suites. npm ci reinstalls every package
# each time; the stamp lets a second make (test, then test-citus) skip it
# until the lock file changes.
interop-deps: interop/node_modules/.installed

interop/node_modules/.installed: interop/package.json interop/package-lock.json
	@cd interop && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

bench:
	@DATABASE_URL="$${DATABASE_URL:-$$(bash scripts/pg.sh)}" && export DATABASE_URL && \
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Regenerate the golden files of embed/tokenizer and embed/model2vec (token
# ids, Unicode tables, small model2vec fixtures) from Hugging Face's own
# tokenizers library. Needs Node and npm; the tests read the committed files
# and need neither.
embed-goldens:
	@cd tools/tokref && npm ci --no-audit --no-fund --loglevel=error && node gen.js
	gofmt -w embed/tokenizer/unicode_tables.go

# Regenerate the documents and reference texts extract's comparison
# tests read, from the sources in extract/testdata/formats/src (needs
# pandoc, LibreOffice, poppler-utils, img2pdf and unzip; tests only compare).
extract-fixtures:
	bash scripts/extract-fixtures.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

# go vet and staticcheck (honnef.co/go/tools, from the Go module proxy) on
# every package: CI runs it before the tests, and the tree stays clean.
STATICCHECK_VERSION ?= v0.8.2
lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

clean:
	rm -rf bin
