import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { DocumentSchema } from "./gen/sounding/v1/common_pb.js";
import {
  CorpusService,
  CreateCollectionRequestSchema,
  DeleteCollectionRequestSchema,
  GetCollectionRequestSchema,
  IngestDocumentsRequestSchema,
  type Collection,
  type IngestDocumentsRequest,
  type IngestDocumentsResponse,
} from "./gen/sounding/v1/corpus_pb.js";
import {
  CalibrateRequestSchema,
  InquireRequestSchema,
  ObserveRequestSchema,
  RetrieveRequestSchema,
  SoundingService,
  type Ask,
  type CalibrationProgress,
  type CalibrationReport,
  type GetStrategyMetricsResponse,
  type InquireResponse,
  type InquiryStartSchema,
  type ObserveResponse,
  type RetrieveResponse,
} from "./gen/sounding/v1/sounding_pb.js";
import {
  DeleteToolsRequestSchema,
  GetToolMetricsRequestSchema,
  ListToolsRequestSchema,
  PutToolsRequestSchema,
  RouteToolRequestSchema,
  ToolService,
  type DeleteToolsResponse,
  type GetToolMetricsResponse,
  type PutToolsResponse,
  type RouteToolResponse,
  type Tool,
  type ToolSchema,
} from "./gen/sounding/v1/tools_pb.js";
import { SoundingError } from "./errors.js";
import { checked } from "./validation.js";

export interface ClientOptions {
  /** Sent as `authorization: Bearer <token>` on every call (only over TLS or to loopback). */
  token?: string;
  /** Turns TLS on, verifying the server against this PEM bundle. */
  caFile?: string;
  /** A client certificate and key, for servers that require mutual TLS. */
  certFile?: string;
  keyFile?: string;
  /** The deadline of every call that sets none (milliseconds). */
  timeoutMs?: number;
}

/** Per call: an AbortSignal cancels it (on the server too), a deadline bounds it. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export type Document = MessageInitShape<typeof DocumentSchema>;

/**
 * The Sounding client: collections and ingestion, streamed retrieval, inquiries, outcome reports,
 * calibration and metrics, over gRPC (HTTP/2). Requests take the generated messages' init shapes;
 * events are the generated messages. Every failure is a SoundingError; a request that breaks a rule
 * its proto declares fails before it is sent, as the server would refuse it (`checked`). `close()` ends the
 * connection (an open connection keeps Node's event loop alive).
 */
export class SoundingClient {
  readonly sounding: Client<typeof SoundingService>;
  readonly corpus: Client<typeof CorpusService>;
  readonly tools: Client<typeof ToolService>;
  private readonly connection: Http2SessionManager;

