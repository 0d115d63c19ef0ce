#!/usr/bin/env node
// ts-client.mjs drives a running mcpsearch (or one it starts over stdio) with
// the official MCP TypeScript SDK and checks one scenario of the contract.
//
//   node ts-client.mjs --transport stdio --command BIN --arg serve --env K=V ... --scenario basic
//   node ts-client.mjs --transport http --url http://127.0.0.1:8080/mcp --scenario invalid
//   node ts-client.mjs --transport sse --url http://127.0.0.1:8080/sse --scenario upstream \
//       --expect-code TOOL_ERROR --expect-retryable false --expect-message-substring search.formats
//   node ts-client.mjs --transport http --url ... --header "Authorization: Bearer KEY" --scenario basic
//   node ts-client.mjs --transport http --url ... --header "Authorization: Bearer WRONG" \
//       --scenario unauthorized --expect-status 401
//
// Scenarios: basic, invalid, ratelimited, unknown-tool, upstream, timeout,
// oversize (a tools/call past the server's 4 MB message limit),
// unauthorized (connecting must fail with the HTTP status --expect-status),
// and add-pdf and progress, the scenarios of add_document and its jobs
// (jobs-scenarios.mjs, whose flags they take).
// --header NAME:VALUE (repeatable) is sent on every HTTP request, the event
// stream's GET included.
// On success it prints one JSON line {"ok":true,...} to stdout and exits 0;
// on any failed check it prints {"ok":false,...} and a message on stderr and
// exits 1. Knowledge of the fake SearXNG (expected URLs, engines, counts)
// comes in through flags, so this file only knows the MCP contract.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

import { jobsFlags, jobsScenarios } from "./jobs-scenarios.mjs";
import { CheckError, closing, connectionFlag, expectError, runMain, textBlocks } from "./scenario.mjs";

const TOOL = "web_search";
const CALL_TIMEOUT_MS = 20000;
const SCENARIO_TIMEOUT_MS = 60000;

function parseArgs(argv) {
  const opts = { args: [], env: {}, headers: {}, scenario: "basic", query: "mcp interop", maxResults: 3 };
  const repeatable = new Set(["--arg", "--env", "--header"]);
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (!flag.startsWith("--")) {
      throw new Error(`unexpected argument ${JSON.stringify(flag)}`);
    }
    let value;
    const eq = flag.indexOf("=");
    let name = flag;
    if (eq > 0 && !repeatable.has(flag.slice(0, eq))) {
      name = flag.slice(0, eq);
      value = flag.slice(eq + 1);
    } else {
      if (i + 1 >= argv.length) {
        throw new Error(`${flag} needs a value`);
      }
      value = argv[++i];
    }
    if (connectionFlag(opts, name, value)) continue;
    switch (name) {
      case "--transport": opts.transport = value; break;
      case "--command": opts.command = value; break;
      case "--url": opts.url = value; break;
      case "--scenario": opts.scenario = value; break;
      case "--query": opts.query = value; break;
      case "--max-results": opts.maxResults = parseInt(value, 10); break;
      case "--expect-results": opts.expectResults = parseInt(value, 10); break;
      case "--expect-first-url": opts.expectFirstURL = value; break;
      case "--expect-merged-engine": opts.expectMergedEngine = value; break;
      case "--expect-code": opts.expectCode = value; break;
      case "--expect-retryable":
        if (value !== "true" && value !== "false") throw new Error("--expect-retryable wants true or false");
        opts.expectRetryable = value === "true";
        break;
      case "--expect-message-substring": opts.expectMessage = value; break;
      case "--burst": opts.burst = parseInt(value, 10); break;
      case "--expect-status": opts.expectStatus = parseInt(value, 10); break;
      default: {
        const spec = jobsFlags[name];
        if (!spec) throw new Error(`unknown flag ${name}`);
        opts[spec[0]] = spec[1](value);
      }
    }
  }
  if (!["stdio", "sse", "http"].includes(opts.transport)) {
    throw new Error("--transport must be stdio, sse or http");
  }
  if (opts.transport === "stdio" && !opts.command) {
    throw new Error("--transport stdio needs --command");
  }
  if (opts.transport !== "stdio" && !opts.url) {
    throw new Error(`--transport ${opts.transport} needs --url`);
  }
  return opts;
}

function newTransport(opts) {
  switch (opts.transport) {
    case "stdio":
      // The server's logs go to our stderr, where the test shows them on failure.
      return new StdioClientTransport({ command: opts.command, args: opts.args, env: opts.env, stderr: "inherit" });
    case "sse":
      // requestInit's headers go on the event stream's GET and on every POST.
      return new SSEClientTransport(new URL(opts.url), { requestInit: { headers: opts.headers } });
    default:
      return new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers: opts.headers } });
  }
}

