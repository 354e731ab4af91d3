// The caller's client of the Capability broker (docs/clients.md): CallTool with automatic reattach
// (WatchCall after a dropped stream, replaying exactly the events missed), idempotent start (every
// call carries a call id), Stop and ListTools.
//
// A target may name a team's pool of Hosts (docs/clients.md "Pools of Hosts": `dns:///team-a-hosts:50052`,
// `ipv4:10.0.0.1:50052,10.0.0.2:50052`): new calls are balanced round_robin over its addresses, and a start
// a draining Host refuses HOST_UNAVAILABLE is retried with the same call id (grpc-js has no client-side
// health checking, so this retry is what keeps a draining Host's refusals from reaching the caller). A start
// while no Host of the pool is up (every one restarting mid-rollout) waits for one, within the reattach
// policy's giveUpAfterMs, instead of failing at once. Once `accepted` names the owning Host, every reattach
// goes to that Host's `host_address`. hosts() and a stop() that names no Host ask every Host of the pool on its
// own (the addresses of an `ipv4:` list, or what a `dns:` name resolves to now), draining ones included.

import { randomUUID } from "node:crypto";
import { lookup } from "node:dns/promises";
import { setTimeout as sleep } from "node:timers/promises";

import * as grpc from "@grpc/grpc-js";

import { MakaError, RETRYABLE, statusName } from "./errors.js";
import { type CallEvent, type Outcome, decode, isOutcome } from "./events.js";
import type { CapabilityBrokerServiceClient } from "./generated/maka/broker/v1/CapabilityBrokerService.js";
import type { CallToolRequest } from "./generated/maka/broker/v1/CallToolRequest.js";
import type { CallToolResponse__Output } from "./generated/maka/broker/v1/CallToolResponse.js";
import type { GetStatusResponse__Output } from "./generated/maka/broker/v1/GetStatusResponse.js";
import type { StopRequest } from "./generated/maka/broker/v1/StopRequest.js";
import {
  type ClientOptions,
  clientArgs,
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
  /** Whether the target names a pool of Hosts (default: isPoolTarget(target)). */
  pool?: boolean;
}

/** Whether `target` names a pool of Hosts: a `dns:` name (a headless Service of every ready Host) or a list
 * of addresses (`ipv4:a:1,b:2`). A plain `host:port` names one Host. */
export function isPoolTarget(target: string): boolean {
  const colon = target.indexOf(":");
  if (colon < 0) return false;
  const scheme = target.slice(0, colon);
  if (scheme === "dns") return true;
  return (scheme === "ipv4" || scheme === "ipv6") && target.slice(colon + 1).includes(",");
}

/** One Host of a pool target, dialled on its own: `address` (`host:port`) and the `authority` to send (the pool's
 * DNS name for an address it resolved to, so TLS checks the name the target used; "": the address itself). */
export interface PoolMember {
  address: string;
  authority: string;
}

/** gRPC's port for a `dns:` target that names none. */
export const DNS_DEFAULT_PORT = 443;

function splitHostPort(text: string, defaultPort: number): [string, number] {
  if (text.startsWith("[")) {
    // [v6]:port
    const close = text.indexOf("]");
    const rest = close < 0 ? "" : text.slice(close + 1);
    return [text.slice(1, close < 0 ? undefined : close), rest.startsWith(":") ? Number(rest.slice(1)) : defaultPort];
  }
  const colon = text.lastIndexOf(":");
  if (colon < 0 || text.slice(0, colon).includes(":")) return [text, defaultPort]; // no port, or a bare IPv6 address
  return [text.slice(0, colon), Number(text.slice(colon + 1))];
}

function joinHostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Every Host a pool target names, now: the addresses of an `ipv4:`/`ipv6:` list, or what a `dns:` name resolves to
 * (each address with the name as its authority). A name resolves to the Hosts its DNS lists: in Kubernetes the
 * per-Host headless Service (`dns:///team-a-host:50052`, `publishNotReadyAddresses`) lists draining Hosts too, the
 * pool Service for new calls (`team-a-hosts`) only ready ones. Rejects (the resolver's error) when the name does
 * not resolve. A target that is not a pool is its own one member. */
export async function poolMembers(target: string): Promise<PoolMember[]> {
  if (!isPoolTarget(target)) return [{ address: target, authority: "" }];
  const colon = target.indexOf(":");
  const scheme = target.slice(0, colon);
  const rest = target.slice(colon + 1);
  if (scheme === "ipv4" || scheme === "ipv6") {
    return rest
      .split(",")
      .map((address) => address.trim())
      .filter(Boolean)
      .map((address) => ({ address, authority: "" }));
  }
  let name = rest; // dns:[//authority/]host[:port]
  if (rest.startsWith("//")) {
    const slash = rest.indexOf("/", 2);
    name = slash < 0 ? "" : rest.slice(slash + 1);
  }
  const [host, port] = splitHostPort(name, DNS_DEFAULT_PORT);
  const found = await lookup(host, { all: true });
  const addresses = [...new Set(found.map((entry) => joinHostPort(entry.address, port)))];
  return addresses.map((address) => ({ address, authority: joinHostPort(host, port) }));
}

/** `serving` (takes new calls), `draining` (no new calls; its running calls and forms still served), `not ready`
 * (no provider registered yet, or shutting down) or `unreachable` (`error` says why). */
export type HostState = "serving" | "draining" | "not ready" | "unreachable";

/** One Host of a pool as its broker's `GetStatus` describes it (BrokerClient.hosts()). */
export interface HostStatus {
  /** Where it was reached (an address of the pool target; the client's target for one Host). */
  address: string;
  /** Its `MAKA_HOST_ID` ("" when unreachable). */
  hostId: string;
  state: HostState;
  /** Calls running on it. */
  liveInvocations: number;
  /** Forms its calls wait on. */
  pendingForms: number;
  /** The gRPC status name when it did not answer, else "". */
  error: string;
}

function hostState(status: GetStatusResponse__Output): HostState {
  if (status.draining) return "draining";
  return status.takes_new_calls ? "serving" : "not ready";
}

/** What BrokerClient.stop() stops: one call (`invocationId`: only its owner has it), every call (`allSessions`), a
 * turn (`sessionId` and `turnId`) or a session (`sessionId` alone, the default "default"); on the Host at
 * `hostAddress` (a call's owner, ToolCall.hostAddress), else on every Host of a pool, else on this client's target. */
export interface StopOptions {
  sessionId?: string;
  turnId?: string;
  allSessions?: boolean;
  invocationId?: string;
  hostAddress?: string;
  /** The deadline of each Host's Stop (default 10 s). */
  timeoutMs?: number;
}

/** The service config of a pool channel: round_robin over every address. */
export const POOL_SERVICE_CONFIG = JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] });

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
  /** The Host that owns the call, once `accepted` was seen. */
  hostId = "";
  /** Where that Host is reachable; every reattach goes there (empty: the client's own target). */
  hostAddress: string;
  reattaches = 0;
  /** Starts a pool's draining Host refused HOST_UNAVAILABLE before one was accepted (each retried). */
  refusedStarts = 0;
  outcome: Outcome | null = null;
  private iterator: AsyncGenerator<CallEvent> | null = null;
  private current: grpc.ClientReadableStream<unknown> | null = null;

  constructor(
    private readonly client: BrokerClient,
    private readonly request: CallToolRequest,
    invocationId = "",
    resumeToken = "",
    hostAddress = "",
  ) {
    this.hostAddress = hostAddress;
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

  /** Stop this call's turn (broker Stop) on the Host that owns it: the form closes `stopped`, no retry is sent. */
  async stop(): Promise<number> {
    return this.client.stop({ sessionId: this.sessionId, turnId: this.turnId, hostAddress: this.hostAddress });
  }

  /** Stop following (the broker keeps the call for its reattach grace; see stop()). */
  async close(): Promise<void> {
    this.current?.cancel();
    await this.iterator?.return(undefined);
  }

  private open(): grpc.ClientReadableStream<unknown> {
    if (this.invocationId) {
      // A reattach goes to the Host that owns the call, never to another Host of a pool.
      const owner = this.client.ownerStub(this.hostAddress);
      return owner.WatchCall({ invocation_id: this.invocationId, resume_token: this.resumeToken }, this.client.metadata());
    }
    // A pool's start waits for a connected Host (waitForAReadyHost bounded that wait) rather than failing at once.
    const md = this.client.metadata();
    if (this.client.pool) md.setOptions({ waitForReady: true });
    return this.client.stub.CallTool(this.request, md);
  }

  /** A pool's start refused HOST_UNAVAILABLE before `accepted`: that Host drains and started nothing. */
  private refusedByADrainingHost(event: CallEvent): boolean {
    return this.client.pool && !this.invocationId && event.kind === "failure" && event.code === "HOST_UNAVAILABLE";
  }

  private async *events(): AsyncGenerator<CallEvent> {
    const policy = this.client.reattach;
    let attempt = 0;
    let firstRefusal: number | null = null;
    for (;;) {
      let refusal: CallEvent | null = null;
      if (this.client.pool && !this.invocationId) await this.client.waitForAReadyHost(policy.giveUpAfterMs);
      for await (const event of this.follow()) {
        if (this.refusedByADrainingHost(event)) {
          refusal = event;
          break;
        }
        yield event;
      }
      if (!refusal) return;
      this.refusedStarts += 1;
      this.sequence = 0; // another Host's log starts again at 1
      this.resumeToken = "";
      const now = Date.now();
      firstRefusal ??= now;
      if (now - firstRefusal >= policy.giveUpAfterMs) {
        this.outcome = refusal as Outcome;
        yield refusal;
        return;
      }
      attempt += 1;
      await sleep(Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2));
    }
  }

  /** One start (or watch) of the call, reattaching as it drops, until its outcome. */
  private async *follow(): AsyncGenerator<CallEvent> {
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
          if (event.kind === "accepted") {
            this.invocationId = event.invocationId;
            this.hostId = event.hostId;
            this.hostAddress = event.hostAddress;
          }
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
  /** Whether the target names a pool of Hosts (round_robin, refusals of a draining Host retried). */
  readonly pool: boolean;
  private readonly token: string | undefined;
  private readonly tls: BrokerClientOptions["tls"];
  private readonly owners = new Map<string, CapabilityBrokerServiceClient>();

  constructor(
    readonly target: string = DEFAULT_BROKER_TARGET,
    options: BrokerClientOptions = {},
  ) {
    const proto = loadBroker();
    this.pool = options.pool ?? isPoolTarget(target);
    const extra = this.pool ? { "grpc.service_config": POOL_SERVICE_CONFIG } : {};
    this.stub = new proto.maka.broker.v1.CapabilityBrokerService(target, ...clientArgs(target, options.tls, extra));
    this.reattach = { ...DEFAULT_REATTACH, ...options.reattach };
    this.token = options.token;
    this.tls = options.tls;
  }

  /** The stub of the Host at `hostAddress` (a call's owner, or one Host of the pool; one channel per address,
   * pick_first, so a draining Host still serves the calls it owns); `authority` is sent as `:authority` (and checked
   * as the TLS name unless the TLS options name one) for an address a `dns:` pool resolved to. This client's own
   * for "". */
  ownerStub(hostAddress: string, authority = ""): CapabilityBrokerServiceClient {
    if (!hostAddress) return this.stub;
    let stub = this.owners.get(hostAddress);
    if (!stub) {
      const proto = loadBroker();
      const extra: grpc.ChannelOptions = {};
      if (authority) {
        extra["grpc.default_authority"] = authority;
        if (this.tls && !this.tls.serverName) extra["grpc.ssl_target_name_override"] = splitHostPort(authority, 0)[0];
      }
      stub = new proto.maka.broker.v1.CapabilityBrokerService(hostAddress, ...clientArgs(hostAddress, this.tls, extra));
      this.owners.set(hostAddress, stub);
    }
    return stub;
  }

  /** Every Host of the pool now (poolMembers), else this client's one target (address ""). Rejects with a
   * MakaError UNAVAILABLE when a `dns:` name does not resolve. */
  async members(): Promise<PoolMember[]> {
    if (!this.pool) return [{ address: "", authority: "" }];
    try {
      return await poolMembers(this.target);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      throw new MakaError("UNAVAILABLE", `the pool ${this.target} did not resolve: ${typeof code === "string" ? code : String(error)}`);
    }
  }

  /** Every Host of the pool (each asked on its own with `GetStatus`, draining ones included), or this client's one
   * Host: its id, whether it takes new calls or drains, its calls running and the forms they wait on. A Host that
   * did not answer within `timeoutMs` is `unreachable`, with the status name in `error`. */
  async hosts(timeoutMs = 5_000): Promise<HostStatus[]> {
    const one = (member: PoolMember): Promise<HostStatus> =>
      new Promise((resolve) =>
        this.ownerStub(member.address, member.authority).GetStatus(
          {},
          this.metadata(),
          { deadline: Date.now() + timeoutMs },
          (error, status) => {
            const address = member.address || this.target;
            if (error || !status) {
              const name = error ? statusName(error.code) : "UNKNOWN";
              resolve({ address, hostId: "", state: "unreachable", liveInvocations: 0, pendingForms: 0, error: name });
              return;
            }
            resolve({
              address,
              hostId: status.host_id,
              state: hostState(status),
              liveInvocations: status.live_invocations,
              pendingForms: status.pending_forms,
              error: "",
            });
          },
        ),
      );
    return Promise.all((await this.members()).map(one));
  }

  /** Until the pool's channel has a connected Host, at most `timeoutMs`; then a MakaError UNAVAILABLE ("no Host
   * of the pool ... takes new calls": every Host is down or restarting). grpc-js has no client-side health
   * checking, so a connected Host that drains still refuses the start, which is retried with the same call id. */
  waitForAReadyHost(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) =>
      this.stub.waitForReady(Date.now() + timeoutMs, (error) =>
        error ? reject(new MakaError("UNAVAILABLE", `no Host of the pool ${this.target} takes new calls`)) : resolve(),
      ),
    );
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
    for (const owner of this.owners.values()) owner.close();
    this.owners.clear();
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

  /** Follow a call started earlier by this principal, replaying the events after `resumeToken`;
   * `hostAddress` is the owning Host's (ToolCall.hostAddress; "": this client's target). */
  watchCall(invocationId: string, resumeToken = "", hostAddress = ""): ToolCall {
    return new ToolCall(this, {}, invocationId, resumeToken, hostAddress);
  }

  /** Broker Stop: one call (`invocationId`), a turn, a session or (`allSessions`) every live call; how many stopped.
   * On the Host at `hostAddress` (a call's owner, ToolCall.hostAddress); without it each Host of a pool is asked
   * (members(), draining ones included: a draining Host still stops the calls it owns; only the owner of
   * `invocationId` stops it), else this client's target. Rejects with a MakaError when a Host asked did not answer
   * (the others' calls are stopped all the same). The positional form is `stop(sessionId, turnId, allSessions,
   * timeoutMs, hostAddress)`. */
  stop(options: StopOptions): Promise<number>;
  stop(sessionId?: string, turnId?: string, allSessions?: boolean, timeoutMs?: number, hostAddress?: string): Promise<number>;
  async stop(
    first: StopOptions | string = "default",
    turnId = "",
    allSessions = false,
    timeoutMs = 10_000,
    hostAddress = "",
  ): Promise<number> {
    const options: StopOptions =
      typeof first === "object" ? first : { sessionId: first, turnId, allSessions, timeoutMs, hostAddress };
    const request: StopRequest = options.invocationId
      ? { invocation_id: options.invocationId }
      : options.allSessions
        ? { all: true }
        : { session_id: options.sessionId ?? "default", turn_id: options.turnId ?? "" };
    const deadlineMs = options.timeoutMs ?? 10_000;
    const members = options.hostAddress ? [{ address: options.hostAddress, authority: "" }] : await this.members();
    const one = (member: PoolMember): Promise<number> =>
      new Promise((resolve, reject) =>
        this.ownerStub(member.address, member.authority).Stop(
          request,
          this.metadata(),
          { deadline: Date.now() + deadlineMs },
          (error, response) => (error ? reject(MakaError.fromStatus(error)) : resolve(response!.stopped_invocations)),
        ),
      );
    const answers = await Promise.allSettled(members.map(one));
    for (const answer of answers) if (answer.status === "rejected") throw answer.reason;
    return answers.reduce((sum, answer) => sum + (answer.status === "fulfilled" ? answer.value : 0), 0);
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
