import assert from "node:assert/strict";
import { afterEach, mock, test } from "node:test";
import { DataError, httpSource, pageToken, sseData } from "../src/data.js";

/** A body streamed in these chunks (each encoded as UTF-8). @param {string[]} chunks */
function stream(chunks) {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(encoder.encode(c));
      controller.close();
    },
  });
}

/** @param {AsyncIterable<string>} items */
async function collect(items) {
  const out = [];
  for await (const item of items) out.push(item);
  return out;
}

/** @typedef {{url: string, init: RequestInit}} Call */
/**
 * Replaces fetch with `answer` for one test; returns the calls it saw.
 * @param {(url: string, init: RequestInit) => Response | Promise<Response>} answer
 * @returns {Call[]}
 */
function stubFetch(answer) {
  /** @type {Call[]} */
  const calls = [];
  mock.method(globalThis, "fetch", async (/** @type {string} */ url, /** @type {RequestInit} */ init) => {
    calls.push({ url, init });
    return answer(url, init);
  });
  return calls;
}
const json = (/** @type {unknown} */ body, status = 200) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

afterEach(() => {
  mock.restoreAll();
  mock.timers.reset();
});

test("DataError says FastAPI's detail in words", () => {
  assert.equal(new DataError(404, "no trace x").message, "no trace x");
  const invalid = new DataError(422, [{ loc: ["body", "opts", 0], msg: "field required" }, { msg: "bad" }, { other: 1 }]);
  assert.equal(invalid.message, 'body.opts.0: field required; bad; {"other":1}');
  assert.equal(invalid.status, 422);
  assert.equal(invalid.name, "DataError");
  assert.ok(invalid instanceof Error);
  assert.equal(new DataError(500, { a: 1 }).message, '{"a":1}');
});

test("pageToken takes ?token= out of the address and keeps it in storage", () => {
  /** @type {Map<string, string>} */
  const kept = new Map();
  const storage = { getItem: (/** @type {string} */ k) => kept.get(k) ?? null, setItem: (/** @type {string} */ k, /** @type {string} */ v) => void kept.set(k, v) };
  const replaced = /** @type {string[]} */ ([]);
  const hist = { state: null, replaceState: (/** @type {unknown} */ _s, /** @type {string} */ _t, /** @type {string} */ url) => void replaced.push(url) };
  const at = (/** @type {string} */ href) => /** @type {Location} */ (/** @type {unknown} */ ({ href }));
  const token = pageToken(/** @type {Storage} */ (/** @type {unknown} */ (storage)), at("http://127.0.0.1:8000/ui/?x=1&token=s3cret#/t/gemm"), /** @type {History} */ (/** @type {unknown} */ (hist)));
  assert.equal(token, "s3cret");
  assert.deepEqual(replaced, ["/ui/?x=1#/t/gemm"]);
  assert.equal(kept.get("uopviz-token"), "s3cret");
  // a reload without it reads it back, and changes nothing in the address
  assert.equal(pageToken(/** @type {Storage} */ (/** @type {unknown} */ (storage)), at("http://127.0.0.1:8000/ui/#/t/gemm"), /** @type {History} */ (/** @type {unknown} */ (hist))), "s3cret");
  assert.equal(replaced.length, 1);
});

test("pageToken when storage refuses: the given token still serves this page; none to read is null", () => {
  const refusing = /** @type {Storage} */ (/** @type {unknown} */ ({
    getItem: () => {
      throw new Error("SecurityError");
    },
    setItem: () => {
      throw new Error("QuotaExceededError");
    },
  }));
  const hist = /** @type {History} */ (/** @type {unknown} */ ({ state: null, replaceState: () => {} }));
  const at = (/** @type {string} */ href) => /** @type {Location} */ (/** @type {unknown} */ ({ href }));
  assert.equal(pageToken(refusing, at("http://h/?token=t1"), hist), "t1");
  assert.equal(pageToken(refusing, at("http://h/"), hist), null);
});

test("sseData yields each event's data once a blank line ends it", async () => {
  const body = stream([": a comment\n\ndata: {\"seq\":1}\n\n", "event: x\ndata: line one\ndata:line two\n\n", "data: no end yet"]);
  assert.deepEqual(await collect(sseData(body)), ['{"seq":1}', "line one\nline two"]);
});

test("sseData reads lines split across chunks, \\r\\n split between two chunks included", async () => {
  const body = stream(["da", "ta: a", "b\r", "\n\r", "\ndata: c\r\r", "data: d\n", "\n"]);
  assert.deepEqual(await collect(sseData(body)), ["ab", "c", "d"]);
});

test("httpSource: each method's route, its query parameters, the token as a header", async () => {
  const calls = stubFetch(() => json({ ok: true }));
  const src = httpSource("http://srv:1", "tok");
  await src.meta();
  await src.step("a b/c", 1, 2, 3);
  await src.python("t", 0, 1, 2);
  await src.python("t", 0, 1, 2, "00ff");
  await src.searches();
  await src.searches("abc", 17);
  await src.results("abc");
  assert.deepEqual(
    calls.map((c) => c.url),
    [
      "http://srv:1/api/meta",
      "http://srv:1/api/traces/a%20b%2Fc/contexts/1/passes/2/steps/3",
      "http://srv:1/api/traces/t/contexts/0/passes/1/steps/2/python",
      "http://srv:1/api/traces/t/contexts/0/passes/1/steps/2/python?node=00ff",
      "http://srv:1/api/tuning/searches",
      "http://srv:1/api/tuning/searches?kernel_hash=abc&before=17",
      "http://srv:1/api/tuning/results?kernel_hash=abc",
    ],
  );
  for (const c of calls) assert.deepEqual(c.init.headers, { Authorization: "token tok" });
});

