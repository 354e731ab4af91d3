// A scripted "agent loop" on the TypeScript client (no model needed): list the Tools, call each step of
// a plan through the broker, show progress and waiting forms, and handle every outcome and failure code
// the way an agent runtime would (docs/clients.md). Twin of examples/agent_loop.py.
//
//   node examples/polyglot/agent.ts [--broker HOST:PORT] [--plan JSON]     (Node >= 22.18 runs .ts)
//
// --broker defaults to $MAKA_BROKER_TARGET or 127.0.0.1:50052; --plan is a JSON list of
// [SERVER:TOOL, {arguments}]. Forms are answered by the user in any surface. The last line is a JSON
// summary {"outcomes": [...]}; exit 0 when the loop ran to its end, 3 when the broker is unreachable.

import { parseArgs } from "node:util";

import { BrokerClient, MakaError, type Outcome } from "@maka/client";

type Step = [string, Record<string, unknown>];

const DEFAULT_PLAN: Step[] = [
  ["examples:ping", {}],
  ["examples:deploy", { artifact: "build-42" }],
  ["examples:does_not_exist", {}],
];

const ADVICE: Record<string, string> = {
  UNKNOWN_TOOL: "pick another Tool from the list (the model would re-plan)",
  INVALID_REQUEST: "fix the arguments against the Tool's input schema",
  INTERACTION_TIMED_OUT: "the user did not answer in time: ask again later",
  INTERACTION_CLOSED: "the form was closed (Host restart, superseded): call again if still needed",
  EXECUTION_TIMEOUT: "the Tool took too long: report it, do not retry blindly",
  HOST_UNAVAILABLE: "the Interaction service is down: retry after a pause",
  RESOURCE_EXHAUSTED: "the provider is busy: retry after a pause",
  ROUNDS_EXHAUSTED: "the Tool kept asking: report it to the user",
  CONNECTION_LOST: "the MCP server went away mid-call: report it",
};

function describe(outcome: Outcome): Record<string, unknown> {
  switch (outcome.kind) {
    case "result":
      return { kind: "result", isError: outcome.isError, text: outcome.text };
    case "failure":
      return { kind: "failure", code: outcome.code, message: outcome.message };
    case "lost":
      return { kind: "lost", reason: outcome.reason };
    case "stopped":
      return { kind: "stopped" };
  }
}

async function runStep(broker: BrokerClient, [tool, args]: Step, known: string[]): Promise<Record<string, unknown>> {
  console.log(`-> ${tool} ${JSON.stringify(args)}`);
  const call = broker.callTool(tool, args);
  for await (const event of call) {
    switch (event.kind) {
      case "accepted":
        console.log(`   accepted (invocation ${event.invocationId})`);
        break;
      case "progress":
        console.log(`   progress ${event.progress}${event.total === null ? "" : `/${event.total}`} ${event.message}`.trimEnd());
        break;
      case "awaiting_interaction":
        console.log(
          `   waiting for the user: form ${event.interactionId} ${JSON.stringify(event.message)} (until ${event.expiresAt?.toISOString() ?? "no expiry"})`,
        );
        break;
      case "status":
        console.log(`   still ${event.phase}`);
        break;
      case "interaction_settled":
        console.log(`   form settled: ${event.action ?? event.closeReason}`);
        break;
      case "reattaching":
        console.log(`   connection dropped (${event.code}); reattaching`);
        break;
      default:
        break;
    }
  }
  const outcome = call.outcome!;
  if (outcome.kind === "result") console.log(`   ${outcome.isError ? "tool error" : "result"}: ${outcome.text}`);
  else if (outcome.kind === "failure") {
    console.log(`   ${outcome.code}: ${outcome.message} -> ${ADVICE[outcome.code] ?? "report the failure"}`);
    if (outcome.code === "UNKNOWN_TOOL") console.log(`   known Tools: ${known.join(", ")}`);
  } else if (outcome.kind === "lost") console.log(`   lost: ${outcome.reason} -> the outcome is unknown; do not replay it blindly`);
  else console.log("   stopped by the user -> end the turn");
  return { tool, ...describe(outcome) };
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { broker: { type: "string" }, plan: { type: "string" } } });
  const plan: Step[] = values.plan ? (JSON.parse(values.plan) as Step[]) : DEFAULT_PLAN;
  const broker = BrokerClient.fromEnv(values.broker);
  const outcomes: Record<string, unknown>[] = [];
  try {
    const known = (await broker.listTools()).map((tool) => tool.name);
    console.log(`tools: ${known.join(", ") || "(none)"}`);
    for (const step of plan) outcomes.push(await runStep(broker, step, known));
  } catch (error) {
    if (!(error instanceof MakaError)) throw error;
    console.log(`${error.code}: ${error.details} (is the broker reachable?)`);
    return 3;
  } finally {
    broker.close();
  }
  console.log(JSON.stringify({ outcomes }));
  return 0;
}

process.exitCode = await main();
