#!/usr/bin/env node
// A minimal Node.js surface of the Maka Interaction service: the polyglot proof that the gRPC
// contracts in protos/ (through the TypeScript client) are enough to read and answer forms without any Python.
//
//   node examples/polyglot/surface.mjs [--target HOST:PORT] [--token T] [--host-id ID] list [--session S ...]
//   node examples/polyglot/surface.mjs [--target HOST:PORT] [--token T] [--host-id ID] answer ID accept '{"name": value}' [--submission-id X]
//   node examples/polyglot/surface.mjs [--target HOST:PORT] [--token T] [--host-id ID] answer ID decline|cancel
//
// It uses the TypeScript client (@maka/client, clients/typescript: SurfaceClient). `list` prints
// {"pending": [...]} as JSON; `answer` reads the Interaction's form to type each value by its field
// kind (integer vs number, multi-select lists), commits it with a fresh submission id (or
// --submission-id X, so that a repeat after a lost reply returns the first outcome) and prints
// {"interaction_id", "state", "action"}. Failures print "REASON: message" (the stable ErrorReason
// from google.rpc.ErrorInfo in the status details) plus one "  path: description" line per field
// violation on stderr. Exit codes: 0 ok, 2 usage, 3 the call failed.
//
// --target defaults to $MAKA_INTERACTION_TARGET or 127.0.0.1:50051; --token to $MAKA_SURFACE_TOKEN
// (sent as `authorization: Bearer <token>`); --host-id (the Runtime Host, when the Interaction tier serves
// several) to $MAKA_HOST_ID, else the tier's only Host or the one the token names.

import { parseArgs } from "node:util";

import { MakaError, SurfaceClient } from "@maka/client";

const USAGE =
  "usage: surface.mjs [--target HOST:PORT] [--token T] [--host-id ID] list [--session S ...]\n" +
  "       surface.mjs [--target HOST:PORT] [--token T] [--host-id ID] answer ID accept|decline|cancel ['{...values}'] [--session S] [--submission-id X]";

class UsageError extends Error {}

function describeError(error) {
  return [`${error.reason}: ${error.details}`, ...error.violations.map(([field, text]) => `  ${field}: ${text}`)].join("\n");
}

function summarize(form) {
  return {
    interaction_id: form.interactionId,
    session_id: form.sessionId,
    tool_name: form.toolName,
    expires_at: form.expiresAt ? form.expiresAt.toISOString() : null,
    requester: {
      provider_id: form.requester.providerId,
      provider_display_name: form.requester.providerDisplayName,
      claimed_server: form.requester.claimedServer,
      claimed_tool: form.requester.claimedTool,
    },
    message: form.message,
    fields: form.fields.map((f) => ({ name: f.name, label: f.label, kind: f.format || f.kind, required: f.required })),
  };
}

function checkValues(given) {
  for (const [name, value] of Object.entries(given)) {
    const ok =
      ["boolean", "number", "string"].includes(typeof value) ||
      (Array.isArray(value) && value.every((item) => typeof item === "string"));
    if (!ok) throw new UsageError(`value of ${JSON.stringify(name)} must be a string, number, boolean or list of strings`);
  }
  return given;
}

async function answer(client, id, action, valuesText, session, submissionId) {
  if (!id || !["accept", "decline", "cancel"].includes(action)) throw new UsageError(USAGE);
  let values = {};
  if (action === "accept") {
    let given;
    try {
      given = JSON.parse(valuesText ?? "{}");
    } catch {
      throw new UsageError("values must be a JSON object");
    }
    if (given === null || typeof given !== "object" || Array.isArray(given)) throw new UsageError("values must be a JSON object");
    values = checkValues(given);
  } else if (valuesText !== undefined) {
    throw new UsageError(`${action} takes no values`);
  }
  const form = await client.answer(id, action, values, { sessionId: session, submissionId: submissionId || undefined });
  return { interaction_id: form.interactionId, state: form.state, action: form.action ?? "" };
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
        "host-id": { type: "string", default: process.env.MAKA_HOST_ID || "" },
        session: { type: "string", multiple: true, default: [] },
        "submission-id": { type: "string", default: "" },
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
  const client = new SurfaceClient(options.target, { token: options.token || undefined, hostId: options["host-id"] });
  try {
    const result =
      command === "list"
        ? { pending: (await client.pending(options.session)).map(summarize) }
        : await answer(client, rest[0], rest[1], rest[2], options.session[0] ?? "", options["submission-id"]);
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    if (error instanceof MakaError) {
      process.stderr.write(`${describeError(error)}\n`);
      return 3;
    }
    throw error;
  } finally {
    client.close();
  }
}

process.exitCode = await main(process.argv.slice(2));
