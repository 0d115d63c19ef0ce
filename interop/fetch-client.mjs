#!/usr/bin/env node
// fetch-client.mjs drives mcpsearch's fetch_url tool with the official MCP
// TypeScript SDK's Client, over stdio (starting the binary) or a running
// server's streamable HTTP or SSE endpoint, and checks one scenario.
//
//   node fetch-client.mjs --transport stdio --command BIN --arg serve --arg --transport --arg stdio \
//       --env K=V ... --scenario read --url URL --expect-text T --expect-type text/html
//   node fetch-client.mjs --transport http --url-mcp http://127.0.0.1:8080/mcp --scenario page --url URL --max-length 3000
//   node fetch-client.mjs ... --scenario section --url URL --section Usage --expect-text T --reject-text U
//   node fetch-client.mjs ... --scenario refused --url URL --expect-text loopback
//
// Scenarios:
//   read     one call reads the page: its title, type and text
//   page     reads the page in parts of --max-length, following
//            next_start_index until it is absent; the parts join into the
//            whole text, as one call with the largest max_length returns it
//   section  only the part under the heading --section: it holds every
//            --expect-text and no --reject-text
//   refused  the call fails with TOOL_ERROR, not retryable, whose message
//            holds every --expect-text
// Every scenario first lists the tools, so the SDK validates each result's
// structuredContent against fetch_url's outputSchema.
// On success it prints one JSON line {"ok":true,...} to stdout and exits 0;
// on any failed check it prints {"ok":false,...} and a message on stderr and
// exits 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { closing, connectionFlag, expectError, runMain, textBlocks } from "./scenario.mjs";

const TOOL = "fetch_url";
const CALL_TIMEOUT_MS = 30000;
const SCENARIO_TIMEOUT_MS = 80000;

function parseArgs(argv) {
  const opts = { args: [], env: {}, headers: {}, expectText: [], rejectText: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (connectionFlag(opts, flag, value)) continue;
    switch (flag) {
      case "--transport": opts.transport = value; break;
      case "--command": opts.command = value; break;
      case "--url-mcp": opts.endpoint = value; break;
      case "--scenario": opts.scenario = value; break;
      case "--url": opts.url = value; break;
      case "--max-length": opts.maxLength = parseInt(value, 10); break;
      case "--section": opts.section = value; break;
      case "--expect-text": opts.expectText.push(value); break;
      case "--reject-text": opts.rejectText.push(value); break;
      case "--expect-type": opts.expectType = value; break;
      default: throw new Error(`unknown flag ${flag}`);
    }
  }
  if (!["stdio", "sse", "http"].includes(opts.transport)) throw new Error("--transport must be stdio, sse or http");
  if (opts.transport === "stdio" && !opts.command) throw new Error("--transport stdio needs --command");
  if (opts.transport !== "stdio" && !opts.endpoint) throw new Error(`--transport ${opts.transport} needs --url-mcp`);
  if (!opts.url) throw new Error("--url (the page fetch_url reads) is required");
  return opts;
}

function newTransport(opts) {
  switch (opts.transport) {
    case "stdio":
      return new StdioClientTransport({ command: opts.command, args: opts.args, env: opts.env, stderr: "inherit" });
    case "sse":
      return new SSEClientTransport(new URL(opts.endpoint), { requestInit: { headers: opts.headers } });
    default:
      return new StreamableHTTPClientTransport(new URL(opts.endpoint), { requestInit: { headers: opts.headers } });
  }
}

