package interop

import (
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// fetchTransports are the transports the fetch_url tests drive.
var fetchTransports = []transportCase{
	{name: "stdio", transport: "stdio"},
	{name: "http", transport: "http"},
	{name: "http-stateless", transport: "http", stateless: true},
}

// runFetch runs one scenario of fetch-client.mjs against tg.
func runFetch(t *testing.T, tg target, scenario string, extra ...string) tsReport {
	t.Helper()
	return runClient(t, tg, "fetch-client.mjs", scenario, extra...)
}

// runClient runs one scenario of a client script whose flags are
// fetch-client.mjs's (--transport, --command with --arg and --env, or
// --url-mcp) against tg.
func runClient(t *testing.T, tg target, script, scenario string, extra ...string) tsReport {
	t.Helper()
	var flags []string
	if tg.transport == "stdio" {
		flags = []string{"--transport", "stdio", "--command", binPath, "--arg", "serve", "--arg", "--transport", "--arg", "stdio"}
		for _, kv := range tg.cfg.pairs() {
			flags = append(flags, "--env", kv)
		}
	} else {
		flags = []string{"--transport", tg.transport, "--url-mcp", tg.url}
	}
	return runNodeScript(t, script, scenario, tg.transport, append(flags, extra...))
}

// TestFetchURLTypeScript drives fetch_url with the official TypeScript SDK's
// client over stdio and streamable HTTP: it reads real pages served on
// loopback (which the server reads only because the operator allowed
// 127.0.0.1), pages through a long one, reads a section and a PDF, and is
// refused a redirect to the cloud metadata address, a type it does not
// read, and loopback itself without the allow-list.
func TestFetchURLTypeScript(t *testing.T) {
	requireNode(t)
	t.Parallel()
	fake := searxngtest.New(t)
	pages := newPageServer(t)
	base := baseConfig(fake.URL).with("MCP_fetch_url_enabled=true")
	for _, tc := range fetchTransports {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tg := newTarget(t, tc, base.with("MCP_fetch_url_allow_hosts=127.0.0.1"))
			cases := []struct {
				name, scenario string
				args           []string
			}{
				{"read a page", "read", []string{"--url", pages.URL + "/libffi.html", "--expect-type", "text/html",
					"--expect-text", "ffi_prep_cif", "--expect-text", "puts"}},
				{"read the main content", "read", []string{"--url", pages.URL + "/manual.html", "--expect-type", "text/html",
					"--expect-text", "Raise the signal flag", "--reject-text", "All rights reserved", "--reject-text", "Blog"}},
				{"page through a long page", "page", []string{"--url", pages.URL + "/zlib.html", "--max-length", "4000"}},
				{"a section", "section", []string{"--url", pages.URL + "/manual.html", "--section", "usage",
					"--expect-text", "Raise the signal flag", "--expect-text", "Sound the foghorn",
					"--reject-text", "Run the installer", "--reject-text", "Free to use"}},
				{"a PDF", "read", []string{"--url", pages.URL + "/report.pdf", "--expect-type", "application/pdf",
					"--expect-text", "lighthouse keeper", "--expect-text", "glacier observatory"}},
				{"a page of a PDF", "section", []string{"--url", pages.URL + "/report.pdf", "--section", "page 2",
					"--expect-text", "glacier observatory", "--reject-text", "lighthouse keeper"}},
				{"a redirect to the metadata address", "refused", []string{"--url", pages.URL + "/metadata",
					"--expect-text", "169.254.169.254", "--expect-text", "allow-list"}},
				{"a type it does not read", "refused", []string{"--url", pages.URL + "/image.png", "--expect-text", "image/png"}},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					runFetch(t, tg, c.scenario, c.args...)
				})
			}
			t.Run("loopback without the allow-list", func(t *testing.T) {
				closed := newTarget(t, tc, base)
				runFetch(t, closed, "refused", "--url", pages.URL+"/libffi.html", "--expect-text", "loopback", "--expect-text", "127.0.0.1")
			})
		})
	}
}
