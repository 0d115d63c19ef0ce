// jobs-scenarios.mjs holds the scenarios of the tools that add documents
// (add_document, get_job), which ts-client.mjs (the TypeScript SDK v1) and
// ts2-client.mjs (its v2 client) both run. A scenario gets the client as
// `api`: api.call(name, args, options) makes a tools/call with the SDK's
// request options (onprogress, timeout) and api.listTools() lists the
// tools. What the files hold comes in through flags:
//
//   add-pdf   --conversation C --file PATH --file-name F --doc-query Q
//             --expect-phrase P --expect-page N --expect-pages M
//             adds the PDF at PATH as content_base64, follows its job with
//             get_job until it succeeds, and search_docs must find P on
//             page N, cited so; the same bytes again are recognised.
//   progress  --conversation C --file PATH --file-name F --expect-files N
//             --wait-seconds W
//             adds the archive at PATH with wait_seconds W and a progress
//             token: the call must get notifications/progress, strictly
//             increasing, at least every 2 s, saying "n of N files, k
//             chunks", and end with the job succeeded.
//
// Each scenario reports the jobs it started as details.job_ids.

import { readFileSync } from "node:fs";

import { textBlocks } from "./scenario.mjs";

const CALL_TIMEOUT_MS = 20000;
// JOB_TIMEOUT_MS bounds how long a job may take to succeed.
const JOB_TIMEOUT_MS = 45000;
// PROGRESS_EVERY_MS is twice the server's interval between progress
// notifications to a waiting call: at least one per PROGRESS_EVERY_MS, on
// average, must come.
const PROGRESS_EVERY_MS = 2000;

const FINAL = new Set(["succeeded", "failed", "cancelled"]);

// jobsFlags are the flags of these scenarios: flag, option and parser.
export const jobsFlags = {
  "--conversation": ["conversation", String],
  "--file": ["file", String],
  "--file-name": ["fileName", String],
  "--doc-query": ["docQuery", String],
  "--expect-phrase": ["expectPhrase", String],
  "--expect-page": ["expectPage", (v) => parseInt(v, 10)],
  "--expect-pages": ["expectPages", (v) => parseInt(v, 10)],
  "--expect-files": ["expectFiles", (v) => parseInt(v, 10)],
  "--wait-seconds": ["waitSeconds", (v) => parseInt(v, 10)],
};

function need(check, opts, ...names) {
  for (const n of names) {
    check.ok(opts[n] !== undefined && !Number.isNaN(opts[n]), `scenario ${opts.scenario} needs the option ${n}`);
  }
}

// brief shortens arguments for a message: base64 is long.
function brief(args) {
  return JSON.stringify(args, (k, v) => (typeof v === "string" && v.length > 80 ? `${v.slice(0, 80)}... (${v.length} bytes)` : v));
}

async function callOK(check, api, name, args, options) {
  const r = await api.call(name, args, { timeout: CALL_TIMEOUT_MS, ...options });
  check.ok(!r.isError, `${name} ${brief(args)} failed: ${textBlocks(r).join(" ").slice(0, 500)}`);
  check.ok(r.structuredContent && typeof r.structuredContent === "object", `${name} returned no structuredContent`);
  return r;
}

function addJob(details, id) {
  (details.job_ids ??= []).push(id);
}

