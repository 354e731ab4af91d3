// A caller of a team's pool of Hosts (tests/clients/test_pool.py runs it with Node against real Hosts while
// one of them drains): COUNT examples:ping calls through the pool target, one after another (once both
// connections are up, round_robin alternates between the Hosts), one JSON line.
//
//   node dist/test/pool.js --pool ipv4:127.0.0.1:P0,127.0.0.1:P1 --count 6
//
// Prints {"pool": true, "calls": [{"outcome": "result", "text": "pong", "hostId": ..., "refusedStarts": N}]}.

import { parseArgs } from "node:util";

import { BrokerClient, type Outcome } from "../src/index.js";

const { values } = parseArgs({ options: { pool: { type: "string" }, count: { type: "string" } } });
const client = new BrokerClient(values.pool);
try {
  const calls = Array.from({ length: Number(values.count ?? "4") }, (_, i) =>
    client.callTool("examples:ping", {}, { toolUseId: `ts-pool-${i}` }),
  );
  const outcomes: Outcome[] = [];
  for (const call of calls) outcomes.push(await call.result());
  console.log(
    JSON.stringify({
      pool: client.pool,
      calls: calls.map((call, i) => {
        const outcome = outcomes[i]!;
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
