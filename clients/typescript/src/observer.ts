import { Code } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ObserveRequestSchema, ToolUseEventSchema } from "./gen/sounding/v1/sounding_pb.js";
import type { SoundingClient } from "./client.js";
import { SoundingError } from "./errors.js";

export interface ObserverOptions {
  /** Events waiting to be sent (1000); a full queue drops. */
  queueSize?: number;
  /** Events per Observe call (64). */
  batchSize?: number;
  /** How long the first event of a batch waits for others (500 ms). */
  flushIntervalMs?: number;
  /** One Observe call (10 s). */
  callTimeoutMs?: number;
  /** Calls per batch before it is given up (4). */
  maxAttempts?: number;
  /** Before the second attempt, doubling after (200 ms). */
  backoffMs?: number;
}

type ToolUse = MessageInitShape<typeof ToolUseEventSchema>;

const RETRIED = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.ResourceExhausted, Code.Aborted, Code.Internal, Code.Unknown]);

/**
 * Reports the tools an agent used without ever blocking it (the tool-selection spec's
 * non-blocking hand-off): `observe` only appends the event to a bounded queue and returns, a full
 * queue drops it (counted); a background loop sends batches to Observe, retrying failed calls.
 * `close` stops intake, sends what is queued within its timeout, aborts the rest and resolves once
 * nothing of the observer is left running. Closing twice is harmless; a closed observer, or one
 * made without a client, ignores `observe`. Its timers do not keep Node running.
 */
export class ToolUseObserver {
  /** Events the server recorded; those a full queue refused or close cancelled; those given up. */
  sent = 0;
  dropped = 0;
  failed = 0;
  private readonly options: Required<ObserverOptions>;
  private queue: ToolUse[] = [];
  private closed: boolean;
  private readonly abort = new AbortController();
  private wake: (() => void) | undefined;
  private readonly loop: Promise<void>;

  constructor(
    private readonly client: SoundingClient | undefined,
    options: ObserverOptions = {},
  ) {
    this.options = {
      queueSize: 1000,
      batchSize: 64,
      flushIntervalMs: 500,
      callTimeoutMs: 10_000,
      maxAttempts: 4,
      backoffMs: 200,
      ...options,
    };
    this.closed = client === undefined;
    this.loop = client === undefined ? Promise.resolve() : this.work();
  }

  /** Queues a tool use and returns at once. */
  observe(toolset: string, request: string, usedTool: string, extra: { offeredTools?: string[]; success?: boolean } = {}): void {
    if (this.closed) return;
    if (this.queue.length >= this.options.queueSize) {
      this.dropped++;
      return;
    }
    this.queue.push({ toolset, request, usedTool, offeredTools: extra.offeredTools ?? [], success: extra.success });
  }

  /** Stops intake, sends what is queued within `timeoutMs`, aborts the rest. */
  async close(timeoutMs = 5000): Promise<void> {
    if (this.closed && this.client !== undefined && this.abort.signal.aborted) return;
    this.closed = true;
    if (this.client === undefined) return;
    this.wake?.();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([this.loop, expired]);
    clearTimeout(timer);
    this.abort.abort();
    this.wake?.(); // a loop waiting out a backoff leaves at once
    await this.loop;
    this.dropped += this.queue.length;
    this.queue = [];
  }

  private async work(): Promise<void> {
    while (!this.abort.signal.aborted) {
      if (this.queue.length === 0) {
        if (this.closed) return;
        await this.sleep(this.options.flushIntervalMs);
        continue;
      }
      const batch = this.queue.splice(0, this.options.batchSize);
      await this.send(batch);
    }
  }

  /** Resolves after `ms`, or when close wakes the loop; the timer does not keep Node running. */
  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      timer.unref();
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  private async send(batch: ToolUse[]): Promise<void> {
    const requests: MessageInitShape<typeof ObserveRequestSchema>[] = batch.map((value) => ({
      observation: { case: "toolUse", value },
    }));
    let backoff = this.options.backoffMs;
    for (let attempt = 1; ; attempt++) {
      try {
        const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.options.callTimeoutMs)]);
        const response = await this.client!.observe(requests, { signal });
        this.sent += Number(response.recorded);
        this.failed += response.rejected.length;
        return;
      } catch (error) {
        if (this.abort.signal.aborted) {
          this.dropped += batch.length;
          return;
        }
        const retried = error instanceof SoundingError && RETRIED.has(error.code);
        if (!retried || attempt >= this.options.maxAttempts) {
          this.failed += batch.length;
          return;
        }
        await this.sleep(backoff);
        backoff *= 2;
      }
    }
  }
}
