// TypeScript SDK client (handshake era) for the interop tests: connects to --url,
// lists every tool (following nextCursor), runs each --call in order and prints ONE
// JSON line: {"protocolVersion","serverInfo","tools":[names],"calls":[{name,arguments,
// result|error,progress:[[progress,total,message]…]}]}. Exit 1 with the error on
// stderr on any failure (a call's JSON-RPC error too, unless --allow-errors).
//
//   node client.mjs --url http://127.0.0.1:P/mcp [--call NAME [--args JSON]]… [--allow-errors]
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { readFileSync } from "node:fs";

// The SDK lives in the pinned npm folder setup.sh builds, not beside this script
// (ESM ignores NODE_PATH), so it is loaded from there explicitly.
const peers =
  process.env.JUNCTION_NODE_PEERS ??
  path.join(path.dirname(fileURLToPath(import.meta.url)), "..", ".peers", "node");
const require = createRequire(path.join(peers, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

function parseArgs(argv) {
  const opts = { url: null, calls: [], allowErrors: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--url") opts.url = argv[++i];
    else if (a === "--call") opts.calls.push({ name: argv[++i], arguments: {} });
    else if (a === "--args") {
      const last = opts.calls[opts.calls.length - 1];
      if (!last) throw new Error("--args must follow --call");
      last.arguments = JSON.parse(argv[++i]);
    } else if (a === "--allow-errors") opts.allowErrors = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!opts.url) throw new Error("--url is required");
  return opts;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  // Read the file itself: the SDK's export map sends "…/package.json" to dist/cjs.
  const sdkVersion = JSON.parse(
    readFileSync(path.join(peers, "node_modules/@modelcontextprotocol/sdk/package.json"), "utf8"),
  ).version;
  const client = new Client({ name: "junction-interop-ts", version: sdkVersion });
  const transport = new StreamableHTTPClientTransport(new URL(opts.url));
  await client.connect(transport);
  const report = {
    sdk: sdkVersion,
    protocolVersion: transport.protocolVersion ?? null,
    serverInfo: client.getServerVersion() ?? null,
    tools: [],
    calls: [],
  };
  let cursor;
  for (let page = 0; page < 100; page++) {
    const res = await client.listTools(cursor ? { cursor } : {});
    report.tools.push(...res.tools.map((t) => t.name));
    cursor = res.nextCursor;
    if (!cursor) break;
  }
  for (const call of opts.calls) {
    const entry = { name: call.name, arguments: call.arguments, progress: [] };
    try {
      entry.result = await client.callTool({ name: call.name, arguments: call.arguments }, undefined, {
        onprogress: (p) => entry.progress.push([p.progress, p.total ?? null, p.message ?? null]),
      });
    } catch (err) {
      if (!opts.allowErrors) throw err;
      entry.error = { code: err?.code ?? null, message: String(err?.message ?? err) };
    }
    report.calls.push(entry);
  }
  await transport.terminateSession().catch(() => {});
  await client.close();
  process.stdout.write(JSON.stringify(report) + "\n");
}

main().catch((err) => {
  process.stderr.write(`client.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