  constructor(address: string, options: ClientOptions = {}) {
    const secure = Boolean(options.caFile);
    if (!secure && (options.certFile || options.keyFile)) {
      throw new Error("a client certificate needs TLS: set caFile too");
    }
    if (options.token && !secure && !isLoopback(address)) {
      throw new Error(`refusing to send a token in plaintext to ${address}: set caFile for TLS`);
    }
    const baseUrl = `${secure ? "https" : "http"}://${address}`;
    this.connection = new Http2SessionManager(
      baseUrl,
      {},
      secure
        ? {
            ca: readFileSync(options.caFile!),
            cert: options.certFile ? readFileSync(options.certFile) : undefined,
            key: options.keyFile ? readFileSync(options.keyFile) : undefined,
          }
        : undefined,
    );
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.connection,
      interceptors: options.token ? [bearer(options.token)] : [],
      defaultTimeoutMs: options.timeoutMs,
    });
    this.sounding = createClient(SoundingService, transport);
    this.corpus = createClient(CorpusService, transport);
    this.tools = createClient(ToolService, transport);
  }

  async createCollection(name: string, description = "", call?: CallOptions): Promise<Collection> {
    const request = checked(CreateCollectionRequestSchema, { name, description });
    return (await failing(this.corpus.createCollection(request, call))).collection!;
  }

  async getCollection(name: string, call?: CallOptions): Promise<Collection> {
    return (await reading(() => this.corpus.getCollection(checked(GetCollectionRequestSchema, { name }), call))).collection!;
  }

  /** Every collection, page by page. */
  async *listCollections(call?: CallOptions): AsyncIterable<Collection> {
    let pageToken = "";
    do {
      const page = await reading(() => this.corpus.listCollections({ pageToken }, call));
      yield* page.collections;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  async deleteCollection(name: string, call?: CallOptions): Promise<void> {
    await failing(this.corpus.deleteCollection(checked(DeleteCollectionRequestSchema, { name }), call));
  }

  /** Streams documents in batches; resolves with the last acknowledgement (all written). */
  async ingest(
    collection: string,
    documents: Document[],
    batchSize = 64,
    call?: CallOptions,
  ): Promise<IngestDocumentsResponse | undefined> {
    const requests: IngestDocumentsRequest[] = [];
    for (let start = 0; start < documents.length; start += batchSize) {
      requests.push(checked(IngestDocumentsRequestSchema, { collection, documents: documents.slice(start, start + batchSize) }));
    }
    async function* batches() {
      yield* requests;
    }
    let last: IngestDocumentsResponse | undefined;
    const acknowledgements = streaming((signal) => this.corpus.ingestDocuments(batches(), { ...call, signal }), call);
    for await (const acknowledged of acknowledgements) {
      last = acknowledged;
    }
    return last;
  }

  /**
   * A retrieval's events as they arrive: Plan, StrategyResult and Fused events, then Final. The call
   * starts when iteration does; leaving the loop early cancels it on the server.
   */
  retrieve(request: MessageInitShape<typeof RetrieveRequestSchema>, call?: CallOptions): AsyncIterable<RetrieveResponse> {
    const message = checked(RetrieveRequestSchema, request);
    return streaming((signal) => this.sounding.retrieve(message, { ...call, signal }), call);
  }

  /** Starts an inquiry session. */
  inquire(start: MessageInitShape<typeof InquiryStartSchema>, call?: CallOptions): InquirySession {
    return new InquirySession(this.sounding, { message: { case: "start", value: start } }, call);
  }

  /** Continues a stored session: it first re-sends the Belief and the pending Ask (or the answer). */
  resumeInquiry(sessionId: string, call?: CallOptions): InquirySession {
    return new InquirySession(this.sounding, { message: { case: "resume", value: { sessionId } } }, call);
  }

  /** Reports outcomes; the response counts those recorded (durably) and lists the others. */
  async observe(observations: MessageInitShape<typeof ObserveRequestSchema>[], call?: CallOptions): Promise<ObserveResponse> {
    const messages = observations.map((observation) => checked(ObserveRequestSchema, observation));
    async function* each() {
      yield* messages;
    }
    return failing(this.sounding.observe(each(), call));
  }

  /** Fits a calibration target; `onProgress` sees each progress event; resolves with the report. */
  async calibrate(
    request: MessageInitShape<typeof CalibrateRequestSchema>,
    onProgress?: (progress: CalibrationProgress) => void,
    call?: CallOptions,
  ): Promise<CalibrationReport> {
    const message = checked(CalibrateRequestSchema, request);
    for await (const event of streaming((signal) => this.sounding.calibrate(message, { ...call, signal }), call)) {
      if (event.event.case === "report") return event.event.value;
      if (event.event.case === "progress") onProgress?.(event.event.value);
    }
    throw new Error("the Calibrate stream ended without a report");
  }

  async strategyMetrics(call?: CallOptions): Promise<GetStrategyMetricsResponse> {
    return reading(() => this.sounding.getStrategyMetrics({}, call));
  }

  /** Adds tools to a toolset or replaces them by name: one new version of the toolset. */
  async putTools(toolset: string, tools: MessageInitShape<typeof ToolSchema>[], call?: CallOptions): Promise<PutToolsResponse> {
    return failing(this.tools.putTools(checked(PutToolsRequestSchema, { toolset, tools }), call));
  }

  /** Removes tools; with `forgetExemplars`, also what they learned from use. */
  async deleteTools(toolset: string, names: string[], forgetExemplars = false, call?: CallOptions): Promise<DeleteToolsResponse> {
    return failing(this.tools.deleteTools(checked(DeleteToolsRequestSchema, { toolset, names, forgetExemplars }), call));
  }

  /** Every tool of a toolset, by name, page by page. */
  async *listTools(toolset: string, call?: CallOptions): AsyncIterable<Tool> {
    let pageToken = "";
    do {
      const page = await reading(() => this.tools.listTools(checked(ListToolsRequestSchema, { toolset, pageToken }), call));
      yield* page.tools;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** The toolset's tools ranked for a request (among `offeredTools`, if any). */
  async routeTool(toolset: string, request: string, topK = 5, offeredTools: string[] = [], call?: CallOptions): Promise<RouteToolResponse> {
    return reading(() => this.tools.routeTool(checked(RouteToolRequestSchema, { toolset, request, topK, offeredTools }), call));
  }

  /** What the learning loop has done for a toolset. */
  async toolMetrics(toolset: string, call?: CallOptions): Promise<GetToolMetricsResponse> {
    return reading(() => this.tools.getToolMetrics(checked(GetToolMetricsRequestSchema, { toolset }), call));
  }

  /** Closes the connection and any call still open on it. */
  close(): void {
    this.connection.abort();
  }
}

/** How long an inquiry keeps resuming a stream that broke, by default, and the pause before each. */
export const DEFAULT_RESUME_WITHIN_MS = 30_000;
const RESUME_PAUSE_MS = 250;
type InquireRequestInit = MessageInitShape<typeof InquireRequestSchema>;

/**
 * A live Inquire session: iterate it (`for await`) for Belief, Ask and InquiryAnswer events;
 * after an Ask, `answer()` it before awaiting the next event. `sessionId` is known after the first
 * event; `close()` ends the stream and leaves the session resumable.
 *
 * Once the session is known, a stream the server ends with UNAVAILABLE or that is cut (its
 * orchestrator draining, restarting or gone) is resumed on a new stream, which the deployment's
 * balancer may send to another orchestrator, for up to `resumeWithinMs` (a session a dead
 * orchestrator held is free once its hold expires): the events already delivered are not
 * delivered again, and an answer the server had not applied is sent again. A session another
 * stream took over is not resumed.
 */
export class InquirySession implements AsyncIterable<InquireResponse> {
  sessionId = "";
  lastAsk: Ask | undefined;
  /** How long the resumes after one break may go on, in milliseconds (0: never resume). */
  resumeWithinMs = DEFAULT_RESUME_WITHIN_MS;
  /** The streams this session was resumed on. */
  resumes = 0;
  private outbox = new Outbox<InquireRequestInit>();
  private events!: AsyncGenerator<InquireResponse>;
  private answered: InquireRequestInit | undefined; // to lastAsk, once sent
  private closed = false;

  constructor(
    private readonly sounding: Client<typeof SoundingService>,
    first: InquireRequestInit,
    private readonly call: CallOptions = {},
  ) {
    this.open(checked(InquireRequestSchema, first));
  }

  private open(first: InquireRequestInit): void {
    const outbox = (this.outbox = new Outbox<InquireRequestInit>());
    outbox.push(first);
    this.events = streaming((signal) => this.sounding.inquire(outbox, { ...this.call, signal }), this.call);
  }

  private resumable(failure: SoundingError, brokenSince: number | undefined): boolean {
    if (!this.sessionId || this.closed || this.resumeWithinMs <= 0) return false;
    if (brokenSince !== undefined && Date.now() - brokenSince > this.resumeWithinMs) return false;
    if (cut(failure)) return failure.reason !== "SESSION_TAKEN_OVER";
    // A resume that finds the session still held by the stream that broke.
    return brokenSince !== undefined && failure.reason === "SESSION_BUSY";
  }

  async *[Symbol.asyncIterator](): AsyncIterator<InquireResponse> {
    let brokenSince: number | undefined; // when the streams began to break, while they do
    let replaying = false; // a resumed stream re-sends the current Belief and the pending Ask
    let belief: InquireResponse | undefined; // a re-sent Belief, delivered if what follows is new
    try {
      while (true) {
        try {
          for await (const event of this.events) {
            const value = event.event.value;
            if (value && "sessionId" in value) this.sessionId = value.sessionId;
            if (replaying && event.event.case === "belief") {
              belief = event;
              continue;
            }
            if (replaying && event.event.case === "ask" && event.event.value.questionId === this.lastAsk?.questionId) {
              replaying = false;
              belief = undefined;
              if (this.answered) this.outbox.push(this.answered);
              continue; // delivered before the break
            }
            replaying = false;
            brokenSince = undefined;
            if (belief) yield belief;
            belief = undefined;
            if (event.event.case === "ask") {
              this.lastAsk = event.event.value;
              this.answered = undefined;
            }
            yield event;
          }
          return;
        } catch (error) {
          const failure = SoundingError.from(error);
          if (!this.resumable(failure, brokenSince)) throw failure;
        }
        brokenSince ??= Date.now();
        this.outbox.end(); // the broken stream's sender stops
        await new Promise((resolve) => setTimeout(resolve, RESUME_PAUSE_MS));
        this.resumes++;
        this.open(checked(InquireRequestSchema, { message: { case: "resume", value: { sessionId: this.sessionId } } }));
        replaying = true;
        belief = undefined;
      }
    } finally {
      this.close();
    }
  }

  /** Answers the last question asked (or the one named). */
  answer(answer: string, questionId?: string): void {
    const id = questionId ?? this.lastAsk?.questionId;
    if (id === undefined) throw new Error("no question has been asked yet");
    const request = checked(InquireRequestSchema, { message: { case: "observation", value: { questionId: id, answer } } });
    if (id === this.lastAsk?.questionId) this.answered = request;
    this.outbox.push(request);
  }

  close(): void {
    this.closed = true;
    this.outbox.end();
    void this.events.return(undefined);
  }
}

/**
 * Whether the call's server went away under it (draining, restarting, dead): UNAVAILABLE, or its
 * HTTP/2 stream reset (a balancer cuts a stream whose server died, which reads as INTERNAL).
 */
function cut(failure: SoundingError): boolean {
  return (
    failure.code === Code.Unavailable ||
    (failure.code === Code.Internal && failure.message.includes("http/2 stream closed"))
  );
}

const READ_ATTEMPTS = 4;

/**
 * A read that changes nothing, sent again when the server was unavailable (restarting,
 * draining: the next attempt may reach another orchestrator), up to READ_ATTEMPTS in all.
 */
async function reading<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      const failure = SoundingError.from(error);
      if (failure.code !== Code.Unavailable || attempt === READ_ATTEMPTS) throw failure;
      await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** (attempt - 1)));
    }
  }
}

