// The caller's client of the Capability broker (docs/clients.md): CallTool with automatic reattach
// (WatchCall after a dropped stream, replaying exactly the events missed), idempotent start (every
// call carries a call id), Stop and ListTools.

import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import * as grpc from "@grpc/grpc-js";

import { MakaError, RETRYABLE, statusName } from "./errors.js";
import { type CallEvent, type Outcome, decode, isOutcome } from "./events.js";
import type { CapabilityBrokerServiceClient } from "./generated/maka/broker/v1/CapabilityBrokerService.js";
import type { CallToolRequest } from "./generated/maka/broker/v1/CallToolRequest.js";
import type { CallToolResponse__Output } from "./generated/maka/broker/v1/CallToolResponse.js";
import {
  type ClientOptions,
  channelOptions,
  credentials,
  loadBroker,
  metadata,
  stateDirEndpoint,
  tlsFromEnv,
} from "./grpc.js";

export const DEFAULT_BROKER_TARGET = "127.0.0.1:50052";

/** How a dropped call stream is resumed: jittered exponential backoff, bounded in time. */
export interface ReattachPolicy {
  initialDelayMs: number;
  maxDelayMs: number;
  /** Counted from the first failure since the last event; 0 disables reattaching. */
  giveUpAfterMs: number;
}

export const DEFAULT_REATTACH: ReattachPolicy = { initialDelayMs: 200, maxDelayMs: 3000, giveUpAfterMs: 25_000 };

export interface BrokerClientOptions extends ClientOptions {
  reattach?: Partial<ReattachPolicy>;
}

export interface CallOptions {
  sessionId?: string;
  turnId?: string;
  toolUseId?: string;
  callId?: string;
}

export interface ToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  providerId: string;
  providerDisplayName: string;
}

/** A CallTool item, or the event a WatchCallResponse wraps (its `event` is a message, not a oneof name). */
function unwrap(item: unknown): CallToolResponse__Output {
  const wrapped = (item as { event?: unknown }).event;
  return (typeof wrapped === "object" && wrapped !== null ? wrapped : item) as CallToolResponse__Output;
}

/** One Tool call: `for await (const event of call)` yields typed events; `await call.result()` the outcome. */
export class ToolCall implements AsyncIterable<CallEvent> {
  readonly callId: string;
  readonly sessionId: string;
  readonly turnId: string;
  invocationId: string;
  resumeToken: string;
  sequence: number;
  reattaches = 0;
  outcome: Outcome | null = null;
  private iterator: AsyncGenerator<CallEvent> | null = null;
  private current: grpc.ClientReadableStream<unknown> | null = null;

  constructor(
    private readonly client: BrokerClient,
    private readonly request: CallToolRequest,
    invocationId = "",
    resumeToken = "",
  ) {
    this.callId = request.call_id ?? "";
    this.sessionId = request.session_id ?? "";
    this.turnId = request.turn_id ?? "";
    this.invocationId = invocationId;
    this.resumeToken = resumeToken;
    this.sequence = /^\d+$/.test(resumeToken) ? Number(resumeToken) : 0;
  }

  [Symbol.asyncIterator](): AsyncGenerator<CallEvent> {
    this.iterator ??= this.events();
    return this.iterator;
  }

  /** Read the remaining events; the outcome (result, failure, lost or stopped). */
  async result(): Promise<Outcome> {
    for await (const _event of this) {
      // drain
    }
    if (!this.outcome) throw new MakaError("UNKNOWN", "the call ended without an outcome", "NO_RESULT");
    return this.outcome;
  }

  /** Stop this call's turn (broker Stop): the form closes `stopped`, no retry is sent. */
  async stop(): Promise<number> {
    return this.client.stop(this.sessionId, this.turnId);
  }

  /** Stop following (the broker keeps the call for its reattach grace; see stop()). */
  async close(): Promise<void> {
    this.current?.cancel();
    await this.iterator?.return(undefined);
  }

  private open(): grpc.ClientReadableStream<unknown> {
    const stub = this.client.stub;
    if (this.invocationId) {
      return stub.WatchCall({ invocation_id: this.invocationId, resume_token: this.resumeToken }, this.client.metadata());
    }
    return stub.CallTool(this.request, this.client.metadata());
  }

