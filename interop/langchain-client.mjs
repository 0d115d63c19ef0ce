#!/usr/bin/env node
// langchain-client.mjs drives a running mcpsearch with LangChain's MCP
// adapters (@langchain/mcp-adapters): MultiServerMCPClient loads the tools as
// LangChain tools and calls them the way an agent's tool node does.
//
//   node langchain-client.mjs --transport http --url http://127.0.0.1:8080/mcp \
//       --header "Authorization: Bearer KEY" --scenario tools \
//       --web-query "pgvector hnsw" --expect-first-url https://... \
//       --conversation conv-1 --docs-query "release checklist" \
//       --expect-file notes.md --expect-docs-text "checklist"
//   node langchain-client.mjs --transport sse --url http://127.0.0.1:8080/sse \
//       --header "Authorization: Bearer WRONG" --scenario unauthorized
//
// Scenarios:
//   tools         load the tools, call web_search and search_docs and check
//                 their ToolMessages; an invalid call must raise the
//                 contract's error.
//   unauthorized  loading the tools must fail.
//   add-document  load the tools and call add_document with --text and
//                 --title in --conversation, waiting for its job; then
//                 search_docs for --docs-query must find the note, its
//                 top chunk holding --expect-docs-text.
//
// Like ts-client.mjs it prints one JSON line {"ok":...,"checks":N,...} to
// stdout and exits 0 on success, 1 on a failed check, 2 on bad flags. What
// the fake SearXNG and the uploaded files hold comes in through flags.

import { MultiServerMCPClient } from "@langchain/mcp-adapters";

import { closing, runMain } from "./scenario.mjs";

const SCENARIO_TIMEOUT_MS = 60000;
const CALL_TIMEOUT_MS = 20000;
const SERVER = "mcpsearch";

function parseArgs(argv) {
  const opts = { headers: {}, scenario: "tools", maxResults: 3 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    if (!flag.startsWith("--") || i + 1 >= argv.length) {
      throw new Error(`want --flag value pairs, got ${JSON.stringify(flag)}`);
    }
    const value = argv[++i];
    switch (flag) {
      case "--transport": opts.transport = value; break;
      case "--url": opts.url = value; break;
      case "--header": {
        const k = value.indexOf(":");
        if (k <= 0) throw new Error(`--header wants NAME:VALUE, got ${JSON.stringify(value)}`);
        opts.headers[value.slice(0, k).trim()] = value.slice(k + 1).trim();
        break;
      }
      case "--scenario": opts.scenario = value; break;
      case "--web-query": opts.webQuery = value; break;
      case "--max-results": opts.maxResults = parseInt(value, 10); break;
      case "--expect-first-url": opts.expectFirstURL = value; break;
      case "--conversation": opts.conversation = value; break;
      case "--docs-query": opts.docsQuery = value; break;
      case "--expect-file": opts.expectFile = value; break;
      case "--expect-docs-text": opts.expectDocsText = value; break;
      case "--title": opts.title = value; break;
      case "--text": opts.text = value; break;
      default: throw new Error(`unknown flag ${flag}`);
    }
  }
  if (!["http", "sse"].includes(opts.transport)) throw new Error("--transport must be http or sse");
  if (!opts.url) throw new Error("--url is required");
  return opts;
}

function newClient(opts) {
  return new MultiServerMCPClient({
    throwOnLoadError: true,
    onConnectionError: "throw",
    useStandardContentBlocks: true,
    mcpServers: {
      [SERVER]: {
        transport: opts.transport,
        url: opts.url,
        headers: opts.headers,
        // The server speaks the transport it was asked for; a silent
        // fallback to SSE would hide a broken streamable HTTP endpoint.
        ...(opts.transport === "http" ? { automaticSSEFallback: false } : {}),
      },
    },
  });
}

// invoke calls tool as an agent's tool node does, with a tool call whose
// id is id, and returns the ToolMessage.
function invoke(tool, id, args) {
  return tool.invoke({ type: "tool_call", id, name: tool.name, args }, { timeout: CALL_TIMEOUT_MS });
}

