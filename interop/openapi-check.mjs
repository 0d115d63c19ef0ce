#!/usr/bin/env node
// openapi-check.mjs checks mcpsearch's REST facade description: it reads
// GET /openapi.json, validates it with an OpenAPI 3.1 validator this project
// did not write (@readme/openapi-parser), and checks that it is in step with
// what the official TypeScript SDK's client reads from tools/list at /mcp:
// every tool has its own operation whose request schema equals the tool's
// inputSchema, and no operation names a tool the server does not offer.
//
//   node openapi-check.mjs --base http://127.0.0.1:8080 --header "Authorization: Bearer KEY" --scenario openapi
//
// On success it prints one JSON line {"ok":true,...} to stdout and exits 0;
// on any failed check it prints {"ok":false,...} and a message on stderr and
// exits 1.

import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";

import { validate } from "@readme/openapi-parser";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { closing, runMain } from "./scenario.mjs";

const SCENARIO_TIMEOUT_MS = 60000;

const VALIDATOR_VERSION = JSON.parse(
  readFileSync(new URL("./node_modules/@readme/openapi-parser/package.json", import.meta.url))).version;

function parseArgs(argv) {
  const opts = { headers: {}, transport: "http" };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    switch (flag) {
      case "--base": opts.base = value.replace(/\/$/, ""); break;
      case "--scenario": opts.scenario = value; break;
      case "--header": {
        const k = value.indexOf(":");
        if (k <= 0) throw new Error(`--header wants NAME:VALUE, got ${JSON.stringify(value)}`);
        opts.headers[value.slice(0, k).trim()] = value.slice(k + 1).trim();
        break;
      }
      default: throw new Error(`unknown flag ${flag}`);
    }
  }
  if (!opts.base) throw new Error("--base is required");
  return opts;
}

// getJSON fetches a JSON document from the server with the caller's headers.
async function getJSON(check, opts, path) {
  const resp = await fetch(opts.base + path, { headers: opts.headers });
  const text = await resp.text();
  check.equal(resp.status, 200, `GET ${path} status (body ${text.slice(0, 200)})`);
  check.ok((resp.headers.get("content-type") ?? "").startsWith("application/json"),
    `GET ${path} Content-Type is ${resp.headers.get("content-type")}`);
  return JSON.parse(text);
}

const scenarios = {
  async openapi(check, client, opts, details) {
    const doc = await getJSON(check, opts, "/openapi.json");
    check.ok(/^3\.1\.\d+$/.test(doc.openapi), `openapi is ${JSON.stringify(doc.openapi)}, want 3.1.x`);

    // The validator dereferences in place; keep the document as served.
    const result = await validate(structuredClone(doc));
    check.ok(result.valid, `@readme/openapi-parser rejects /openapi.json: ${JSON.stringify(result.errors ?? result).slice(0, 2000)}`);
    check.equal(result.specification, "OpenAPI", "specification the validator recognised");
    details.validator = `@readme/openapi-parser ${VALIDATOR_VERSION}`;
    details.warnings = (result.warnings ?? []).length;

    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    check.ok(names.length > 0, "tools/list is empty");
    details.tools = names;

    const operationIds = new Set();
    for (const [path, item] of Object.entries(doc.paths ?? {})) {
      for (const op of Object.values(item)) {
        if (op && typeof op === "object" && op.operationId) {
          check.ok(!operationIds.has(op.operationId), `operationId ${op.operationId} appears twice`);
          operationIds.add(op.operationId);
        }
      }
      const m = path.match(/^\/mcp\/tools\/([^/]+)$/);
      if (m) {
        check.ok(names.includes(m[1]), `${path} names a tool tools/list does not offer (${names.join(", ")})`);
      }
    }
    for (const tool of tools) {
      const op = doc.paths?.[`/mcp/tools/${tool.name}`]?.post;
      check.ok(op, `/openapi.json has no POST /mcp/tools/${tool.name}`);
      check.equal(op.operationId, tool.name, `operationId of POST /mcp/tools/${tool.name}`);
      const schema = op.requestBody?.content?.["application/json"]?.schema;
      check.ok(isDeepStrictEqual(schema, tool.inputSchema),
        `request schema of ${tool.name} differs from its inputSchema in tools/list:\n${JSON.stringify(schema)}\n${JSON.stringify(tool.inputSchema)}`);
      check.ok(op.responses?.["200"] && op.responses?.["400"] && op.responses?.["429"],
        `POST /mcp/tools/${tool.name} does not describe 200, 400 and 429`);
      if (tool.outputSchema) {
        const result = op.responses["200"].content?.["application/json"]?.schema?.properties?.result;
        check.ok(isDeepStrictEqual(result, tool.outputSchema),
          `the 200 result schema of ${tool.name} differs from its outputSchema in tools/list`);
      }
    }
    const invokeEnum = doc.paths?.["/mcp/invoke"]?.post?.requestBody?.content?.["application/json"]?.schema?.properties?.tool_name?.enum;
    check.ok(isDeepStrictEqual([...(invokeEnum ?? [])].sort(), names),
      `/mcp/invoke tool_name enum ${JSON.stringify(invokeEnum)} is not the tools of tools/list ${JSON.stringify(names)}`);

    // GET /mcp/tools lists the same tools with the same parameters.
    const listed = await getJSON(check, opts, "/mcp/tools");
    check.ok(isDeepStrictEqual(listed.tools.map((t) => t.name).sort(), names),
      `GET /mcp/tools names ${JSON.stringify(listed.tools.map((t) => t.name))}, tools/list ${JSON.stringify(names)}`);
    for (const t of listed.tools) {
      const tool = tools.find((x) => x.name === t.name);
      check.ok(isDeepStrictEqual(t.parameters, tool.inputSchema), `GET /mcp/tools parameters of ${t.name} differ from its inputSchema`);
      check.equal(t.description, tool.description, `GET /mcp/tools description of ${t.name}`);
    }
    details.operations = operationIds.size;
    details.openapi = doc.openapi;
  },
};

async function drive(opts, run, check, details) {
  const client = new Client({ name: "mcpsearch-interop-openapi", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(opts.base + "/mcp"), { requestInit: { headers: opts.headers } });
  await closing(async () => {
    await client.connect(transport);
    await run(check, client, opts, details);
  }, () => client.close());
}

runMain("openapi-check", { argv: process.argv.slice(2), parseArgs, scenarios, drive, timeoutMs: SCENARIO_TIMEOUT_MS });
