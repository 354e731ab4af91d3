// One error type for every refused or failed call: the gRPC status name and the stable reason
// (google.rpc.ErrorInfo.reason from the status details, decoded with protobufjs).

import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";

const rpcTypes = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: { nested: { Any: { fields: { type_url: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } } } },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: "int32", id: 1 },
                message: { type: "string", id: 2 },
                details: { rule: "repeated", type: "google.protobuf.Any", id: 3 },
              },
            },
            ErrorInfo: { fields: { reason: { type: "string", id: 1 }, domain: { type: "string", id: 2 } } },
            BadRequest: {
              fields: { field_violations: { rule: "repeated", type: "FieldViolation", id: 1 } },
              nested: {
                FieldViolation: { fields: { field: { type: "string", id: 1 }, description: { type: "string", id: 2 } } },
              },
            },
          },
        },
      },
    },
  },
});

export class MakaError extends Error {
  /** The gRPC status name ("UNAVAILABLE", "PERMISSION_DENIED", ...). */
  readonly code: string;
  /** The stable ErrorReason ("CALL_NOT_FOUND", "ALREADY_SETTLED", ...), else the same as `code`. */
  readonly reason: string;
  /** The human-readable message (never form values). */
  readonly details: string;
  /** [field path, description] pairs from google.rpc.BadRequest. */
  readonly violations: [string, string][];

  constructor(code: string, message: string, reason?: string, violations: [string, string][] = []) {
    super(`${reason || code}: ${message}`);
    this.name = "MakaError";
    this.code = code;
    this.reason = reason || code;
    this.details = message;
    this.violations = violations;
  }

  static fromStatus(error: grpc.ServiceError): MakaError {
    const code = statusName(error.code);
    let reason = "";
    const violations: [string, string][] = [];
    const raw = error.metadata?.get("grpc-status-details-bin")?.[0];
    if (raw instanceof Buffer) {
      const status = rpcTypes.lookupType("google.rpc.Status").decode(raw) as unknown as {
        details: { type_url: string; value: Uint8Array }[];
      };
      for (const detail of status.details) {
        if (detail.type_url.endsWith("/google.rpc.ErrorInfo")) {
          const info = rpcTypes.lookupType("google.rpc.ErrorInfo").decode(detail.value) as unknown as { reason: string };
          reason = info.reason || reason;
        } else if (detail.type_url.endsWith("/google.rpc.BadRequest")) {
          const bad = rpcTypes.lookupType("google.rpc.BadRequest").decode(detail.value) as unknown as {
            field_violations: { field: string; description: string }[];
          };
          for (const v of bad.field_violations) violations.push([v.field, v.description]);
        }
      }
    }
    return new MakaError(code, error.details || code, reason, violations);
  }
}

export function statusName(code: number): string {
  return (Object.keys(grpc.status) as (keyof typeof grpc.status)[]).find((name) => grpc.status[name] === code) ?? "UNKNOWN";
}

/** Stream failures a reattach may fix (transport, proxy or server restarts). */
export const RETRYABLE = new Set<number>([
  grpc.status.UNAVAILABLE,
  grpc.status.INTERNAL,
  grpc.status.UNKNOWN,
  grpc.status.CANCELLED,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.RESOURCE_EXHAUSTED,
]);
