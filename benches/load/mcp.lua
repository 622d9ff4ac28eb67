-- One modern (2026-07-28) MCP request, repeated by wrk.
-- Usage: [MCP_AUTHORIZATION='Bearer …'] wrk ... -s mcp.lua URL -- METHOD [TOOL_NAME]
-- done() prints one machine-readable RESULT line for run.sh.
local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  .. '"io.modelcontextprotocol/clientCapabilities":{}}'

function init(args)
  local method, name = args[1] or "tools/list", args[2]
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = method
  local authorization = os.getenv("MCP_AUTHORIZATION")
  if authorization and authorization ~= "" then
    wrk.headers["Authorization"] = authorization
  end
  local params
  if method == "tools/call" then
    wrk.headers["Mcp-Name"] = name
    params = '{"name":"' .. name .. '","arguments":{"text":"hello"},' .. meta .. '}'
  else
    params = '{' .. meta .. '}'
  end
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"' .. method .. '","params":' .. params .. '}'
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d p50_us=%.0f p90_us=%.0f p99_us=%.0f max_us=%.0f errors=%d non2xx=%d\n",
    summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.connect + e.read + e.write + e.timeout, e.status))
end