  private async *events(): AsyncGenerator<CallEvent> {
    const policy = this.client.reattach;
    let attempt = 0;
    let failingSince: number | null = null;
    let received = Boolean(this.invocationId);
    for (;;) {
      const stream = this.open();
      this.current = stream;
      let code = "EOF";
      try {
        for await (const item of stream) {
          const raw = unwrap(item);
          attempt = 0;
          failingSince = null;
          received = true;
          const isStatus = raw.event === "status";
          const sequence = Number(raw.sequence || 0);
          if (!isStatus && sequence && sequence <= this.sequence) continue; // replayed: already yielded
          if (!isStatus && sequence) {
            this.sequence = sequence;
            this.resumeToken = raw.resume_token;
          }
          const event = decode(raw);
          if (!event) continue;
          if (event.kind === "accepted") this.invocationId = event.invocationId;
          yield event;
          if (isOutcome(event)) {
            this.outcome = event;
            stream.cancel();
            return;
          }
        }
      } catch (error) {
        const status = error as grpc.ServiceError;
        if (typeof status.code !== "number") throw error;
        if (!RETRYABLE.has(status.code) || !received) throw MakaError.fromStatus(status);
        code = statusName(status.code);
      } finally {
        stream.cancel();
      }
      const now = Date.now();
      failingSince ??= now;
      if (policy.giveUpAfterMs <= 0 || now - failingSince >= policy.giveUpAfterMs) {
        throw new MakaError("UNAVAILABLE", `the call's stream dropped (${code}) and could not be resumed`, "REATTACH_FAILED");
      }
      attempt += 1;
      this.reattaches += 1;
      const delayMs = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
      yield { kind: "reattaching", code, attempt, delayMs };
      await sleep(delayMs);
    }
  }
}

/** Client of maka.broker.v1.CapabilityBrokerService for callers (agent runtimes). */
export class BrokerClient {
  readonly stub: CapabilityBrokerServiceClient;
  readonly reattach: ReattachPolicy;
  private readonly token: string | undefined;

  constructor(
    readonly target: string = DEFAULT_BROKER_TARGET,
    options: BrokerClientOptions = {},
  ) {
    const proto = loadBroker();
    this.stub = new proto.maka.broker.v1.CapabilityBrokerService(target, credentials(options.tls), channelOptions(options.tls));
    this.reattach = { ...DEFAULT_REATTACH, ...options.reattach };
    this.token = options.token;
  }

  /** `target`, else $MAKA_BROKER_TARGET, else the broker of the local stack's endpoints.json ($MAKA_STATE_DIR,
   * default ./.state; with its owner's token when $MAKA_CALLER_TOKEN is unset), else 127.0.0.1:50052; token
   * $MAKA_CALLER_TOKEN, TLS from $MAKA_TLS_*. */
  static fromEnv(target?: string, options: BrokerClientOptions = {}): BrokerClient {
    const local = target || process.env.MAKA_BROKER_TARGET ? undefined : stateDirEndpoint("broker");
    return new BrokerClient(target || process.env.MAKA_BROKER_TARGET || local?.target || DEFAULT_BROKER_TARGET, {
      token: process.env.MAKA_CALLER_TOKEN || local?.token || undefined,
      tls: tlsFromEnv(),
      ...options,
    });
  }

  metadata(): grpc.Metadata {
    return metadata(this.token);
  }

  close(): void {
    this.stub.close();
  }

  /** Call SERVER:TOOL; nothing is sent until the returned ToolCall is iterated. */
  callTool(tool: string, args: Record<string, unknown> = {}, options: CallOptions = {}): ToolCall {
    const suffix = randomUUID().replaceAll("-", "").slice(0, 12);
    return new ToolCall(this, {
      session_id: options.sessionId ?? "default",
      turn_id: options.turnId ?? `turn-${suffix}`,
      tool_use_id: options.toolUseId ?? `call-${suffix}`,
      tool_name: tool,
      arguments_json: JSON.stringify(args),
      call_id: options.callId ?? `cid-${randomUUID()}`,
    });
  }

  /** Follow a call started earlier by this principal, replaying the events after `resumeToken`. */
  watchCall(invocationId: string, resumeToken = ""): ToolCall {
    return new ToolCall(this, {}, invocationId, resumeToken);
  }

  /** Stop a turn, a session or (allSessions) every live call; how many stopped. */
  stop(sessionId = "default", turnId = "", allSessions = false, timeoutMs = 10_000): Promise<number> {
    const request = allSessions ? { all: true } : { session_id: sessionId, turn_id: turnId };
    return new Promise((resolve, reject) =>
      this.stub.Stop(request, this.metadata(), { deadline: Date.now() + timeoutMs }, (error, response) =>
        error ? reject(MakaError.fromStatus(error)) : resolve(response!.stopped_invocations),
      ),
    );
  }

  /** Every Tool of every live provider registration, sorted by qualified name. */
  listTools(timeoutMs = 10_000): Promise<ToolInfo[]> {
    return new Promise((resolve, reject) =>
      this.stub.ListTools({}, this.metadata(), { deadline: Date.now() + timeoutMs }, (error, response) => {
        if (error) return reject(MakaError.fromStatus(error));
        const tools = response!.tools.map((tool) => {
          let schema: unknown = {};
          try {
            schema = JSON.parse(tool.input_schema_json || "{}");
          } catch {
            schema = {};
          }
          return {
            name: tool.qualified_name,
            description: tool.description,
            inputSchema: schema && typeof schema === "object" ? (schema as Record<string, unknown>) : {},
            providerId: tool.provider_id,
            providerDisplayName: tool.provider_display_name,
          };
        });
        resolve(tools.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)));
      }),
    );
  }
}
