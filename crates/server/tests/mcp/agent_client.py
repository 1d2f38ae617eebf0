"""A real MCP client for Switchboard's tests: the official MCP Python SDK's `Client` over
streamable HTTP, pointed at an agent's or a call's endpoint.

Usage: python agent_client.py PLAN_JSON
PLAN_JSON: {"url": ..., "headers": {...}, "mode": "auto" | "legacy" (default "auto", the SDK's
own default), "calls": [{"name": ..., "arguments": {...}}, ...], "list_after": bool}
Prints one JSON object: {"protocol_version": ..., "tools": [{name, description, input_schema}],
"results": [...], "tools_after": [names] (with list_after)}, each result either
{"is_error", "text", "meta"} or {"protocol_error": {"code", "message"}}.
"""

import json
import sys

import anyio
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError


async def main(plan: dict) -> dict:
    out: dict = {"tools": [], "results": []}
    http = create_mcp_http_client(headers=plan.get("headers") or {})
    async with http:
        transport = streamable_http_client(plan["url"], http_client=http)
        async with Client(transport, mode=plan.get("mode", "auto")) as client:
            out["protocol_version"] = client.protocol_version
            listed = await client.list_tools()
            out["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in listed.tools
            ]
            for call in plan.get("calls", []):
                try:
                    r = await client.call_tool(call["name"], call.get("arguments") or {})
                    out["results"].append({
                        "is_error": bool(r.is_error),
                        "text": "".join(c.text for c in r.content if getattr(c, "type", "") == "text"),
                        "meta": r.meta or {},
                    })
                except MCPError as e:
                    out["results"].append({"protocol_error": {"code": e.error.code, "message": e.error.message}})
            if plan.get("list_after"):
                after = await client.list_tools()
                out["tools_after"] = sorted(t.name for t in after.tools)
    return out


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, json.loads(sys.argv[1]))))
