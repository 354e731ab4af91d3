// A caller of a team's pool of Hosts (tests/clients/test_pool.py runs it with Node against real Hosts while
// one of them drains): COUNT examples:ping calls through the pool target, one after another (once both
// connections are up, round_robin alternates between the Hosts), one JSON line.
//
//   node dist/test/pool.js --pool ipv4:127.0.0.1:P0,127.0.0.1:P1 --count 6
//
// Prints {"pool": true, "calls": [{"outcome": "result", "text": "pong", "hostId": ..., "refusedStarts": N}]};
// a call that raised is {"outcome": "error", "code": "UNAVAILABLE", "text": <its message>}.
// --give-up-after-ms N bounds the reattach policy (and so the wait for a ready Host).

import { parseArgs } from "node:util";

import { BrokerClient, MakaError, type Outcome } from "../src/index.js";

const { values } = parseArgs({
  options: { pool: { type: "string" }, count: { type: "string" }, "give-up-after-ms": { type: "string" } },
});
const giveUp = values["give-up-after-ms"];
const client = new BrokerClient(values.pool, giveUp ? { reattach: { giveUpAfterMs: Number(giveUp) } } : {});
try {
  const calls = Array.from({ length: Number(values.count ?? "4") }, (_, i) =>
    client.callTool("examples:ping", {}, { toolUseId: `ts-pool-${i}` }),
  );
  const outcomes: (Outcome | MakaError)[] = [];
  for (const call of calls) {
    try {
      outcomes.push(await call.result());
    } catch (error) {
      if (!(error instanceof MakaError)) throw error;
      outcomes.push(error);
    }
  }
  console.log(
    JSON.stringify({
      pool: client.pool,
      calls: calls.map((call, i) => {
        const outcome = outcomes[i]!;
        if (outcome instanceof MakaError) {
          return { outcome: "error", text: outcome.details, code: outcome.code, hostId: call.hostId, refusedStarts: 0 };
        }
        return {
          outcome: outcome.kind,
          text: outcome.kind === "result" ? outcome.text : "",
          code: outcome.kind === "failure" ? outcome.code : "",
          hostId: call.hostId,
          refusedStarts: call.refusedStarts,
        };
      }),
    }),
  );
} finally {
  client.close();
}
