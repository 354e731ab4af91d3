// Every Host of a team's pool through the TypeScript client (tests/clients/test_pool_hosts_stop.py runs it with
// Node against real Hosts while one of them drains): `hosts` asks each Host's GetStatus, `stop` asks each Host to
// stop one call (or a session), one JSON line.
//
//   node dist/test/hosts.js hosts --target ipv4:127.0.0.1:P0,127.0.0.1:P1
//   node dist/test/hosts.js stop --target ipv4:127.0.0.1:P0,127.0.0.1:P1 --invocation ID   (or --session S)
//
// Prints {"pool": true, "hosts": [HostStatus...]} or {"pool": true, "stopped": N}; a MakaError is
// {"error": {"code": "UNAVAILABLE", "reason": ..., "text": <its message>}}.

import { parseArgs } from "node:util";

import { BrokerClient, MakaError } from "../src/index.js";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { target: { type: "string" }, invocation: { type: "string" }, session: { type: "string" } },
});
const client = new BrokerClient(values.target);
try {
  if (positionals[0] === "hosts") {
    console.log(JSON.stringify({ pool: client.pool, hosts: await client.hosts() }));
  } else if (positionals[0] === "stop") {
    const stopped = values.invocation
      ? await client.stop({ invocationId: values.invocation })
      : await client.stop({ sessionId: values.session ?? "default" });
    console.log(JSON.stringify({ pool: client.pool, stopped }));
  } else {
    throw new Error(`unknown command ${JSON.stringify(positionals[0])}`);
  }
} catch (error) {
  if (!(error instanceof MakaError)) throw error;
  console.log(JSON.stringify({ error: { code: error.code, reason: error.reason, text: error.details } }));
} finally {
  client.close();
}
