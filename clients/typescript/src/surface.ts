// The surface's client of the Interaction service: pending(), answer(), attach() (the live
// projection of pending forms, resumed with its token after a drop) and listHistory() (settled forms: who
// answered, the outcome, never a value).

import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import * as grpc from "@grpc/grpc-js";

import { DEFAULT_REATTACH, type ReattachPolicy } from "./broker.js";
import { MakaError, RETRYABLE, statusName } from "./errors.js";
import { type Action, type Reattaching, time } from "./events.js";
import type { Interaction__Output } from "./generated/maka/interaction/v1/Interaction.js";
import type { InteractionServiceClient } from "./generated/maka/interaction/v1/InteractionService.js";
import type { AttachResponse__Output } from "./generated/maka/interaction/v1/AttachResponse.js";
import type { HistoryEntry__Output } from "./generated/maka/interaction/v1/HistoryEntry.js";
import type { ListHistoryResponse__Output } from "./generated/maka/interaction/v1/ListHistoryResponse.js";
import type { Value } from "./generated/maka/form/v1/Value.js";
import {
  type ClientOptions,
  clientArgs,
  loadInteraction,
  metadata,
  stateDirEndpoint,
  tlsFromEnv,
} from "./grpc.js";

export const DEFAULT_INTERACTION_TARGET = "127.0.0.1:50051";
/** Sent on Attach's subscribe so `maka status` can say what is attached (`Subscribe.surface_kind`). */
export const SURFACE_KIND = "maka-client-ts";

export interface FormField {
  name: string;
  label: string;
  description: string;
  required: boolean;
  /** string, number, integer, boolean, single_select or multi_select. */
  kind: string;
  /** A string field's format: email, uri, date, date-time, or "" for plain text. */
  format: string;
  options: string[];
}

/** Who asks (set by the broker from the provider registration; the server and Tool are as claimed). */
export interface Requester {
  providerId: string;
  providerDisplayName: string;
  claimedServer: string;
  claimedTool: string;
}

export interface Form {
  interactionId: string;
  sessionId: string;
  turnId: string;
  invocationId: string;
  toolName: string;
  message: string;
  requester: Requester;
  fields: FormField[];
  /** pending, answered or closed. */
  state: string;
  action: Action | null;
  closeReason: string;
  expiresAt: Date | null;
  /** The person the call was made for (the principal of the binding's `made_for`: a name, never a token); "" for a
   * machine caller's call. Such a form is seen and answered only by that person and the approvers a policy names. */
  madeFor: string;
}

export type AnswerValue = string | number | boolean | string[];

/** Who committed an answer: the principal's name (a token's name, never the token; a person), its kind (token,
 * anonymous, oidc), the surface kind it answered through, the issuer of a person's verified token, and `via`: the
 * surface token that answered for a signed-in person ("" when none). */
export interface AnsweredBy {
  principal: string;
  principalKind: string;
  surfaceKind: string;
  issuer: string;
  via: string;
}

/** One settled form (`ListHistory`): ids, Tool, provenance, outcome, who answered and when, and whether the
 * answer reached the Tool (`delivery`: pending, delivered, lost; "" when not answered). Never an answer value. */
export interface HistoryEntry {
  interactionId: string;
  hostId: string;
  sessionId: string;
  turnId: string;
  invocationId: string;
  /** Qualified `SERVER:TOOL` as the model called it. */
  toolName: string;
  /** The provider as the broker registered it (trusted). */
  provider: string;
  /** The server the provider claims (display only, untrusted). */
  claimedServer: string;
  /** answered or closed. */
  state: string;
  action: Action | null;
  closeReason: string;
  answeredBy: AnsweredBy | null;
  createdAt: Date | null;
  settledAt: Date | null;
  delivery: string;
  deliveryLostReason: string;
  deliveryRecordedAt: Date | null;
  /** The person the call was made for (the principal of `made_for`); "" for a machine caller's call. */
  madeFor: string;
}

/** One `listHistory` page: newest first; `nextPageToken` ("" = no older entry) asks for the next. */
export interface HistoryPage {
  entries: HistoryEntry[];
  nextPageToken: string;
}

export type FormEvent =
  | { kind: "snapshot"; pending: Form[]; resumeToken: string }
  | { kind: "opened" | "answered" | "closed"; form: Form; resumeToken: string }
  | Reattaching;

function lower(value: string, prefix: string): string {
  return value.startsWith(prefix) ? value.slice(prefix.length).toLowerCase() : value.toLowerCase();
}

