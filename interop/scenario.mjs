// scenario.mjs is what the Node clients of the interop tests share: the
// checks a scenario makes and the run of one scenario, which prints one JSON
// report line to stdout and sets the exit status (0 success, 1 a failed
// check or error, 2 bad flags).

// CheckError is a failed check, as opposed to a client or server error.
export class CheckError extends Error {}

// Checks counts what was verified, so the report shows the scenario did work.
export class Checks {
  constructor() { this.n = 0; }
  ok(cond, msg) {
    this.n++;
    if (!cond) throw new CheckError(msg);
  }
  equal(got, want, what) {
    this.ok(got === want, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

// runMain parses argv with parseArgs, picks the scenario opts.scenario names
// and hands it to drive(opts, run, check, details), which connects a client,
// calls run and closes the client, also when run fails. The whole scenario
// must end within timeoutMs.
// connectionFlag applies a flag every client script takes to reach the
// server (--arg, --env K=V, --header NAME:VALUE) to opts, and reports
// whether it was one.
export function connectionFlag(opts, flag, value) {
  const pair = (sep, what) => {
    const k = value.indexOf(sep);
    if (k <= 0) throw new Error(`${flag} wants ${what}, got ${JSON.stringify(value)}`);
    return [value.slice(0, k).trim(), value.slice(k + 1).trim()];
  };
  switch (flag) {
    case "--arg": opts.args.push(value); return true;
    case "--env": { const [k, v] = pair("=", "K=V"); opts.env[k] = v; return true; }
    case "--header": { const [k, v] = pair(":", "NAME:VALUE"); opts.headers[k] = v; return true; }
  }
  return false;
}

export async function runMain(name, { argv, parseArgs, scenarios, drive, timeoutMs }) {
  let opts;
  try {
    opts = parseArgs(argv);
  } catch (e) {
    process.stderr.write(`${name}: ${e.message}\n`);
    process.exit(2);
  }
  const run = scenarios[opts.scenario];
  if (!run) {
    process.stderr.write(`${name}: unknown scenario ${opts.scenario}; want one of ${Object.keys(scenarios).join(", ")}\n`);
    process.exit(2);
  }
  const report = { scenario: opts.scenario, transport: opts.transport, ok: false, checks: 0, details: {} };
  const check = new Checks();
  const watchdog = setTimeout(() => {
    report.error = `scenario did not finish within ${timeoutMs} ms`;
    process.stdout.write(JSON.stringify(report) + "\n");
    process.stderr.write(`${name}: ${opts.scenario} over ${opts.transport}: ${report.error}\n`);
    process.exit(1);
  }, timeoutMs);
  watchdog.unref();

  try {
    await drive(opts, run, check, report.details);
  } catch (failure) {
    report.checks = check.n;
    report.error = failure instanceof CheckError ? failure.message : `${failure.name}: ${failure.message}`;
    process.stdout.write(JSON.stringify(report) + "\n");
    process.stderr.write(`${name}: ${opts.scenario} over ${opts.transport} failed: ${report.error}\n`);
    if (!(failure instanceof CheckError) && failure.stack) {
      process.stderr.write(failure.stack + "\n");
    }
    process.exit(1);
  }
  report.checks = check.n;
  report.ok = true;
  process.stdout.write(JSON.stringify(report) + "\n");
  process.exit(0);
}

// closing runs body, then close, and throws the first error of the two: a
// client must be closed whatever happened, and a failing close is a failure.
export async function closing(body, close) {
  let failure;
  try {
    await body();
  } catch (e) {
    failure = e;
  }
  try {
    await close();
  } catch (e) {
    failure ??= e;
  }
  if (failure) throw failure;
}

// textBlocks returns the text of every text block of a tool result.
export function textBlocks(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text);
}

// toolError parses the contract's error body out of an isError result.
export function toolError(check, result, what) {
  check.ok(result.isError === true, `${what}: want isError true, got result ${JSON.stringify(result).slice(0, 500)}`);
  const texts = textBlocks(result);
  check.ok(texts.length > 0, `${what}: error result has no text content`);
  let body;
  try {
    body = JSON.parse(texts[0]);
  } catch (e) {
    throw new CheckError(`${what}: error text is not JSON: ${texts[0].slice(0, 300)}`);
  }
  const err = body?.error;
  check.ok(err && typeof err === "object", `${what}: error text has no "error" object: ${texts[0].slice(0, 300)}`);
  check.ok(typeof err.code === "string" && err.code !== "", `${what}: error.code missing in ${texts[0]}`);
  check.ok(typeof err.message === "string" && err.message !== "", `${what}: error.message missing in ${texts[0]}`);
  check.ok(typeof err.retryable === "boolean", `${what}: error.retryable is not a boolean in ${texts[0]}`);
  return err;
}

// expectError checks the contract's error body of an isError result: its
// code, retryable flag and words its message must contain.
export function expectError(check, result, what, { code, retryable, substrings = [] }) {
  const err = toolError(check, result, what);
  check.equal(err.code, code, `${what}: error.code`);
  if (retryable !== undefined) {
    check.equal(err.retryable, retryable, `${what}: error.retryable (message: ${err.message})`);
  }
  for (const s of substrings) {
    check.ok(err.message.toLowerCase().includes(s.toLowerCase()),
      `${what}: error.message ${JSON.stringify(err.message)} does not mention ${JSON.stringify(s)}`);
  }
  return err;
}
