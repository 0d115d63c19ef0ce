#!/usr/bin/env node
// ts2-client.mjs drives a running mcpsearch (or one it starts over stdio) with
// the official TypeScript SDK's v2 client package, @modelcontextprotocol/client,
// negotiating the protocol revision itself (server/discover first, the
// initialize handshake only as a fallback), and checks one scenario.
//
//   node ts2-client.mjs --transport stdio --command BIN --arg serve --env K=V ... --scenario session \
//       --expect-version 2026-07-28 --expect-tools web_search,search_docs,list_files,get_chunk,add_document \
//       --write-tools add_document \
//       --query Q --expect-first-url URL --conversation C --file-name F --file-phrase P --doc-query Q
//   node ts2-client.mjs --transport http --url http://127.0.0.1:8080/mcp --header "Authorization: Bearer KEY" \
//       --scenario scoped --conversation MINE --other-conversation THEIRS --other-file-id ID --other-chunk-id ID
//   node ts2-client.mjs --transport http --url ... --scenario ratelimited --burst 2
//   node ts2-client.mjs --transport http --url ... --scenario cache-hints --conversation C --file-id ID
//
// Scenarios:
//   session      discover, tools/list and every tool (and two failing calls),
//                resources/list and read
//   scoped       a key scoped to --conversation reaches nothing of --other-conversation,
//                and its chunks are answered like unknown ones
//   ratelimited  --burst calls of web_search pass, the next one is RATE_LIMITED
//   cache-hints  the ttlMs and cacheScope of tools/list, resources/list and resources/read
//   add-pdf, progress
//                the scenarios of add_document and its jobs (jobs-scenarios.mjs,
//                whose flags they take)
// Every scenario first checks that the negotiated revision is --expect-version
// (default 2026-07-28). The report's details carry the protocol version, the
// client's name and version as it sent them, and the number of tools/call
// requests made, for the caller to compare with the server's audit rows.
// On success it prints one JSON line {"ok":true,...} to stdout and exits 0;
// on any failed check it prints {"ok":false,...} and a message on stderr and
// exits 1.

import { readFileSync } from "node:fs";

import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

import { jobsFlags, jobsScenarios } from "./jobs-scenarios.mjs";
import { CheckError, closing, connectionFlag, expectError, runMain, textBlocks } from "./scenario.mjs";

const CALL_TIMEOUT_MS = 20000;
const SCENARIO_TIMEOUT_MS = 60000;

// CLIENT is what this client calls itself; its version is the SDK's, so an
// audit row names the exact client that made the call.
const CLIENT = {
  name: "mcpsearch-interop-ts2",
  version: JSON.parse(readFileSync(new URL("./node_modules/@modelcontextprotocol/client/package.json", import.meta.url))).version,
};

// flags maps every value flag to the option it sets and how to parse it.
const flags = {
  "--transport": ["transport", String],
  "--command": ["command", String],
  "--url": ["url", String],
  "--scenario": ["scenario", String],
  "--expect-version": ["expectVersion", String],
  "--expect-tools": ["expectTools", (v) => v.split(",")],
  "--write-tools": ["writeTools", (v) => v.split(",")],
  "--query": ["query", String],
  "--expect-first-url": ["expectFirstURL", String],
  "--conversation": ["conversation", String],
  "--file-name": ["fileName", String],
  "--file-id": ["fileID", String],
  "--file-phrase": ["filePhrase", String],
  "--doc-query": ["docQuery", String],
  "--other-conversation": ["otherConversation", String],
  "--other-file-id": ["otherFileID", String],
  "--other-chunk-id": ["otherChunkID", String],
  "--burst": ["burst", (v) => parseInt(v, 10)],
};

function parseArgs(argv) {
  const opts = { args: [], env: {}, headers: {}, expectVersion: "2026-07-28", query: "mcp interop" };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (i + 1 >= argv.length) {
      throw new Error(`${flag} needs a value`);
    }
    const value = argv[++i];
    if (connectionFlag(opts, flag, value)) continue;
    const spec = flags[flag] ?? jobsFlags[flag];
    if (!spec) throw new Error(`unknown flag ${flag}`);
    opts[spec[0]] = spec[1](value);
  }
  if (!["stdio", "http"].includes(opts.transport)) {
    throw new Error("--transport must be stdio or http");
  }
  if (opts.transport === "stdio" && !opts.command) {
    throw new Error("--transport stdio needs --command");
  }
  if (opts.transport === "http" && !opts.url) {
    throw new Error("--transport http needs --url");
  }
  return opts;
}