export function formOf(message: Interaction__Output): Form {
  const fields = (message.form?.fields ?? []).map((f) => {
    const kind = f.kind ?? "string";
    const options =
      kind === "single_select"
        ? (f.single_select?.options ?? []).map((o) => o.value)
        : kind === "multi_select"
          ? (f.multi_select?.options ?? []).map((o) => o.value)
          : [];
    const rawFormat = kind === "string" ? String(f.string?.format ?? "STRING_FORMAT_UNSPECIFIED") : "STRING_FORMAT_UNSPECIFIED";
    const format = rawFormat === "STRING_FORMAT_UNSPECIFIED" ? "" : lower(rawFormat, "STRING_FORMAT_").replace("_", "-");
    return { name: f.name, label: f.label, description: f.description, required: f.required, kind, format, options };
  });
  const requester = message.form?.requester;
  const state = lower(String(message.state), "INTERACTION_STATE_");
  return {
    interactionId: message.interaction_id,
    sessionId: message.binding?.session_id ?? "",
    turnId: message.binding?.turn_id ?? "",
    invocationId: message.binding?.invocation_id ?? "",
    toolName: message.binding?.tool_name ?? "",
    message: message.form?.message ?? "",
    requester: {
      providerId: requester?.provider_id ?? "",
      providerDisplayName: requester?.provider_display_name ?? "",
      claimedServer: requester?.claimed_server ?? "",
      claimedTool: requester?.claimed_tool ?? "",
    },
    fields,
    state,
    action: state === "answered" ? (lower(String(message.answer?.action), "ACTION_") as Action) : null,
    closeReason: lower(String(message.close_reason), "CLOSE_REASON_"),
    expiresAt: time(message.expires_at),
    madeFor: message.binding?.made_for?.principal ?? "",
  };
}

export function historyEntryOf(message: HistoryEntry__Output): HistoryEntry {
  const state = lower(String(message.state), "INTERACTION_STATE_");
  const answered = state === "answered";
  const delivery = answered ? lower(String(message.delivery), "DELIVERY_STATE_") : "";
  const who = message.answered_by;
  return {
    interactionId: message.interaction_id,
    hostId: message.host_id,
    sessionId: message.session_id,
    turnId: message.turn_id,
    invocationId: message.invocation_id,
    toolName: message.tool_name,
    provider: message.requester?.provider_display_name || message.requester?.provider_id || "",
    claimedServer: message.requester?.claimed_server ?? "",
    state,
    action: answered ? (lower(String(message.action), "ACTION_") as Action) : null,
    closeReason: lower(String(message.close_reason), "CLOSE_REASON_"),
    answeredBy: who
      ? {
          principal: who.principal,
          principalKind: lower(String(who.principal_kind), "PRINCIPAL_KIND_"),
          surfaceKind: who.surface_kind,
          issuer: who.issuer,
          via: who.via,
        }
      : null,
    createdAt: time(message.created_at),
    settledAt: time(message.settled_at),
    delivery,
    deliveryLostReason: delivery === "lost" ? lower(String(message.delivery_lost_reason), "CLOSE_REASON_") : "",
    deliveryRecordedAt: time(message.delivery_recorded_at),
    madeFor: message.made_for?.principal ?? "",
  };
}

function toValue(field: FormField | undefined, name: string, value: AnswerValue): Value {
  if (typeof value === "boolean") return { boolean_value: value };
  if (typeof value === "number") {
    if (Number.isInteger(value) && field?.kind !== "number") return { integer_value: String(value) };
    return { number_value: value };
  }
  if (typeof value === "string") return { string_value: value };
  if (Array.isArray(value) && value.every((item) => typeof item === "string")) return { string_list_value: { values: value } };
  throw new MakaError("INVALID_ARGUMENT", `value of ${JSON.stringify(name)} must be a string, number, boolean or list of strings`);
}

/** Client of maka.interaction.v1.InteractionService for surfaces (show and answer forms). */
export class SurfaceClient {
  readonly stub: InteractionServiceClient;
  private readonly token: string | undefined;
  private readonly reattach: ReattachPolicy;
  /** The Runtime Host every request names (`host_id`); "" = the tier's only Host, or the one the token names. */
  readonly hostId: string;

  constructor(
    readonly target: string = DEFAULT_INTERACTION_TARGET,
    options: ClientOptions & { reattach?: Partial<ReattachPolicy>; hostId?: string } = {},
  ) {
    const proto = loadInteraction();
    this.stub = new proto.maka.interaction.v1.InteractionService(target, ...clientArgs(target, options.tls));
    this.token = options.token;
    this.reattach = { ...DEFAULT_REATTACH, ...options.reattach };
    this.hostId = options.hostId ?? "";
  }

  /** `target`, else $MAKA_INTERACTION_TARGET, else the Interaction service of the local stack's endpoints.json
   * ($MAKA_STATE_DIR, default ./.state; with its owner's token when $MAKA_SURFACE_TOKEN is unset), else
   * 127.0.0.1:50051; token $MAKA_SURFACE_TOKEN, Host $MAKA_HOST_ID, TLS from $MAKA_TLS_*. */
  static fromEnv(target?: string, options: ClientOptions & { hostId?: string } = {}): SurfaceClient {
    const local = target || process.env.MAKA_INTERACTION_TARGET ? undefined : stateDirEndpoint("interaction");
    const chosen = target || process.env.MAKA_INTERACTION_TARGET || local?.target || DEFAULT_INTERACTION_TARGET;
    return new SurfaceClient(chosen, {
      token: process.env.MAKA_SURFACE_TOKEN || local?.token || undefined,
      hostId: process.env.MAKA_HOST_ID || "",
      tls: tlsFromEnv(),
      ...options,
    });
  }

  close(): void {
    this.stub.close();
  }