// followJob reads the job with get_job until it ends, checking that every
// status it goes through is one of the contract's.
async function followJob(check, api, id) {
  const started = Date.now();
  const seen = [];
  for (;;) {
    const { structuredContent: job } = await callOK(check, api, "get_job", { job_id: id });
    check.equal(job.job_id, id, "get_job job_id");
    check.ok(["queued", "running", ...FINAL].includes(job.status), `get_job status ${JSON.stringify(job.status)} is not the contract's`);
    if (seen.at(-1) !== job.status) seen.push(job.status);
    if (FINAL.has(job.status)) return { job, seen };
    check.ok(Date.now() - started < JOB_TIMEOUT_MS, `job ${id} has not ended after ${JOB_TIMEOUT_MS} ms: ${JSON.stringify(job)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const jobsScenarios = {
  async "add-pdf"(check, api, opts, details) {
    need(check, opts, "conversation", "file", "fileName", "docQuery", "expectPhrase", "expectPage", "expectPages");
    const { tools } = await api.listTools();
    const names = tools.map((t) => t.name);
    for (const want of ["add_document", "get_job", "search_docs"]) {
      check.ok(names.includes(want), `tools/list lacks ${want}: ${JSON.stringify(names)}`);
    }
    const addTool = tools.find((t) => t.name === "add_document");
    check.equal(addTool.annotations?.readOnlyHint, false, "add_document annotations.readOnlyHint");

    const bytes = readFileSync(opts.file);
    const args = { conversation_id: opts.conversation, content_base64: bytes.toString("base64"), file_name: opts.fileName };
    const added = await callOK(check, api, "add_document", args);
    const sc = added.structuredContent;
    check.ok(typeof sc.job_id === "string" && sc.job_id !== "", `add_document answered no job_id: ${JSON.stringify(sc)}`);
    check.ok(["queued", "running", "succeeded"].includes(sc.status), `add_document status ${JSON.stringify(sc.status)}`);
    addJob(details, sc.job_id);
    const doc = sc.files?.find((d) => d.file_name === opts.fileName);
    check.ok(doc && doc.file_id, `add_document does not list ${opts.fileName}: ${JSON.stringify(sc)}`);
    const prefix = `mcpsearch://conversations/${encodeURIComponent(opts.conversation)}/files/`;
    const link = (added.content ?? []).find((c) => c.type === "resource_link");
    check.ok(link && link.uri === prefix + doc.file_id,
      `add_document gave no resource_link to ${prefix}${doc.file_id}: ${JSON.stringify(added.content).slice(0, 500)}`);

    const { job, seen } = await followJob(check, api, sc.job_id);
    details.statuses = seen;
    check.equal(job.status, "succeeded", `job status (error ${JSON.stringify(job.error)})`);
    check.equal(job.counts?.ready, 1, "job files.ready");
    check.equal(job.counts?.pages, opts.expectPages, "job files.pages");
    check.ok(job.counts?.chunks > 0, `the job stored no chunk: ${JSON.stringify(job.counts)}`);
    check.ok(job.finished_at, "the succeeded job has no finished_at");

    const found = await callOK(check, api, "search_docs", { query: opts.docQuery, conversation_id: opts.conversation, top_k: 3 });
    const chunks = found.structuredContent.chunks ?? [];
    check.ok(chunks.length > 0, `search_docs ${JSON.stringify(opts.docQuery)} found nothing`);
    const top = chunks[0];
    check.equal(top.file_id, doc.file_id, "search_docs top chunk's file_id");
    check.ok(top.content.includes(opts.expectPhrase), `the top chunk lacks ${JSON.stringify(opts.expectPhrase)}: ${top.content}`);
    check.equal(top.page_start, opts.expectPage, "the top chunk's page_start");
    check.equal(top.location?.page_start, opts.expectPage, "the top chunk's location.page_start");
    check.equal(top.location?.citation, `page ${opts.expectPage}`, "the top chunk's location.citation");
    const text = textBlocks(found).join("\n");
    check.ok(text.includes(`${opts.fileName}, page ${opts.expectPage}`),
      `the text the model reads does not cite ${opts.fileName}, page ${opts.expectPage}: ${text.slice(0, 400)}`);
    details.chunks = job.counts.chunks;

    // The same bytes again: recognised, not stored twice.
    const again = (await callOK(check, api, "add_document", args)).structuredContent;
    addJob(details, again.job_id);
    check.ok(again.job_id !== sc.job_id, "the second add_document reused the first job");
    const { job: second } = await followJob(check, api, again.job_id);
    check.equal(second.status, "succeeded", "the second job's status");
    check.equal(second.counts?.duplicates, 1, "the second job's files.duplicates");
    check.ok(again.files?.some((d) => d.file_id === doc.file_id),
      `the second add_document does not name the file already there (${doc.file_id}): ${JSON.stringify(again.files)}`);
  },

  async progress(check, api, opts, details) {
    need(check, opts, "conversation", "file", "fileName", "expectFiles", "waitSeconds");
    const bytes = readFileSync(opts.file);
    const notes = [];
    const started = Date.now();
    const r = await callOK(check, api, "add_document",
      { conversation_id: opts.conversation, content_base64: bytes.toString("base64"), file_name: opts.fileName, wait_seconds: opts.waitSeconds },
      {
        onprogress: (p) => notes.push({ ...p, at: Date.now() }),
        timeout: (opts.waitSeconds + 30) * 1000,
        resetTimeoutOnProgress: true,
      });
    const ended = Date.now();
    const sc = r.structuredContent;
    addJob(details, sc.job_id);
    details.elapsed_ms = ended - started;
    details.notifications = notes.length;
    details.first_message = notes[0]?.message;
    details.last_message = notes.at(-1)?.message;
    // When a check below fails, the report shows when each came.
    details.timeline = notes.slice(0, 40).map((n) => `${n.at - started}ms ${n.progress} ${n.message}`);
    check.equal(sc.status, "succeeded", `the job's status when add_document answered after ${ended - started} ms (error ${JSON.stringify(sc.error)})`);
    check.equal(sc.counts?.total, opts.expectFiles, "files.total");
    check.equal(sc.counts?.ready, opts.expectFiles, "files.ready");
    // The premise: the call waited long enough for progress to matter.
    check.ok(ended - started >= 1.5 * PROGRESS_EVERY_MS,
      `add_document answered in ${ended - started} ms: the archive is too small to test progress`);

    check.ok(notes.length >= 2, `${notes.length} progress notifications in ${ended - started} ms`);
    let gap = notes[0].at - started;
    let maxGap = gap;
    const filesRe = /^(\d+) of (\d+) files, (\d+) chunks/;
    let counted = 0;
    for (const [i, n] of notes.entries()) {
      check.ok(typeof n.progress === "number", `notification ${i} has no progress: ${JSON.stringify(n)}`);
      if (i > 0) {
        check.ok(n.progress > notes[i - 1].progress,
          `progress did not grow: notification ${i - 1} ${notes[i - 1].progress}, notification ${i} ${n.progress}`);
        gap = n.at - notes[i - 1].at;
        maxGap = Math.max(maxGap, gap);
      }
      if (n.total !== undefined) {
        check.equal(n.total, opts.expectFiles, `notification ${i} total`);
        check.ok(n.progress <= n.total, `notification ${i}: progress ${n.progress} past total ${n.total}`);
      }
      check.ok(typeof n.message === "string" && n.message !== "", `notification ${i} has no message`);
      const m = filesRe.exec(n.message);
      if (m) {
        counted++;
        check.equal(parseInt(m[2], 10), opts.expectFiles, `the number of files in ${JSON.stringify(n.message)}`);
        check.equal(parseInt(m[1], 10), Math.floor(n.progress), `the files done in ${JSON.stringify(n.message)}, against progress ${n.progress}`);
      }
    }
    maxGap = Math.max(maxGap, ended - notes.at(-1).at);
    details.max_gap_ms = maxGap;
    // The rate over the time measured is the test; the longest gap is a
    // figure, as one gap grows with a loaded machine's stalls.
    const want = Math.floor((ended - started) / PROGRESS_EVERY_MS);
    check.ok(notes.length >= want,
      `${notes.length} progress notifications in ${ended - started} ms, want one per ${PROGRESS_EVERY_MS} ms at least (${want}); longest gap ${maxGap} ms`);
    check.ok(counted > 0, `no notification says "n of ${opts.expectFiles} files, k chunks": ${JSON.stringify(notes.map((n) => n.message))}`);
  },
};