function newTransport(opts) {
  if (opts.transport === "stdio") {
    // The server's logs go to our stderr, where the test shows them on failure.
    return new StdioClientTransport({ command: opts.command, args: opts.args, env: opts.env, stderr: "inherit" });
  }
  return new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers: opts.headers } });
}

// need fails the scenario unless the flags it depends on were given.
function need(check, opts, ...names) {
  for (const n of names) {
    check.ok(opts[n] !== undefined, `scenario ${opts.scenario} needs the option ${n}`);
  }
}

// call makes one tools/call and counts it, so the test can match the audit.
function call(client, details, name, args) {
  details.tool_calls = (details.tool_calls ?? 0) + 1;
  return client.callTool({ name, arguments: args }, { timeout: CALL_TIMEOUT_MS });
}

// callOK makes a call that must succeed and returns its structured content.
async function callOK(check, client, details, name, args) {
  const r = await call(client, details, name, args);
  check.ok(!r.isError, `${name} ${JSON.stringify(args)} failed: ${textBlocks(r).join(" ").slice(0, 500)}`);
  check.ok(r.structuredContent && typeof r.structuredContent === "object", `${name} returned no structuredContent`);
  check.ok(textBlocks(r).length > 0, `${name} returned no text block`);
  return { sc: r.structuredContent, text: textBlocks(r).join("\n") };
}

// rejects runs fn and returns the ProtocolError it must throw.
async function rejects(check, what, fn) {
  try {
    const r = await fn();
    throw new CheckError(`${what}: want a JSON-RPC error, got ${JSON.stringify(r).slice(0, 300)}`);
  } catch (e) {
    if (e instanceof CheckError) throw e;
    check.ok(e instanceof ProtocolError, `${what}: want a ProtocolError, got ${e}`);
    return e;
  }
}

function fileURI(conv, fileID) {
  return `mcpsearch://conversations/${encodeURIComponent(conv)}/files/${fileID}`;
}