test("httpSource sends JSON bodies (POST, DELETE), and sends no Authorization without a token", async () => {
  const calls = stubFetch(() => json({ job: "j1", search_id: 3 }));
  const src = httpSource();
  const opts = [{ op: "PADTO", axis: 0, arg: 32 }];
  await src.applyOpts("t", 2, opts);
  await src.startBeam("t", 2, 4, 6);
  await src.timeKernel("t", 2);
  await src.stopBeam("j 1");
  assert.deepEqual(
    calls.map((c) => [c.url, c.init.method, c.init.headers, c.init.body]),
    [
      ["/api/traces/t/contexts/2/opts", "POST", { "Content-Type": "application/json" }, JSON.stringify({ opts })],
      ["/api/traces/t/contexts/2/beam", "POST", { "Content-Type": "application/json" }, '{"width":4,"max_rounds":6}'],
      ["/api/traces/t/contexts/2/time", "POST", { "Content-Type": "application/json" }, "{}"],
      ["/api/beam/j%201", "DELETE", { "Content-Type": "application/json" }, "{}"],
    ],
  );
});

test("httpSource rejects with a DataError: the server's detail, its status line, or no answer at all", async () => {
  stubFetch((url) => {
    if (url.endsWith("/traces/missing")) return json({ detail: "no trace 'missing'" }, 404);
    if (url.endsWith("/traces")) return new Response("<html>oops</html>", { status: 502, statusText: "Bad Gateway" });
    throw new TypeError("Failed to fetch");
  });
  const src = httpSource();
  await assert.rejects(src.trace("missing"), { name: "DataError", status: 404, message: "no trace 'missing'" });
  await assert.rejects(src.traces(), { name: "DataError", status: 502, message: "502 Bad Gateway" });
  await assert.rejects(src.meta(), { name: "DataError", status: 0, message: "cannot reach the uopviz server (Failed to fetch)" });
});

/** An event stream's answer: these events as SSE, then the end of the body. @param {object[]} events */
const sse = (events) => new Response(stream(events.map((e) => `data: ${JSON.stringify(e)}\n\n`)), { status: 200 });

test("beamEvents: each event once, across a reconnection that replays the job, until done", async () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  let connections = 0;
  const calls = stubFetch(() => {
    connections++;
    // the first stream drops after two events; the second replays the job from its start
    return connections === 1
      ? sse([{ seq: 1, event: "start" }, { seq: 2, event: "round", round: 0 }])
      : sse([{ seq: 1, event: "start" }, { seq: 2, event: "round", round: 0 }, { seq: 3, event: "candidate", id: 1 }, { seq: 4, event: "done" }, { seq: 5, event: "late" }]);
  });
  /** @type {unknown[]} */
  const seen = [];
  let resolveDone = () => {};
  const done = new Promise((resolve) => (resolveDone = () => resolve(undefined)));
  httpSource("", "tok").beamEvents("job 1", (e) => {
    seen.push(e.seq);
    if (e.event === "done") resolveDone();
  });
  while (connections < 2) {
    await new Promise((resolve) => setImmediate(resolve));
    mock.timers.tick(1000);
  }
  await done;
  assert.deepEqual(seen, [1, 2, 3, 4]);
  assert.equal(calls[0].url, "/api/beam/job%201/events");
  assert.deepEqual(calls[0].init.headers, { Accept: "text/event-stream", Authorization: "token tok" });
});

test("beamEvents ends with an error event: a refused stream at once, a lost one after its retries", async () => {
  stubFetch(() => json({ detail: "no BEAM job 'x'" }, 404));
  /** @type {any[]} */
  const refused = [];
  httpSource().beamEvents("x", (e) => refused.push(e));
  while (!refused.length) await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(refused, [{ event: "error", kind: "failed", detail: "no BEAM job 'x'" }]);

  mock.restoreAll();
  mock.timers.enable({ apis: ["setTimeout"] });
  const calls = stubFetch(() => {
    throw new TypeError("network down");
  });
  /** @type {any[]} */
  const lost = [];
  httpSource().beamEvents("y", (e) => lost.push(e));
  while (!lost.length) {
    await new Promise((resolve) => setImmediate(resolve));
    mock.timers.tick(1000);
  }
  assert.deepEqual(lost, [{ event: "error", kind: "failed", detail: "lost the connection to the search's progress stream" }]);
  assert.equal(calls.length, 6); // the first try and five reconnections
});

test("beamEvents' stop ends the stream: no more events, no error", async () => {
  /** @type {ReadableStreamDefaultController<Uint8Array> | undefined} */
  let controller;
  const encoder = new TextEncoder();
  stubFetch((_url, init) => {
    const body = new ReadableStream({
      start(c) {
        controller = c;
        c.enqueue(encoder.encode('data: {"seq":1,"event":"start"}\n\n'));
        init.signal?.addEventListener("abort", () => c.error(new DOMException("aborted", "AbortError")));
      },
    });
    return new Response(body, { status: 200 });
  });
  /** @type {unknown[]} */
  const seen = [];
  const stop = httpSource().beamEvents("z", (e) => seen.push(e.event));
  while (!seen.length) await new Promise((resolve) => setImmediate(resolve));
  stop();
  assert.throws(() => controller?.enqueue(encoder.encode('data: {"seq":2,"event":"round"}\n\n')));
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(seen, ["start"]);
});