function fetchURL(client, args) {
  return client.callTool({ name: TOOL, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
}

// fetchOK makes a call that must succeed and returns its structured content
// and text.
async function fetchOK(check, client, args) {
  const r = await fetchURL(client, args);
  check.ok(!r.isError, `fetch_url ${JSON.stringify(args)} failed: ${textBlocks(r).join(" ").slice(0, 500)}`);
  const sc = r.structuredContent;
  check.ok(sc && typeof sc === "object", "fetch_url returned no structuredContent");
  return { sc, text: textBlocks(r).join("\n") };
}

// chars counts characters as the server does: code points, not UTF-16 units.
const chars = (s) => [...s].length;

function expectTexts(check, opts, content, what) {
  for (const t of opts.expectText) {
    check.ok(content.includes(t), `${what} lacks ${JSON.stringify(t)}: ${content.slice(0, 300)}`);
  }
  for (const t of opts.rejectText) {
    check.ok(!content.includes(t), `${what} holds ${JSON.stringify(t)}, which is outside it`);
  }
}

const scenarios = {
  async read(check, client, opts, details) {
    const { sc, text } = await fetchOK(check, client, { url: opts.url });
    check.equal(sc.url, opts.url, "structuredContent.url");
    check.equal(sc.final_url, opts.url, "structuredContent.final_url");
    check.ok(sc.title !== "", "the page has no title");
    if (opts.expectType) check.equal(sc.content_type, opts.expectType, "structuredContent.content_type");
    check.equal(sc.start_index, 0, "structuredContent.start_index");
    check.equal(sc.truncated, sc.next_start_index !== undefined, "truncated agrees with next_start_index");
    check.ok(chars(sc.content) <= sc.total_length, "content longer than total_length");
    expectTexts(check, opts, sc.content, "the page");
    check.ok(text.includes(sc.title) && text.includes(sc.final_url), `text block lacks the title or URL: ${text.slice(0, 300)}`);
    check.ok(!sc.content.includes("<script") && !sc.content.includes("</div>"), "the content still holds HTML");
    details.title = sc.title;
    details.total_length = sc.total_length;
  },

  async page(check, client, opts, details) {
    check.ok(Number.isInteger(opts.maxLength), "page needs --max-length");
    const whole = (await fetchOK(check, client, { url: opts.url, max_length: 100000 })).sc;
    check.ok(!whole.truncated, `the page is longer than 100000 characters (${whole.total_length})`);
    let start = 0;
    let joined = "";
    let parts = 0;
    for (;;) {
      const args = { url: opts.url, max_length: opts.maxLength };
      if (start > 0) args.start_index = start;
      const { sc, text } = await fetchOK(check, client, args);
      parts++;
      check.ok(parts <= 200, "more than 200 parts: next_start_index does not advance");
      check.equal(sc.start_index, start, `start_index of part ${parts}`);
      check.equal(sc.total_length, whole.total_length, `total_length of part ${parts}`);
      check.ok(chars(sc.content) <= opts.maxLength, `part ${parts} has ${chars(sc.content)} characters, more than max_length ${opts.maxLength}`);
      joined += sc.content;
      if (sc.next_start_index === undefined) {
        check.equal(sc.truncated, false, `truncated of the last part`);
        check.ok(text.includes("[End of page.]"), `the last part's text does not say the page ends: ${text.slice(-200)}`);
        break;
      }
      check.equal(sc.truncated, true, `truncated of part ${parts}`);
      check.ok(sc.next_start_index > start, `next_start_index ${sc.next_start_index} does not advance past ${start}`);
      check.equal(sc.next_start_index, start + chars(sc.content), `next_start_index of part ${parts}`);
      check.ok(text.includes(`start_index ${sc.next_start_index}`), `part ${parts}'s text does not say how to read on`);
      start = sc.next_start_index;
    }
    check.ok(parts > 1, `the page came in one part of max_length ${opts.maxLength}; want several`);
    check.equal(chars(joined), whole.total_length, "characters of the joined parts");
    check.ok(joined === whole.content, "the joined parts differ from the page read in one call");
    details.parts = parts;
    details.total_length = whole.total_length;
  },

  async section(check, client, opts, details) {
    check.ok(opts.section, "section needs --section");
    const page = (await fetchOK(check, client, { url: opts.url, max_length: 100000 })).sc;
    const { sc } = await fetchOK(check, client, { url: opts.url, section: opts.section });
    check.ok(sc.total_length < page.total_length, `section ${opts.section} is the whole page (${sc.total_length} characters)`);
    check.ok(page.content.includes(sc.content.trim()), "the section is not a part of the page");
    expectTexts(check, opts, sc.content, `section ${JSON.stringify(opts.section)}`);
    details.section_length = sc.total_length;
    details.page_length = page.total_length;
  },

  async refused(check, client, opts, details) {
    const r = await fetchURL(client, { url: opts.url });
    const err = expectError(check, r, `fetch_url ${opts.url}`, { code: "TOOL_ERROR", retryable: false, substrings: opts.expectText });
    details.error = err.message;
  },
};

async function drive(opts, run, check, details) {
  const client = new Client({ name: "mcpsearch-interop-fetch", version: "1.0.0" });
  const transport = newTransport(opts);
  await closing(async () => {
    await client.connect(transport);
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === TOOL);
    check.ok(tool, `tools/list does not offer ${TOOL}: ${JSON.stringify(tools.map((t) => t.name))}`);
    check.ok(tool.outputSchema?.type === "object", "fetch_url declares no object outputSchema");
    check.equal(tool.annotations?.readOnlyHint, true, "annotations.readOnlyHint");
    await run(check, client, opts, details);
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
      await transport.terminateSession();
    }
  }, () => client.close());
}

runMain("fetch-client", { argv: process.argv.slice(2), parseArgs, scenarios, drive, timeoutMs: SCENARIO_TIMEOUT_MS });