const scenarios = {
  async session(check, client, opts, details) {
    need(check, opts, "expectTools", "conversation", "fileName", "filePhrase", "docQuery");
    const info = client.getServerVersion();
    check.equal(info?.name, "mcpsearch", "serverInfo.name");
    check.ok(typeof info?.version === "string" && info.version !== "", "serverInfo.version is empty");
    check.ok(client.getServerCapabilities()?.tools, "server does not declare the tools capability");

    // server/discover again, now as a request of the negotiated session.
    const disc = await client.discover({ timeout: CALL_TIMEOUT_MS });
    check.ok(Array.isArray(disc.supportedVersions) && disc.supportedVersions.includes(opts.expectVersion),
      `server/discover supportedVersions ${JSON.stringify(disc.supportedVersions)} lacks ${opts.expectVersion}`);
    check.ok(disc.supportedVersions.includes("2025-11-25"),
      `server/discover no longer offers 2025-11-25 to older clients: ${JSON.stringify(disc.supportedVersions)}`);
    check.ok(disc.capabilities?.tools, "server/discover declares no tools capability");
    details.supported_versions = disc.supportedVersions;

    const { tools } = await client.listTools();
    check.equal(tools.map((t) => t.name).sort().join(","), [...opts.expectTools].sort().join(","), "tools/list names");
    for (const t of tools) {
      check.equal(t.inputSchema?.type, "object", `${t.name} inputSchema.type`);
      check.equal(t.outputSchema?.type, "object", `${t.name} outputSchema.type`);
      check.equal(t.annotations?.readOnlyHint, !(opts.writeTools ?? []).includes(t.name), `${t.name} annotations.readOnlyHint`);
    }

    // The client validates every structuredContent against the outputSchema
    // of tools/list above; a mismatch throws.
    const web = await callOK(check, client, details, "web_search", { query: opts.query, max_results: 3 });
    check.equal(web.sc.query, opts.query, "web_search structuredContent.query");
    check.equal(web.sc.results?.length, 3, "web_search number of results");
    if (opts.expectFirstURL) {
      check.equal(web.sc.results[0].url, opts.expectFirstURL, "web_search results[0].url");
    }

    // Errors travel as results of the revision too, and the session outlives them.
    const invalid = await call(client, details, "web_search", { query: opts.query, max_results: 1000 });
    expectError(check, invalid, "web_search with max_results 1000", { code: "TOOL_ERROR", retryable: false, substrings: ["max_results"] });
    const unknown = await rejects(check, "calling an unknown tool", () => call(client, details, "no_such_tool", {}));
    check.ok(unknown.message.includes("no_such_tool"), `the error does not name the tool: ${unknown.message}`);

    const files = await callOK(check, client, details, "list_files", { conversation_id: opts.conversation });
    const file = files.sc.files?.find((f) => f.file_name === opts.fileName);
    check.ok(file, `list_files of ${opts.conversation} lacks ${opts.fileName}: ${JSON.stringify(files.sc)}`);
    check.equal(file.status, "ready", `${opts.fileName} status`);
    check.ok(file.chunk_count > 0, `${opts.fileName} has no chunks`);

    const found = await callOK(check, client, details, "search_docs",
      { query: opts.docQuery, conversation_id: opts.conversation, top_k: 3 });
    check.ok(found.sc.chunks?.length > 0, `search_docs ${JSON.stringify(opts.docQuery)} found nothing: ${found.text.slice(0, 300)}`);
    const top = found.sc.chunks[0];
    check.equal(top.file_name, opts.fileName, "search_docs top chunk's file");
    check.equal(top.file_id, file.id, "search_docs top chunk's file_id");
    check.ok(top.content.includes(opts.filePhrase), `top chunk lacks ${JSON.stringify(opts.filePhrase)}: ${top.content}`);

    const chunk = await callOK(check, client, details, "get_chunk", { chunk_id: top.chunk_id });
    check.equal(chunk.sc.chunk_id, top.chunk_id, "get_chunk chunk_id");
    check.equal(chunk.sc.content, top.content, "get_chunk content");
    check.equal(chunk.sc.metadata?.file_id, file.id, "get_chunk metadata.file_id");

    const uri = fileURI(opts.conversation, file.id);
    const { resources } = await client.listResources();
    check.ok(resources.some((r) => r.uri === uri && r.name === opts.fileName),
      `resources/list lacks ${uri}: ${JSON.stringify(resources.map((r) => r.uri))}`);
    const { resourceTemplates } = await client.listResourceTemplates();
    check.ok(resourceTemplates.some((t) => t.uriTemplate.startsWith("mcpsearch://conversations/")),
      `resources/templates/list lacks the file template: ${JSON.stringify(resourceTemplates)}`);
    const read = await client.readResource({ uri });
    check.equal(read.contents?.length, 1, "resources/read number of contents");
    check.equal(read.contents[0].uri, uri, "resources/read contents[0].uri");
    check.ok(read.contents[0].text?.includes(opts.filePhrase),
      `resources/read text lacks ${JSON.stringify(opts.filePhrase)}: ${String(read.contents[0].text).slice(0, 300)}`);
    const missing = await rejects(check, "resources/read of an unknown file",
      () => client.readResource({ uri: fileURI(opts.conversation, "00000000-0000-0000-0000-000000000000") }));
    // SEP-2164: an unknown resource is invalid params.
    check.equal(missing.code, -32602, "resources/read of an unknown file: JSON-RPC error code");
  },

  async scoped(check, client, opts, details) {
    need(check, opts, "conversation", "otherConversation", "otherFileID", "otherChunkID");
    const mine = await callOK(check, client, details, "list_files", { conversation_id: opts.conversation });
    check.ok(Array.isArray(mine.sc.files), "list_files of the key's own conversation");
    const forbidden = [
      ["list_files", { conversation_id: opts.otherConversation }],
      ["search_docs", { query: "anything", conversation_id: opts.otherConversation }],
    ];
    for (const [name, args] of forbidden) {
      const r = await call(client, details, name, args);
      expectError(check, r, `${name} outside the key's conversations`, { code: "AUTH_ERROR", retryable: false });
    }
    // A chunk of another conversation is answered exactly like an unknown
    // one, so that chunk ids reveal nothing across conversations.
    const unknownID = "00000000-0000-0000-0000-000000000000";
    const foreign = expectError(check, await call(client, details, "get_chunk", { chunk_id: opts.otherChunkID }),
      "get_chunk outside the key's conversations", { code: "TOOL_ERROR", retryable: false });
    const unknown = expectError(check, await call(client, details, "get_chunk", { chunk_id: unknownID }),
      "get_chunk of an unknown chunk", { code: "TOOL_ERROR", retryable: false });
    check.equal(foreign.message.replaceAll(opts.otherChunkID, "ID"), unknown.message.replaceAll(unknownID, "ID"),
      "get_chunk outside the key's conversations, answered as an unknown chunk");
    const theirs = fileURI(opts.otherConversation, opts.otherFileID);
    const { resources } = await client.listResources();
    check.ok(!resources.some((r) => r.uri === theirs), `resources/list shows a file outside the key's conversations: ${theirs}`);
    const err = await rejects(check, "resources/read outside the key's conversations", () => client.readResource({ uri: theirs }));
    // A file the key may not read is as unknown as one that does not exist.
    check.equal(err.code, -32602, "resources/read outside the key's conversations: JSON-RPC error code");
  },

  async ratelimited(check, client, opts, details) {
    need(check, opts, "burst");
    for (let i = 1; i <= opts.burst; i++) {
      await callOK(check, client, details, "web_search", { query: `${opts.query} ${i}`, max_results: 1 });
    }
    const r = await call(client, details, "web_search", { query: `${opts.query} over`, max_results: 1 });
    const err = expectError(check, r, `call ${opts.burst + 1}`, { code: "RATE_LIMITED", retryable: true });
    check.ok(Number.isInteger(err.retry_after_ms) && err.retry_after_ms > 0,
      `retry_after_ms should be a positive integer, got ${JSON.stringify(err.retry_after_ms)}`);
    details.retry_after_ms = err.retry_after_ms;
  },

  async "cache-hints"(check, client, opts, details) {
    need(check, opts, "conversation", "fileID");
    // "refresh" asks the server even when the client holds a fresh copy.
    const fresh = { cacheMode: "refresh", timeout: CALL_TIMEOUT_MS };
    const tools = await client.listTools(undefined, fresh);
    check.ok(Number.isInteger(tools.ttlMs) && tools.ttlMs >= 60000,
      `tools/list ttlMs ${JSON.stringify(tools.ttlMs)}: tools change only with the configuration, want a minute or more`);
    check.equal(tools.cacheScope, "public", "tools/list cacheScope (the same tools for every caller)");
    const list = await client.listResources(undefined, fresh);
    check.equal(list.cacheScope, "private", "resources/list cacheScope (what is listed depends on the key)");
    check.ok(Number.isInteger(list.ttlMs), `resources/list ttlMs ${JSON.stringify(list.ttlMs)} is not an integer`);
    const read = await client.readResource({ uri: fileURI(opts.conversation, opts.fileID) }, fresh);
    check.ok(Number.isInteger(read.ttlMs) && read.ttlMs > 0,
      `resources/read ttlMs ${JSON.stringify(read.ttlMs)}: a file's text does not change, want a positive TTL`);
    check.equal(read.cacheScope, "private", "resources/read cacheScope (whether a file may be read depends on the key)");
    details.ttl_ms = { "tools/list": tools.ttlMs, "resources/list": list.ttlMs, "resources/read": read.ttlMs };
  },
};

