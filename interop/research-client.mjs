#!/usr/bin/env node
// research-client.mjs drives mcpsearch's reading tools with the official MCP
// TypeScript SDK's Client, over stdio (starting the binary) or a running
// server's streamable HTTP endpoint, and checks one scenario.
//
//   node research-client.mjs --transport stdio --command BIN --arg serve --arg --transport --arg stdio \
//       --env K=V ... --scenario answer --query Q --read 4 --expect-text T --expect-url U
//   node research-client.mjs --transport http --url-mcp http://127.0.0.1:8080/mcp --scenario ask --url U --query Q --expect-text T
//
// Scenarios:
//   answer  web_search with read: the first passage holds every
//           --expect-text and comes from --expect-url, each page read is
//           reported, the passages name their result, and the text block
//           lists the passage under its result number and URL
//   ask     fetch_url with query: the first passage holds every --expect-text
//           and the call returns no window of the page
// Every scenario first lists the tools, so the SDK validates each result's
// structuredContent against the tool's outputSchema.
// On success it prints one JSON line {"ok":true,...} to stdout and exits 0;
// on any failed check it prints {"ok":false,...} and a message on stderr and
// exits 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { closing, connectionFlag, runMain, textBlocks } from "./scenario.mjs";

const CALL_TIMEOUT_MS = 30000;
const SCENARIO_TIMEOUT_MS = 80000;

function parseArgs(argv) {
  const opts = { args: [], env: {}, headers: {}, expectText: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (connectionFlag(opts, flag, value)) continue;
    switch (flag) {
      case "--transport": opts.transport = value; break;
      case "--command": opts.command = value; break;
      case "--url-mcp": opts.endpoint = value; break;
      case "--scenario": opts.scenario = value; break;
      case "--query": opts.query = value; break;
      case "--read": opts.read = parseInt(value, 10); break;
      case "--url": opts.url = value; break;
      case "--expect-url": opts.expectURL = value; break;
      case "--expect-text": opts.expectText.push(value); break;
      default: throw new Error(`unknown flag ${flag}`);
    }
  }
  if (!["stdio", "http"].includes(opts.transport)) throw new Error("--transport must be stdio or http");
  if (opts.transport === "stdio" && !opts.command) throw new Error("--transport stdio needs --command");
  if (opts.transport !== "stdio" && !opts.endpoint) throw new Error(`--transport ${opts.transport} needs --url-mcp`);
  if (!opts.query) throw new Error("--query is required");
  return opts;
}

function newTransport(opts) {
  if (opts.transport === "stdio") {
    return new StdioClientTransport({ command: opts.command, args: opts.args, env: opts.env, stderr: "inherit" });
  }
  return new StreamableHTTPClientTransport(new URL(opts.endpoint), { requestInit: { headers: opts.headers } });
}

async function callOK(check, client, name, args) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
  check.ok(!r.isError, `${name} ${JSON.stringify(args)} failed: ${textBlocks(r).join(" ").slice(0, 500)}`);
  const sc = r.structuredContent;
  check.ok(sc && typeof sc === "object", `${name} returned no structuredContent`);
  return { sc, text: textBlocks(r).join("\n") };
}

const scenarios = {
  async answer(check, client, opts, details) {
    check.ok(Number.isInteger(opts.read), "answer needs --read");
    const { sc, text } = await callOK(check, client, "web_search", { query: opts.query, read: opts.read, max_passages: 5 });
    check.ok(Array.isArray(sc.pages) && sc.pages.length === opts.read, `pages: ${JSON.stringify(sc.pages)}`);
    for (const p of sc.pages) {
      check.ok(p.status === "read" && p.chars > 0 && Number.isInteger(p.ms), `page not read: ${JSON.stringify(p)}`);
    }
    check.ok(Array.isArray(sc.passages) && sc.passages.length > 0 && sc.passages.length <= 5, `passages: ${JSON.stringify(sc.passages)}`);
    const first = sc.passages[0];
    for (const t of opts.expectText) check.ok(first.text.includes(t), `the first passage lacks ${JSON.stringify(t)}: ${first.text}`);
    if (opts.expectURL) check.equal(first.url, opts.expectURL, "the first passage's url");
    check.equal(sc.results[first.result - 1].url, first.url, "the first passage's result");
    check.ok(text.includes(`[${first.result}] ${first.url}`), `the text does not list the passage under [n] and its URL: ${text.slice(0, 600)}`);
    const pageChars = sc.pages.reduce((n, p) => n + p.chars, 0);
    const passageChars = sc.passages.reduce((n, p) => n + [...p.text].length, 0);
    details.pages_chars = pageChars;
    details.passages_chars = passageChars;
    details.first = first.heading;
  },

  async ask(check, client, opts, details) {
    check.ok(opts.url, "ask needs --url");
    const { sc } = await callOK(check, client, "fetch_url", { url: opts.url, query: opts.query });
    check.ok(Array.isArray(sc.passages) && sc.passages.length > 0, `passages: ${JSON.stringify(sc.passages)}`);
    check.equal(sc.content, "", "content of a call with query");
    for (const t of opts.expectText) check.ok(sc.passages[0].text.includes(t), `the first passage lacks ${JSON.stringify(t)}: ${sc.passages[0].text}`);
    details.total_length = sc.total_length;
    details.passages = sc.passages.length;
  },
};

async function drive(opts, run, check, details) {
  const client = new Client({ name: "mcpsearch-interop-research", version: "1.0.0" });
  const transport = newTransport(opts);
  await closing(async () => {
    await client.connect(transport);
    const { tools } = await client.listTools();
    for (const name of ["web_search", "fetch_url"]) {
      const tool = tools.find((t) => t.name === name);
      check.ok(tool, `tools/list does not offer ${name}`);
      check.ok(tool.outputSchema?.properties?.passages, `${name}'s outputSchema has no passages`);
    }
    const ws = tools.find((t) => t.name === "web_search");
    check.ok(ws.inputSchema.properties.read?.maximum >= 1, `web_search's read: ${JSON.stringify(ws.inputSchema.properties.read)}`);
    await run(check, client, opts, details);
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
      await transport.terminateSession();
    }
  }, () => client.close());
}

runMain("research-client", { argv: process.argv.slice(2), parseArgs, scenarios, drive, timeoutMs: SCENARIO_TIMEOUT_MS });