  private unary<Req, Res>(method: string, request: Req, timeoutMs: number): Promise<Res> {
    const stub = this.stub as unknown as Record<
      string,
      (r: Req, m: grpc.Metadata, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: Res) => void) => void
    >;
    return new Promise((resolve, reject) =>
      stub[method]!.call(this.stub, request, metadata(this.token), { deadline: Date.now() + timeoutMs }, (error, response) =>
        error ? reject(MakaError.fromStatus(error)) : resolve(response as Res),
      ),
    );
  }

  /** The pending forms of `sessionIds` (empty = every session this surface may see). */
  async pending(sessionIds: string[] = [], timeoutMs = 10_000): Promise<Form[]> {
    const response = await this.unary<object, { pending: Interaction__Output[] }>("ListPending", { session_ids: sessionIds, host_id: this.hostId }, timeoutMs);
    return response.pending.map(formOf);
  }

  /** One form, pending or settled. */
  async get(interactionId: string, sessionId = "", timeoutMs = 10_000): Promise<Form> {
    const response = await this.unary<object, { interaction: Interaction__Output }>(
      "GetInteraction",
      { interaction_id: interactionId, session_id: sessionId, host_id: this.hostId },
      timeoutMs,
    );
    return formOf(response.interaction);
  }

  /** Commit accept (with values typed by the form's field kinds), decline or cancel. */
  async answer(
    interactionId: string,
    action: Action,
    values: Record<string, AnswerValue> = {},
    options: { sessionId?: string; submissionId?: string; timeoutMs?: number } = {},
  ): Promise<Form> {
    const timeoutMs = options.timeoutMs ?? 10_000;
    let sessionId = options.sessionId ?? "";
    const typed: Record<string, Value> = {};
    if (Object.keys(values).length > 0) {
      const form = await this.get(interactionId, sessionId, timeoutMs);
      sessionId ||= form.sessionId;
      for (const [name, value] of Object.entries(values)) {
        typed[name] = toValue(form.fields.find((f) => f.name === name), name, value);
      }
    }
    const response = await this.unary<object, { interaction: Interaction__Output }>(
      "Answer",
      {
        interaction_id: interactionId,
        session_id: sessionId,
        submission_id: options.submissionId ?? `sub-${randomUUID()}`,
        host_id: this.hostId,
        answer: { action: `ACTION_${action.toUpperCase()}`, values: typed },
      },
      timeoutMs,
    );
    return formOf(response.interaction);
  }

  /** Settled forms of `sessionIds` (empty = every session this surface may see), newest first: who answered, the
   * action, the close reason and the delivery, never a value. `pageSize` 0 lets the service choose (50; at most
   * 500); pass the page's `nextPageToken` as `pageToken` for older entries. */
  async listHistory(
    sessionIds: string[] = [],
    options: { pageSize?: number; pageToken?: string; timeoutMs?: number } = {},
  ): Promise<HistoryPage> {
    const response = await this.unary<object, ListHistoryResponse__Output>(
      "ListHistory",
      { session_ids: sessionIds, host_id: this.hostId, page_size: options.pageSize ?? 0, page_token: options.pageToken ?? "" },
      options.timeoutMs ?? 10_000,
    );
    return { entries: response.entries.map(historyEntryOf), nextPageToken: response.next_page_token };
  }

  /** The live projection of `sessionIds`; reconnects with the last resume token after a drop. */
  async *attach(sessionIds: string[] = [], resumeToken = ""): AsyncGenerator<FormEvent> {
    let token = resumeToken;
    let attempt = 0;
    for (;;) {
      const call = this.stub.Attach(metadata(this.token));
      let code = "EOF";
      try {
        call.write({
          subscribe: { session_ids: sessionIds, resume_token: token, surface_kind: SURFACE_KIND, host_id: this.hostId },
        });
        for await (const item of call) {
          attempt = 0;
          const event = decodeAttach(item as AttachResponse__Output);
          if (!event) continue;
          token = event.resumeToken || token;
          yield event;
        }
      } catch (error) {
        const status = error as grpc.ServiceError;
        if (typeof status.code !== "number") throw error;
        if (!RETRYABLE.has(status.code)) throw MakaError.fromStatus(status);
        code = statusName(status.code);
      } finally {
        call.cancel();
      }
      attempt += 1;
      const delayMs = Math.min(this.reattach.maxDelayMs, this.reattach.initialDelayMs * 2 ** (attempt - 1));
      yield { kind: "reattaching", code, attempt, delayMs };
      await sleep(delayMs);
    }
  }
}

function decodeAttach(response: AttachResponse__Output): Exclude<FormEvent, Reattaching> | null {
  if (response.frame === "snapshot") {
    return { kind: "snapshot", pending: response.snapshot!.pending.map(formOf), resumeToken: response.snapshot!.resume_token };
  }
  if (response.frame !== "event") return null;
  const event = response.event!.event!;
  const kind = lower(String(event.kind), "EVENT_KIND_");
  if (kind !== "opened" && kind !== "answered" && kind !== "closed") return null;
  return { kind, form: formOf(event.interaction!), resumeToken: response.event!.resume_token };
}