// The scenarios of add_document, through this client's callTool.
for (const [name, run] of Object.entries(jobsScenarios)) {
  scenarios[name] = (check, client, opts, details) => run(check, {
    call: (tool, args, options) => {
      details.tool_calls = (details.tool_calls ?? 0) + 1;
      return client.callTool({ name: tool, arguments: args }, options);
    },
    listTools: () => client.listTools(),
  }, opts, details);
}

// drive connects with version negotiation in auto mode, checks the revision
// it got, runs the scenario and closes the client.
async function drive(opts, run, check, details) {
  const client = new Client(CLIENT, { versionNegotiation: { mode: "auto" } });
  const transport = newTransport(opts);
  details.client = CLIENT;
  await closing(async () => {
    await client.connect(transport);
    details.protocol_version = client.getNegotiatedProtocolVersion();
    details.era = client.getProtocolEra();
    check.equal(details.protocol_version, opts.expectVersion, "negotiated protocol version");
    check.equal(details.era, "modern", "protocol era");
    check.ok(client.getDiscoverResult(), "the client negotiated without server/discover");
    await run(check, client, opts, details);
  }, () => client.close());
}

runMain("ts2-client", { argv: process.argv.slice(2), parseArgs, scenarios, drive, timeoutMs: SCENARIO_TIMEOUT_MS });
