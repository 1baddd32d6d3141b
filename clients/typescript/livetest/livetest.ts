// Exercises the TypeScript client against a running Sounding stack and prints one JSON object
// of what it saw; tests/integration/test_typescript_client.py runs it and checks the figures.
//
//   node build/livetest/livetest/livetest.js --address 127.0.0.1:50051 --collection ts-client
import { createServer, type Http2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import {
  CalibrationTarget,
  SoundingClient,
  SoundingError,
  StoppingReason,
  ToolUseObserver,
  type Final,
  type InquireResponse,
  type InquirySession,
} from "../src/index.js";

const { values } = parseArgs({
  options: {
    address: { type: "string", default: "127.0.0.1:50051" },
    collection: { type: "string", default: "ts-client" },
    secret: { type: "string", default: "5281" },
    // Only play a game whose server restarts while it waits: at its second question, print
    // "waiting" and read a line before answering; then print the turns, answer and resumes.
    "ride-out": { type: "boolean", default: false },
  },
});
const address = values.address!;
const collection = values.collection!;
const secret = values.secret!;
// Each call's deadline: generous (the stack may share its cores with other work), and longer than
// the test's timeout, so that a call left open, which would keep Node alive, fails the test.
const client = new SoundingClient(address, { timeoutMs: 1_200_000 });
const out: Record<string, unknown> = {};

function feedback(guess: string): string {
  let bulls = 0;
  let cows = 0;
  for (let i = 0; i < guess.length; i++) {
    if (guess[i] === secret[i]) bulls++;
    else if (secret.includes(guess[i])) cows++;
  }
  return `${bulls} ${cows}`;
}

async function refusal(attempt: () => Promise<unknown>): Promise<SoundingError> {
  try {
    await attempt();
  } catch (error) {
    if (error instanceof SoundingError) return error;
    throw error;
  }
  throw new Error("the call was expected to fail");
}

if (values["ride-out"]) {
  const game = client.inquire({ domain: "bulls_and_cows", policy: { questionSelection: "eig" } });
  game.resumeWithinMs = 300_000; // generous: the server restarts however busy the machine
  const turns: number[] = [];
  let answer = "";
  const input = createInterface({ input: process.stdin });
  const lines = input[Symbol.asyncIterator]();
  for await (const event of game) {
    if (event.event.case === "ask") {
      turns.push(event.event.value.turn);
      if (turns.length === 2) {
        console.log("waiting");
        await lines.next();
      }
      game.answer(feedback(event.event.value.question));
    }
    if (event.event.case === "answer") answer = event.event.value.answer;
  }
  input.close();
  client.close();
  console.log(JSON.stringify({ turns, answer, resumes: game.resumes }));
  process.exit(0);
}

await client.createCollection(collection, "made by the TypeScript client's live test");
try {
  const ingested = await client.ingest(
    collection,
    [
      { id: "tide", text: "Tides rise and fall twice a day under the pull of the moon." },
      { id: "lead", text: "A leadsman casts a weighted line to measure the depth of the water." },
      { id: "chart", text: "Nautical charts mark the depth of the sea in fathoms." },
    ],
    2,
  );
  out.ingested = Number(ingested?.totalDocuments);

  // A streamed Retrieve: events arrive before the Final.
  const before: string[] = [];
  let final: Final | undefined;
  for await (const event of client.retrieve({ collection, query: "how is the depth measured", topK: 2 })) {
    if (event.event.case === "final") final = event.event.value;
    else if (final === undefined) before.push(event.event.case ?? "");
  }
  out.events_before_final = before;
  out.top_hit = final!.hits[0].documentId;

  const observed = await client.observe([
    { observation: { case: "retrievalOutcome", value: { retrievalId: final!.retrievalId, usedDocumentIds: [final!.hits[0].documentId] } } },
  ]);
  out.recorded = Number(observed.recorded);

  // Calibrate refuses to fit from too few recorded states, saying why.
  const refused = await refusal(() =>
    client.calibrate({ target: CalibrationTarget.STOP_THRESHOLD, task: "dc", regime: "collapse", stopRule: "mi_only" }),
  );
  out.calibrate_code = refused.codeName;
  out.calibrate_reason = refused.reason;

  // A bad request names its field: refused before it is sent when it breaks a rule its proto
  // declares, by the server when it passes a deployment's limit.
  const invalid = await refusal(() => client.createCollection("Not A Name"));
  out.invalid_code = invalid.codeName;
  out.invalid_fields = invalid.fields;
  const overLimit = await refusal(async () => {
    for await (const _ of client.retrieve({ collection, query: "tides", topK: 100_000 })) {
      // refused before the first event
    }
  });
  out.over_limit_code = overLimit.codeName;
  out.over_limit_fields = overLimit.fields;

  // Aborting a Retrieve whose generating arm (hyde) takes seconds, after its first event.
  const abort = new AbortController();
  const cancelled = await refusal(async () => {
    for await (const _ of client.retrieve({ collection, query: "tides", topK: 2, arms: ["dense", "hyde"] }, { signal: abort.signal })) {
      abort.abort();
    }
  });
  out.retrieve_cancel_code = cancelled.codeName;

  // Bulls and cows: two questions, then the stream is closed mid-session. The server holds a
  // session for one stream at a time (SESSION_BUSY otherwise), so resuming it shows the server
  // saw the cancel; the resumed game is played to its answer.
  const first = client.inquire({ domain: "bulls_and_cows", policy: { questionSelection: "eig" } });
  let asks = 0;
  for await (const event of first) {
    if (event.event.case !== "ask") continue;
    asks++;
    if (asks === 2) break; // leaving the loop closes the session's stream
    first.answer(feedback(event.event.value.question));
  }
  out.asks_before_cancel = asks;
  const deadline = Date.now() + 60_000; // waits for the server to see the cancel, however busy the machine
  let resumed: InquirySession | undefined;
  let events: AsyncIterator<InquireResponse> | undefined;
  while (resumed === undefined) {
    const attempt = client.resumeInquiry(first.sessionId);
    const iterator = attempt[Symbol.asyncIterator]();
    try {
      await iterator.next();
      resumed = attempt;
      events = iterator;
    } catch (error) {
      if (!(error instanceof SoundingError) || error.reason !== "SESSION_BUSY" || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  out.resumed_after_cancel = true;
  for (let step = await events!.next(); !step.done; step = await events!.next()) {
    const event = step.value.event;
    if (event.case === "ask") resumed.answer(feedback(event.value.question));
    if (event.case === "answer") {
      out.answer = event.value.answer;
      out.stopping_reason = StoppingReason[event.value.stoppingReason];
    }
  }

  // Tool routing: a route, successful uses of another tool reported through the observer, the
  // route again once the learner processed them.
  const toolset = `${collection}-tools`;
  await client.putTools(toolset, [
    { name: "get_weather", description: "Get the weather forecast (rain, temperature, wind) for a city." },
    { name: "send_email", description: "Send an email message to a recipient." },
    { name: "search_web", description: "Search the web for pages about a topic." },
  ]);
  const request = "How many yen would I get for 250 dollars?";
  out.route_before = (await client.routeTool(toolset, request, 3)).top1;
  // Its call timeout and close's are generous: close resolves once the events are sent.
  const observer = new ToolUseObserver(client, { flushIntervalMs: 20, callTimeoutMs: 120_000 });
  for (let i = 0; i < 4; i++) {
    observer.observe(toolset, `How many yen do I get for 100 dollars? (${i})`, "search_web", { success: true });
  }
  await observer.close(300_000);
  out.observer_sent = observer.sent;
  const learnedBy = Date.now() + 300_000; // waits for the learner; this is not a speed target
  let processed = 0n;
  while (processed < 4n && Date.now() < learnedBy) {
    processed = (await client.toolMetrics(toolset)).processed;
    if (processed < 4n) await new Promise((resolve) => setTimeout(resolve, 100));
  }
  out.tool_events_processed = Number(processed);
  out.route_after = (await client.routeTool(toolset, request, 3)).top1;

  // The observer's contract with a server that takes every call and holds it for longer than
  // the test running this program waits: observe only queues (the spec's non-blocking hand-off)
  // and a full queue drops, so 10,000 calls return while the first batch is held (none sent or
  // failed yet), and close aborts that batch rather than waiting out its hour-long timeout. The
  // p99 is reported for information (speed is measured by benchmarks, not asserted).
  const sessions = new Set<Http2Session>();
  const holding = createServer();
  holding.on("session", (session) => {
    sessions.add(session);
    session.on("error", () => {});
  });
  holding.on("stream", (stream) => stream.on("error", () => {})); // never answered
  await new Promise<void>((resolve) => holding.listen(0, "127.0.0.1", resolve));
  const holdingPort = (holding.address() as AddressInfo).port;
  const quiet = new SoundingClient(`127.0.0.1:${holdingPort}`, { timeoutMs: 3_600_000 });
  const alone = new ToolUseObserver(quiet, { queueSize: 1000, callTimeoutMs: 3_600_000 });
  const took: number[] = [];
  let calls = 0;
  for (let i = 0; i < 10_000; i++) {
    const started = process.hrtime.bigint();
    alone.observe("tools", "request", "shell");
    took.push(Number(process.hrtime.bigint() - started) / 1000);
    calls++;
  }
  out.observe_calls = calls;
  out.silent_settled_while_observing = alone.sent + alone.failed;
  out.silent_dropped_on_full = alone.dropped;
  took.sort((a, b) => a - b);
  out.observe_p99_micros = took[Math.floor(took.length * 0.99)];
  await alone.close(200);
  out.silent_sent = alone.sent;
  out.silent_dropped_or_failed = alone.dropped + alone.failed;
  quiet.close();
  for (const session of sessions) session.destroy();
  await new Promise((resolve) => holding.close(resolve));
} finally {
  await client.deleteCollection(collection);
  client.close();
}
console.log(JSON.stringify(out));
