import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
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
    return (await failing(this.corpus.getCollection(checked(GetCollectionRequestSchema, { name }), call))).collection!;
  }

  /** Every collection, page by page. */
  async *listCollections(call?: CallOptions): AsyncIterable<Collection> {
    let pageToken = "";
    do {
      const page = await failing(this.corpus.listCollections({ pageToken }, call));
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
    return failing(this.sounding.getStrategyMetrics({}, call));
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
      const page = await failing(this.tools.listTools(checked(ListToolsRequestSchema, { toolset, pageToken }), call));
      yield* page.tools;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /** The toolset's tools ranked for a request (among `offeredTools`, if any). */
  async routeTool(toolset: string, request: string, topK = 5, offeredTools: string[] = [], call?: CallOptions): Promise<RouteToolResponse> {
    return failing(this.tools.routeTool(checked(RouteToolRequestSchema, { toolset, request, topK, offeredTools }), call));
  }

  /** What the learning loop has done for a toolset. */
  async toolMetrics(toolset: string, call?: CallOptions): Promise<GetToolMetricsResponse> {
    return failing(this.tools.getToolMetrics(checked(GetToolMetricsRequestSchema, { toolset }), call));
  }

  /** Closes the connection and any call still open on it. */
  close(): void {
    this.connection.abort();
  }
}

/**
 * A live Inquire session: iterate it (`for await`) for Belief, Ask and InquiryAnswer events;
 * after an Ask, `answer()` it before awaiting the next event. `sessionId` is known after the first
 * event; `close()` ends the stream and leaves the session resumable.
 */
export class InquirySession implements AsyncIterable<InquireResponse> {
  sessionId = "";
  lastAsk: Ask | undefined;
  private readonly outbox = new Outbox<MessageInitShape<typeof InquireRequestSchema>>();
  private readonly events: AsyncGenerator<InquireResponse>;

  constructor(
    sounding: Client<typeof SoundingService>,
    first: MessageInitShape<typeof InquireRequestSchema>,
    call: CallOptions = {},
  ) {
    this.outbox.push(checked(InquireRequestSchema, first));
    this.events = streaming((signal) => sounding.inquire(this.outbox, { ...call, signal }), call);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<InquireResponse> {
    try {
      for await (const event of this.events) {
        const value = event.event.value;
        if (value && "sessionId" in value) this.sessionId = value.sessionId;
        if (event.event.case === "ask") this.lastAsk = event.event.value;
        yield event;
      }
    } finally {
      this.close();
    }
  }

  /** Answers the last question asked (or the one named). */
  answer(answer: string, questionId?: string): void {
    const id = questionId ?? this.lastAsk?.questionId;
    if (id === undefined) throw new Error("no question has been asked yet");
    this.outbox.push(checked(InquireRequestSchema, { message: { case: "observation", value: { questionId: id, answer } } }));
  }

  close(): void {
    this.outbox.end();
    void this.events.return(undefined);
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
