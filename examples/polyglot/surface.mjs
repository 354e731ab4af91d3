#!/usr/bin/env node
// A minimal Node.js surface of the Maka Interaction service: the polyglot proof that the gRPC
// contracts in protos/ are enough to read and answer forms without any Python.
//
//   node examples/polyglot/surface.mjs [--target HOST:PORT] [--token T] list [--session S ...]
//   node examples/polyglot/surface.mjs [--target HOST:PORT] [--token T] answer ID accept '{"name": value}'
//   node examples/polyglot/surface.mjs [--target HOST:PORT] [--token T] answer ID decline|cancel
//
// It loads protos/ at run time with @grpc/proto-loader (no generated code). `list` prints
// {"pending": [...]} as JSON; `answer` reads the Interaction's form to type each value by its field
// kind (integer vs number, multi-select lists), commits it with a fresh submission id and prints
// {"interaction_id", "state", "action"}. Failures print "REASON: message" (the stable ErrorReason from
// google.rpc.ErrorInfo in the status details) plus one "  path: description" line per field
// violation on stderr. Exit codes: 0 ok, 2 usage, 3 the call failed.
//
// --target defaults to $MAKA_INTERACTION_TARGET or 127.0.0.1:50051; --token to $MAKA_SURFACE_TOKEN
// (sent as `authorization: Bearer <token>`).

import path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const PROTO_ROOT = path.resolve(here, "..", "..", "protos");
const USAGE =
  "usage: surface.mjs [--target HOST:PORT] [--token T] list [--session S ...]\n" +
  "       surface.mjs [--target HOST:PORT] [--token T] answer ID accept|decline|cancel ['{...values}'] [--session S]";
const DEADLINE_MS = 10_000;

function loadService() {
  const definition = protoLoader.loadSync("maka/interaction/v1/interaction_service.proto", {
    includeDirs: [PROTO_ROOT],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).maka.interaction.v1.InteractionService;
}

// google.rpc.Status / ErrorInfo / BadRequest, enough to read the rich error details.
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
            ErrorInfo: {
              fields: {
                reason: { type: "string", id: 1 },
                domain: { type: "string", id: 2 },
                metadata: { keyType: "string", type: "string", id: 3 },
              },
            },
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

class UsageError extends Error {}

function describeError(error) {
  const codeName = Object.keys(grpc.status).find((name) => grpc.status[name] === error.code) ?? "UNKNOWN";
  let reason = codeName;
  const violations = [];
  const raw = error.metadata?.get("grpc-status-details-bin")?.[0];
  if (raw) {
    const status = rpcTypes.lookupType("google.rpc.Status").decode(raw);
    for (const detail of status.details) {
      if (detail.type_url.endsWith("/google.rpc.ErrorInfo")) {
        reason = rpcTypes.lookupType("google.rpc.ErrorInfo").decode(detail.value).reason || reason;
      } else if (detail.type_url.endsWith("/google.rpc.BadRequest")) {
        for (const v of rpcTypes.lookupType("google.rpc.BadRequest").decode(detail.value).field_violations) {
          violations.push(`  ${v.field}: ${v.description}`);
        }
      }
    }
  }
  return [`${reason}: ${error.details || codeName}`, ...violations].join("\n");
}

function call(client, method, request, metadata) {
  return new Promise((resolve, reject) => {
    client[method](request, metadata, { deadline: Date.now() + DEADLINE_MS }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

function fieldKind(field) {
  if (field.kind === "string") {
    const format = field.string.format;
    return format && format !== "STRING_FORMAT_UNSPECIFIED" ? format.replace("STRING_FORMAT_", "").toLowerCase().replace("_", "-") : "string";
  }
  return field.kind;
}

function summarize(interaction) {
  const form = interaction.form;
  return {
    interaction_id: interaction.interaction_id,
    session_id: interaction.binding.session_id,
    tool_name: interaction.binding.tool_name,
    expires_at: interaction.expires_at ? new Date(Number(interaction.expires_at.seconds) * 1000).toISOString() : null,
    requester: form.requester,
    message: form.message,
    fields: form.fields.map((f) => ({ name: f.name, label: f.label, kind: fieldKind(f), required: f.required })),
  };
}

// One JSON value → maka.form.v1.Value, typed by the field's kind when the JSON type allows it.
function toValue(field, value, name) {
  if (typeof value === "boolean") return { boolean_value: value };
  if (typeof value === "number") {
    if (field?.kind === "integer" && Number.isInteger(value)) return { integer_value: String(value) };
    if (!field && Number.isInteger(value)) return { integer_value: String(value) };
    return { number_value: value };
  }
  if (typeof value === "string") return { string_value: value };
  if (Array.isArray(value) && value.every((item) => typeof item === "string")) return { string_list_value: { values: value } };
  throw new UsageError(`value of ${JSON.stringify(name)} must be a string, number, boolean or list of strings`);
}

async function list(client, metadata, sessions) {
  const response = await call(client, "ListPending", { session_ids: sessions }, metadata);
  return { pending: response.pending.map(summarize) };
}

async function answer(client, metadata, id, action, valuesText, session) {
  const actions = { accept: "ACTION_ACCEPT", decline: "ACTION_DECLINE", cancel: "ACTION_CANCEL" };
  if (!id || !actions[action]) throw new UsageError(USAGE);
  const values = {};
  if (action === "accept") {
    let given;
    try {
      given = JSON.parse(valuesText ?? "{}");
    } catch {
      throw new UsageError("values must be a JSON object");
    }
    if (given === null || typeof given !== "object" || Array.isArray(given)) throw new UsageError("values must be a JSON object");
    const current = await call(client, "GetInteraction", { interaction_id: id, session_id: session }, metadata);
    const fields = new Map(current.interaction.form.fields.map((f) => [f.name, f]));
    for (const [name, value] of Object.entries(given)) values[name] = toValue(fields.get(name), value, name);
  } else if (valuesText !== undefined) {
    throw new UsageError(`${action} takes no values`);
  }
  const request = {
    interaction_id: id,
    session_id: session,
    submission_id: randomUUID(),
    answer: { action: actions[action], values },
  };
  const response = await call(client, "Answer", request, metadata);
  const ix = response.interaction;
  return {
    interaction_id: ix.interaction_id,
    state: ix.state.replace("INTERACTION_STATE_", "").toLowerCase(),
    action: ix.answer ? ix.answer.action.replace("ACTION_", "").toLowerCase() : "",
  };
}

async function main(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        target: { type: "string", default: process.env.MAKA_INTERACTION_TARGET || "127.0.0.1:50051" },
        token: { type: "string", default: process.env.MAKA_SURFACE_TOKEN || "" },
        session: { type: "string", multiple: true, default: [] },
        help: { type: "boolean", default: false },
      },
    });
  } catch (error) {
    process.stderr.write(`${error.message}\n${USAGE}\n`);
    return 2;
  }
  const { values: options, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (options.help || !["list", "answer"].includes(command)) {
    process.stderr.write(`${USAGE}\n`);
    return options.help ? 0 : 2;
  }
  const Service = loadService();
  const client = new Service(options.target, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  if (options.token) metadata.set("authorization", `Bearer ${options.token}`);
  try {
    const result =
      command === "list"
        ? await list(client, metadata, options.session)
        : await answer(client, metadata, rest[0], rest[1], rest[2], options.session[0] ?? "");
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    if (error && typeof error.code === "number") {
      process.stderr.write(`${describeError(error)}\n`);
      return 3;
    }
    throw error;
  } finally {
    client.close();
  }
}

process.exitCode = await main(process.argv.slice(2));
