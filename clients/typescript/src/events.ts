// Typed events of one Tool call (docs/clients.md "The event sequence of one call"): accepted, then
// progress / awaiting_interaction / interaction_settled / status (keepalive) / reattaching (client-side),
// ending with exactly one outcome: result, failure, lost or stopped.

import type { CallToolResponse__Output } from "./generated/maka/broker/v1/CallToolResponse.js";
import type { Timestamp__Output } from "./generated/google/protobuf/Timestamp.js";

export type Action = "accept" | "decline" | "cancel";

/** The broker started (or found) the invocation; `hostId` owns it and `hostAddress` is where to reattach
 * (empty: the client's own target). */
export interface Accepted {
  kind: "accepted";
  invocationId: string;
  providerId: string;
  sequence: number;
  hostId: string;
  hostAddress: string;
}
export interface Progress { kind: "progress"; progress: number; total: number | null; message: string; sequence: number }
export interface AwaitingInteraction {
  kind: "awaiting_interaction";
  interactionId: string;
  message: string;
  fieldCount: number;
  expiresAt: Date | null;
  sequence: number;
}
export interface InteractionSettled {
  kind: "interaction_settled";
  interactionId: string;
  action: Action | null;
  closeReason: string;
  sequence: number;
}
export interface Status {
  kind: "status";
  invocationId: string;
  phase: "running" | "awaiting_interaction" | "unspecified";
  interactionId: string;
  interactionExpiresAt: Date | null;
  watchers: number;
  sequence: number;
}
export interface Reattaching { kind: "reattaching"; code: string; attempt: number; delayMs: number }
export interface Result {
  kind: "result";
  result: Record<string, unknown>;
  isError: boolean;
  /** Text content blocks joined by newlines (structuredContent as JSON when there are none). */
  text: string;
  sequence: number;
}
export interface Failure { kind: "failure"; code: string; message: string; sequence: number }
export interface Lost { kind: "lost"; reason: string; sequence: number }
export interface Stopped { kind: "stopped"; sequence: number }

export type Outcome = Result | Failure | Lost | Stopped;
export type CallEvent = Accepted | Progress | AwaitingInteraction | InteractionSettled | Status | Reattaching | Outcome;

export const OUTCOME_KINDS = new Set(["result", "failure", "lost", "stopped"]);

export function isOutcome(event: CallEvent): event is Outcome {
  return OUTCOME_KINDS.has(event.kind);
}

export function time(stamp: Timestamp__Output | null | undefined): Date | null {
  if (!stamp) return null;
  return new Date(Number(stamp.seconds) * 1000 + Math.floor(stamp.nanos / 1e6));
}

function lower(value: string, prefix: string): string {
  return value.startsWith(prefix) ? value.slice(prefix.length).toLowerCase() : value.toLowerCase();
}

export function resultText(result: Record<string, unknown>): string {
  const content = Array.isArray(result.content) ? (result.content as Record<string, unknown>[]) : [];
  const parts = content.filter((b) => b && b.type === "text").map((b) => String(b.text ?? ""));
  if (parts.length === 0 && "structuredContent" in result) parts.push(JSON.stringify(result.structuredContent));
  return parts.join("\n");
}

/** The typed event of one CallToolResponse (null for an event kind this client does not know). */
export function decode(event: CallToolResponse__Output): CallEvent | null {
  const sequence = Number(event.sequence || 0);
  switch (event.event) {
    case "accepted":
      return {
        kind: "accepted",
        invocationId: event.accepted!.invocation_id,
        providerId: event.accepted!.provider_id,
        sequence,
        hostId: event.accepted!.host_id,
        hostAddress: event.accepted!.host_address,
      };
    case "progress": {
      const p = event.progress!;
      return { kind: "progress", progress: p.progress, total: p.total ?? null, message: p.message, sequence };
    }
    case "awaiting_interaction": {
      const a = event.awaiting_interaction!;
      return {
        kind: "awaiting_interaction",
        interactionId: a.interaction_id,
        message: a.message,
        fieldCount: a.field_count,
        expiresAt: time(a.expires_at),
        sequence,
      };
    }
    case "interaction_settled": {
      const s = event.interaction_settled!;
      const action = s.action === "ACTION_UNSPECIFIED" ? null : (lower(String(s.action), "ACTION_") as Action);
      return {
        kind: "interaction_settled",
        interactionId: s.interaction_id,
        action,
        closeReason: lower(String(s.close_reason), "CLOSE_REASON_"),
        sequence,
      };
    }
    case "status": {
      const st = event.status!;
      const phase =
        st.phase === "CALL_PHASE_RUNNING" ? "running" : st.phase === "CALL_PHASE_AWAITING_INTERACTION" ? "awaiting_interaction" : "unspecified";
      return {
        kind: "status",
        invocationId: st.invocation_id,
        phase,
        interactionId: st.interaction_id,
        interactionExpiresAt: time(st.interaction_expires_at),
        watchers: st.watchers,
        sequence,
      };
    }
    case "result": {
      let parsed: unknown;
      try {
        parsed = JSON.parse(event.result!.call_tool_result_json || "{}");
      } catch {
        parsed = null;
      }
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
        return { kind: "failure", code: "INVALID_RESULT", message: "the broker returned a result that is not a JSON object", sequence };
      }
      const result = parsed as Record<string, unknown>;
      return { kind: "result", result, isError: event.result!.is_error || result.isError === true, text: resultText(result), sequence };
    }
    case "failure":
      return { kind: "failure", code: lower(String(event.failure!.code), "FAILURE_CODE_").toUpperCase(), message: event.failure!.message, sequence };
    case "lost":
      return { kind: "lost", reason: event.lost!.reason, sequence };
    case "stopped":
      return { kind: "stopped", sequence };
    default:
      return null;
  }
}
