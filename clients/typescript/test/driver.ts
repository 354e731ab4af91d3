// The shared client fixture's TypeScript driver (tests/clients/test_same_fixture.py runs it with Node
// against the real stack, and tests/clients/driver.py is its Python twin): one scenario, one JSON line.
//
//   node dist/test/driver.js SCENARIO --broker HOST:PORT --interaction HOST:PORT --tag TAG
//
// SCENARIO: accept | decline | cancel | stop | unknown | reattach. `reattach` prints
// {"awaiting": ID, "session": S} when the form is pending and leaves it to the test (which cuts the
// proxy and answers it) while the client reattaches. Then prints
// {"kinds": [...logged event kinds], "outcome": {...}, "sequences": [...], "tools": [...]}.

import { parseArgs } from "node:util";

import { BrokerClient, type CallEvent, SurfaceClient, type ToolCall } from "../src/index.js";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { broker: { type: "string" }, interaction: { type: "string" }, tag: { type: "string" } },
});
const scenario = positionals[0] ?? "";
const tag = values.tag ?? "tag";
const broker = new BrokerClient(values.broker);
const surface = new SurfaceClient(values.interaction);

async function drive(call: ToolCall): Promise<CallEvent[]> {
  const events: CallEvent[] = [];
  for await (const event of call) {
    events.push(event);
    if (event.kind !== "awaiting_interaction") continue;
    const pending = await surface.pending([call.sessionId]);
    const form = pending.find((f) => f.interactionId === event.interactionId);
    if (!form || form.invocationId !== call.invocationId) throw new Error("the pending form is not this call's");
    if (scenario === "reattach") {
      console.log(JSON.stringify({ awaiting: event.interactionId }));
      continue;
    }
    if (scenario === "stop") await call.stop();
    else if (scenario === "accept") await surface.answer(event.interactionId, "accept", { value: `v-${tag}` });
    else await surface.answer(event.interactionId, scenario as "decline" | "cancel");
  }
  return events;
}

try {
  const tools = (await broker.listTools()).map((t) => t.name);
  const tool = scenario === "unknown" ? "counter:nope" : "counter:ask";
  const call = broker.callTool(tool, { tag }, { sessionId: `fixture-${tag}` });
  const events = await drive(call);
  const logged = events.filter((e) => e.kind !== "status" && e.kind !== "reattaching");
  const outcome = call.outcome;
  const summary: Record<string, unknown> = { kind: outcome?.kind };
  if (outcome?.kind === "result") Object.assign(summary, { isError: outcome.isError, payload: JSON.parse(outcome.text) });
  if (outcome?.kind === "failure") Object.assign(summary, { code: outcome.code });
  console.log(
    JSON.stringify({
      kinds: logged.map((e) => e.kind),
      sequences: logged.map((e) => ("sequence" in e ? e.sequence : 0)),
      reattaches: call.reattaches,
      outcome: summary,
      tools,
    }),
  );
} finally {
  broker.close();
  surface.close();
}