function call(client, args) {
  return client.callTool({ name: TOOL, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
}

async function listWebSearch(check, client) {
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === TOOL);
  check.ok(tool, `tools/list does not offer ${TOOL}: got ${JSON.stringify(tools.map((t) => t.name))}`);
  return tool;
}

const scenarios = {
  async basic(check, client, opts, details) {
    const info = client.getServerVersion();
    check.equal(info?.name, "mcpsearch", "serverInfo.name");
    check.ok(typeof info?.version === "string" && info.version !== "", "serverInfo.version is empty");
    check.ok(client.getServerCapabilities()?.tools, "server does not declare the tools capability");

    const tool = await listWebSearch(check, client);
    const schema = tool.inputSchema;
    check.equal(schema?.type, "object", "inputSchema.type");
    check.ok(Array.isArray(schema.required) && schema.required.includes("query"),
      `inputSchema.required does not list query: ${JSON.stringify(schema.required)}`);
    check.equal(schema.properties?.query?.type, "string", "inputSchema.properties.query.type");
    for (const p of ["max_results", "language", "categories", "time_range", "page", "safesearch"]) {
      check.ok(schema.properties?.[p], `inputSchema has no property ${p}`);
    }
    check.ok(tool.outputSchema?.type === "object", "web_search declares no object outputSchema");
    check.equal(tool.annotations?.readOnlyHint, true, "annotations.readOnlyHint");

    // The SDK validates structuredContent against the outputSchema cached by
    // listTools above; a mismatch throws here.
    const result = await call(client, { query: opts.query, max_results: opts.maxResults });
    check.ok(!result.isError, `web_search failed: ${textBlocks(result).join(" ").slice(0, 500)}`);
    const sc = result.structuredContent;
    check.ok(sc && typeof sc === "object", "web_search returned no structuredContent");
    check.equal(sc.query, opts.query, "structuredContent.query");
    check.ok(Array.isArray(sc.results), "structuredContent.results is not an array");
    check.ok(Array.isArray(sc.suggestions), "structuredContent.suggestions is not an array");
    const want = opts.expectResults ?? opts.maxResults;
    check.equal(sc.results.length, want, "number of results");
    for (const [i, r] of sc.results.entries()) {
      for (const f of ["title", "url", "content", "engine"]) {
        check.ok(typeof r[f] === "string", `results[${i}].${f} is not a string: ${JSON.stringify(r)}`);
      }
      check.ok(r.title !== "" && /^https?:\/\//.test(r.url), `results[${i}] has no title or URL: ${JSON.stringify(r)}`);
      if (r.engines !== undefined) {
        check.ok(Array.isArray(r.engines), `results[${i}].engines is not an array`);
      }
    }
    const urls = sc.results.map((r) => r.url);
    check.equal(new Set(urls).size, urls.length, `distinct URLs among ${JSON.stringify(urls)}`);
    if (opts.expectFirstURL) {
      check.equal(sc.results[0].url, opts.expectFirstURL, "results[0].url");
    }
    if (opts.expectMergedEngine) {
      // The duplicate hit from another engine must be folded into the first
      // result instead of appearing as a result of its own.
      const engines = sc.results[0].engines ?? [];
      check.ok(engines.includes(opts.expectMergedEngine),
        `results[0].engines ${JSON.stringify(engines)} lacks ${opts.expectMergedEngine}: duplicate URLs were not merged`);
    }

    const texts = textBlocks(result);
    check.ok(texts.length > 0, "web_search result has no text block");
    const text = texts.join("\n");
    check.ok(text.includes(`1. ${sc.results[0].title}`), `text block lacks "1. ${sc.results[0].title}": ${text.slice(0, 300)}`);
    check.ok(text.includes(sc.results[0].url), "text block lacks the first URL");
    check.ok(text.includes(`${sc.results.length}. `), `text block does not number result ${sc.results.length}`);
    details.results = sc.results.length;
  },

  async invalid(check, client) {
    const cases = [
      { what: "empty query", args: { query: "   " }, substrings: ["query", "send"] },
      { what: "missing query", args: {}, substrings: ["query"] },
      { what: "max_results 1000", args: { query: "x", max_results: 1000 }, substrings: ["max_results", "send 1 to"] },
      { what: "negative max_results", args: { query: "x", max_results: -1 }, substrings: ["max_results", "send"] },
      { what: "unknown category", args: { query: "x", categories: ["nope"] }, substrings: ["nope", "general"] },
      { what: "unknown time_range", args: { query: "x", time_range: "decade" }, substrings: ["decade", "day"] },
      { what: "safesearch 7", args: { query: "x", safesearch: 7 }, substrings: ["safesearch", "send"] },
      { what: "max_results of the wrong type", args: { query: "x", max_results: "five" }, substrings: ["max_results", "integer"] },
      { what: "unknown argument", args: { query: "x", colour: "blue" }, substrings: ["colour"] },
    ];
    for (const c of cases) {
      const result = await call(client, c.args);
      expectError(check, result, c.what, { code: "TOOL_ERROR", retryable: false, substrings: c.substrings });
    }
  },

  async ratelimited(check, client, opts, details) {
    const burst = opts.burst ?? 2;
    for (let i = 1; i <= burst; i++) {
      const r = await call(client, { query: `${opts.query} ${i}`, max_results: 1 });
      check.ok(!r.isError, `call ${i} of a burst of ${burst} failed: ${textBlocks(r).join(" ").slice(0, 300)}`);
    }
    const r = await call(client, { query: `${opts.query} over`, max_results: 1 });
    const err = expectError(check, r, `call ${burst + 1}`, { code: "RATE_LIMITED", retryable: true });
    check.ok(Number.isInteger(err.retry_after_ms) && err.retry_after_ms > 0,
      `retry_after_ms should be a positive integer, got ${JSON.stringify(err.retry_after_ms)}`);
    details.retry_after_ms = err.retry_after_ms;
  },

  async "unknown-tool"(check, client) {
    let thrown;
    try {
      const r = await client.callTool({ name: "no_such_tool", arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
      throw new CheckError(`calling an unknown tool returned a result instead of a JSON-RPC error: ${JSON.stringify(r).slice(0, 300)}`);
    } catch (e) {
      if (e instanceof CheckError) throw e;
      thrown = e;
    }
    check.ok(thrown instanceof McpError, `want an McpError, got ${thrown}`);
    check.ok(Number.isInteger(thrown.code) && thrown.code < 0, `want a negative JSON-RPC error code, got ${thrown.code}`);
    check.ok(thrown.message.includes("no_such_tool"), `error message does not name the tool: ${thrown.message}`);
    // The session must survive the error.
    const tool = await listWebSearch(check, client);
    check.ok(tool, "tools/list after the error");
  },

  async upstream(check, client, opts, details) {
    check.ok(opts.expectCode, "upstream needs --expect-code");
    const r = await call(client, { query: opts.query });
    const err = expectError(check, r, "web_search", {
      code: opts.expectCode,
      retryable: opts.expectRetryable,
      substrings: opts.expectMessage ? [opts.expectMessage] : [],
    });
    details.error = err;
  },

  // unauthorized connects itself: the handshake must be refused with the
  // HTTP status the server sends for a missing or wrong key.
  async unauthorized(check, client, opts, details, transport) {
    check.ok(Number.isInteger(opts.expectStatus), "unauthorized needs --expect-status");
    let thrown;
    try {
      await client.connect(transport);
    } catch (e) {
      thrown = e;
    }
    check.ok(thrown, "connect succeeded; want it refused");
    details.error = `${thrown.name}: ${thrown.message}`;
    // StreamableHTTPError and SseError carry the HTTP status as code.
    check.equal(thrown.code, opts.expectStatus, `status of the refused connect (${details.error})`);
    if (transport instanceof StreamableHTTPClientTransport) {
      // The SDK quotes the response body, which must be the contract's error.
      check.ok(thrown.message.includes("AUTH_ERROR"), `refusal does not carry the AUTH_ERROR body: ${thrown.message}`);
    }
  },

  // oversize sends a tools/call of over 5 MB, past the server's 4 MB
  // message limit, as this SDK writes it (the id after the params): the
  // answer is a tool error for the call, not a transport error, and the
  // session goes on.
  async oversize(check, client, opts, details) {
    const r = await call(client, { query: "x".repeat(5 << 20) });
    details.error = expectError(check, r, "a 5 MB web_search", {
      code: "TOOL_ERROR", retryable: false, substrings: ["larger than 4 MB"],
    });
    const after = await call(client, { query: `${opts.query} after`, max_results: 1 });
    check.ok(!after.isError, `the call after the 5 MB one failed: ${textBlocks(after).join(" ").slice(0, 300)}`);
  },

  async timeout(check, client, opts, details) {
    const started = Date.now();
    const r = await call(client, { query: opts.query });
    const err = expectError(check, r, "web_search", {
      code: "TIMEOUT",
      retryable: true,
      substrings: opts.expectMessage ? [opts.expectMessage] : [],
    });
    details.error = err;
    details.elapsed_ms = Date.now() - started;
  },
};

// The scenarios of add_document, through this SDK's callTool.
for (const [name, run] of Object.entries(jobsScenarios)) {
  scenarios[name] = (check, client, opts, details) => run(check, {
    call: (tool, args, options) => client.callTool({ name: tool, arguments: args }, undefined, options),
    listTools: () => client.listTools(),
  }, opts, details);
}

// selfConnecting are the scenarios that test the handshake itself.
const selfConnecting = new Set(["unauthorized"]);

// drive connects the TypeScript SDK client (unless the scenario tests the
// handshake itself), runs the scenario and ends the session.
async function drive(opts, run, check, details) {
  const client = new Client({ name: "mcpsearch-interop-ts", version: "1.0.0" });
  const transport = newTransport(opts);
  await closing(async () => {
    if (!selfConnecting.has(opts.scenario)) {
      await client.connect(transport);
    }
    await run(check, client, opts, details, transport);
    if (transport.protocolVersion) {
      details.protocolVersion = transport.protocolVersion;
    }
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
      // Ending the session explicitly is what a well-behaved client does;
      // the server must accept it.
      await transport.terminateSession();
      details.session_terminated = true;
    }
  }, () => client.close());
}

runMain("ts-client", { argv: process.argv.slice(2), parseArgs, scenarios, drive, timeoutMs: SCENARIO_TIMEOUT_MS });