/** An async iterable fed by `push` until `end`. */
class Outbox<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private ended = false;
  private wake: (() => void) | undefined;

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  end(): void {
    this.ended = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    while (true) {
      if (this.items.length) {
        yield this.items.shift()!;
      } else if (this.ended) {
        return;
      } else {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
      }
    }
  }
}

function bearer(token: string): Interceptor {
  return (next) => (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
}

function isLoopback(address: string): boolean {
  const host = address.replace(/:\d+$/, "").replace(/^\[(.*)\]$/, "$1");
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1";
}

async function failing<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw SoundingError.from(error);
  }
}

/**
 * A streaming call that starts when its reader first asks for an event and ends cleanly however
 * the reader leaves: failures become SoundingErrors, and leaving early (break, return) cancels the
 * call on the server.
 */
async function* streaming<T>(start: (signal: AbortSignal) => AsyncIterable<T>, call: CallOptions = {}): AsyncGenerator<T> {
  const abort = new AbortController();
  const signal = call.signal ? AbortSignal.any([call.signal, abort.signal]) : abort.signal;
  const events = start(signal)[Symbol.asyncIterator]();
  let open = true;
  try {
    for (let step = await events.next(); !step.done; step = await events.next()) yield step.value;
    open = false;
  } catch (error) {
    open = false;
    throw SoundingError.from(error);
  } finally {
    if (open) {
      abort.abort();
      // connect frees a call's deadline timer only when the stream is read again after the abort
      await events.next().catch(() => undefined);
    }
  }
}
