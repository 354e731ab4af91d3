// Drives the MCP front door with the official TypeScript SDK client (@modelcontextprotocol/sdk, installed into
// .tools/mcp-clients by scripts/setup_node_tools.sh; NODE_PATH points there). One JSON object per stdout line:
//   node ts_client.cjs URL list                -> {"protocolVersion": ..., "tools": [names]}
//   node ts_client.cjs URL call NAME ARGS_JSON -> {"progress": message} per progress notification, then
//                                                 {"protocolVersion": ..., "isError": bool, "text": ...}
// Extra request headers come from MAKA_TS_HEADERS (a JSON object), e.g. an Authorization bearer token.
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

function emit(value) {
  process.stdout.write(JSON.stringify(value) + "\n");
}

async function main() {
  const [url, command, name, args] = process.argv.slice(2);
  const headers = JSON.parse(process.env.MAKA_TS_HEADERS || "{}");
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "maka-ts-test", version: "1.0.0" });
  await client.connect(transport);
  const protocolVersion = transport.protocolVersion;
  try {
    if (command === "list") {
      const listed = await client.listTools();
      emit({ protocolVersion, tools: listed.tools.map((tool) => tool.name) });
    } else if (command === "call") {
      const result = await client.callTool({ name, arguments: JSON.parse(args || "{}") }, undefined, {
        onprogress: (progress) => emit({ progress: progress.message || "" }),
        timeout: 120000,
        resetTimeoutOnProgress: true,
      });
      const text = result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n");
      emit({ protocolVersion, isError: Boolean(result.isError), text });
    } else {
      throw new Error(`unknown command ${command}`);
    }
  } finally {
    await client.close();
  }
}

main().catch((error) => {
  process.stderr.write(`ts_client: ${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
});