// structured returns the structured content the adapter keeps next to the
// text: on a single text block it rides along on the block, and it is always
// in the message's artifacts.
function structured(msg) {
  const fromArtifact = (msg.artifact ?? []).find((a) => a?.type === "mcp_structured_content")?.data;
  if (fromArtifact) return fromArtifact;
  const blocks = Array.isArray(msg.content) ? msg.content : [];
  return blocks.find((b) => b?.structuredContent)?.structuredContent;
}

function text(msg) {
  if (typeof msg.content === "string") return msg.content;
  return (msg.content ?? []).filter((b) => b?.type === "text").map((b) => b.text).join("\n");
}

const scenarios = {
  async tools(check, client, opts, details) {
    const tools = await client.getTools();
    const names = tools.map((t) => t.name).sort();
    details.tools = names;
    for (const want of ["get_chunk", "list_files", "search_docs", "web_search"]) {
      check.ok(names.includes(want), `tools ${JSON.stringify(names)} lack ${want}`);
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    check.ok(byName.web_search.description.includes("SearXNG"), "web_search has lost its description");

    if (opts.webQuery) {
      const msg = await invoke(byName.web_search, "call_web", { query: opts.webQuery, max_results: opts.maxResults });
      check.equal(msg.tool_call_id, "call_web", "ToolMessage.tool_call_id");
      check.ok(msg.status !== "error", `web_search failed: ${text(msg).slice(0, 300)}`);
      const sc = structured(msg);
      check.ok(sc && Array.isArray(sc.results), `web_search ToolMessage has no structured results: ${JSON.stringify(msg).slice(0, 500)}`);
      check.equal(sc.query, opts.webQuery, "structured query");
      check.equal(sc.results.length, opts.maxResults, "number of results");
      if (opts.expectFirstURL) {
        check.equal(sc.results[0].url, opts.expectFirstURL, "results[0].url");
        // The model reads the text, so the URL must be in it too.
        check.ok(text(msg).includes(opts.expectFirstURL), `the text the model reads lacks ${opts.expectFirstURL}`);
      }
      details.web_results = sc.results.length;
    }

    if (opts.docsQuery) {
      const msg = await invoke(byName.search_docs, "call_docs", { query: opts.docsQuery, conversation_id: opts.conversation });
      check.ok(msg.status !== "error", `search_docs failed: ${text(msg).slice(0, 300)}`);
      const sc = structured(msg);
      check.ok(sc && Array.isArray(sc.chunks), `search_docs ToolMessage has no structured chunks: ${JSON.stringify(msg).slice(0, 500)}`);
      check.ok(sc.chunks.length > 0, `search_docs found nothing for ${JSON.stringify(opts.docsQuery)}`);
      const top = sc.chunks[0];
      check.equal(top.file_name, opts.expectFile, "chunks[0].file_name");
      if (opts.expectDocsText) {
        check.ok(top.content.toLowerCase().includes(opts.expectDocsText.toLowerCase()),
          `chunks[0].content lacks ${JSON.stringify(opts.expectDocsText)}: ${top.content.slice(0, 300)}`);
        check.ok(text(msg).toLowerCase().includes(opts.expectDocsText.toLowerCase()), "the text the model reads lacks the passage");
      }
      check.ok(typeof top.chunk_id === "string" && top.chunk_id !== "", "chunks[0] has no chunk_id");

      // get_chunk opens what search_docs found.
      const opened = structured(await invoke(byName.get_chunk, "call_chunk", { chunk_id: top.chunk_id }));
      check.equal(opened?.content, top.content, "get_chunk content");
      check.equal(opened?.metadata?.file_name, opts.expectFile, "get_chunk metadata.file_name");
      details.docs_chunks = sc.chunks.length;
    }

    // The published input schema carries the tools' enums and ranges, so
    // the adapters refuse an argument outside them before any call.
    let refused;
    try {
      await byName.web_search.invoke({ query: "x", time_range: "decade" }, { timeout: CALL_TIMEOUT_MS });
    } catch (e) {
      refused = e;
    }
    check.ok(refused, "a web_search outside its schema did not fail");

    // A call the server refuses becomes a ToolException carrying the
    // contract's error, which the agent sees instead of a result.
    let thrown;
    try {
      await byName.web_search.invoke({ query: "   " }, { timeout: CALL_TIMEOUT_MS });
    } catch (e) {
      thrown = e;
    }
    check.ok(thrown, "an invalid web_search did not fail");
    check.ok(/TOOL_ERROR/.test(thrown.message) && /blank/.test(thrown.message),
      `the failure does not carry the contract's error: ${thrown.message}`);
  },

  async "add-document"(check, client, opts, details) {
    for (const n of ["conversation", "title", "text", "docsQuery", "expectDocsText"]) {
      check.ok(opts[n] !== undefined, `add-document needs the option ${n}`);
    }
    const tools = await client.getTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const want of ["add_document", "get_job", "search_docs"]) {
      check.ok(byName[want], `tools ${JSON.stringify(Object.keys(byName).sort())} lack ${want}`);
    }
    const added = await invoke(byName.add_document, "call_add",
      { conversation_id: opts.conversation, title: opts.title, text: opts.text, wait_seconds: 30 });
    check.equal(added.tool_call_id, "call_add", "ToolMessage.tool_call_id");
    check.ok(added.status !== "error", `add_document failed: ${text(added).slice(0, 300)}`);
    const job = structured(added);
    check.ok(job && typeof job.job_id === "string" && job.job_id !== "", `add_document ToolMessage has no job_id: ${JSON.stringify(added).slice(0, 500)}`);
    check.equal(job.status, "succeeded", `the job's status after waiting (error ${JSON.stringify(job.error)})`);
    check.ok(text(added).includes(job.job_id), "the text the model reads does not name the job");
    details.job_id = job.job_id;
    const doc = job.files?.[0];
    check.ok(doc && doc.file_name.startsWith(opts.title), `add_document does not list the note titled ${opts.title}: ${JSON.stringify(job.files)}`);

    const followed = structured(await invoke(byName.get_job, "call_job", { job_id: job.job_id }));
    check.equal(followed?.status, "succeeded", "get_job status");

    const found = await invoke(byName.search_docs, "call_docs", { query: opts.docsQuery, conversation_id: opts.conversation });
    check.ok(found.status !== "error", `search_docs failed: ${text(found).slice(0, 300)}`);
    const sc = structured(found);
    check.ok(sc?.chunks?.length > 0, `search_docs found nothing for ${JSON.stringify(opts.docsQuery)}`);
    check.equal(sc.chunks[0].file_id, doc.file_id, "chunks[0].file_id");
    check.ok(sc.chunks[0].content.toLowerCase().includes(opts.expectDocsText.toLowerCase()),
      `chunks[0].content lacks ${JSON.stringify(opts.expectDocsText)}: ${sc.chunks[0].content.slice(0, 300)}`);
    details.file_name = doc.file_name;
  },

  async unauthorized(check, client, opts, details) {
    let thrown;
    try {
      await client.getTools();
    } catch (e) {
      thrown = e;
    }
    check.ok(thrown, "getTools succeeded; want it refused");
    details.error = `${thrown.name}: ${thrown.message}`;
    check.ok(/401|auth/i.test(thrown.message), `the failure does not say the key was refused: ${thrown.message}`);
    if (opts.transport === "http") {
      // Over streamable HTTP the SDK quotes the refusal's body.
      check.ok(thrown.message.includes("AUTH_ERROR"), `the failure does not carry the AUTH_ERROR body: ${thrown.message}`);
    }
  },
};

// drive loads the tools through MultiServerMCPClient, runs the scenario and
// closes the client.
async function drive(opts, run, check, details) {
  const client = newClient(opts);
  await closing(() => run(check, client, opts, details), () => client.close());
}

runMain("langchain-client", { argv: process.argv.slice(2), parseArgs, scenarios, drive, timeoutMs: SCENARIO_TIMEOUT_MS });
