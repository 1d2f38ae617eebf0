"""A real MCP client for Switchboard's tests: the official MCP Python SDK's streamable HTTP
client pointed at an agent's endpoint.

Usage: python agent_client.py PLAN_JSON
PLAN_JSON: {"url": ..., "headers": {...}, "calls": [{"name": ..., "arguments": {...}}, ...]}
Prints one JSON object: {"tools": [{name, description, input_schema}], "results": [...]}, each
result either {"is_error", "text", "meta"} or {"protocol_error": {"code", "message"}}.
"""

import json
import sys

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError


async def main(plan: dict) -> dict:
    out = {"tools": [], "results": []}
    http = create_mcp_http_client(headers=plan.get("headers") or {})
    async with http:
        async with streamable_http_client(plan["url"], http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                out["tools"] = [
                    {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                    for t in listed.tools
                ]
                for call in plan.get("calls", []):
                    try:
                        r = await session.call_tool(call["name"], call.get("arguments") or {})
                        out["results"].append({
                            "is_error": bool(r.is_error),
                            "text": "".join(c.text for c in r.content if getattr(c, "type", "") == "text"),
                            "meta": r.meta or {},
                        })
                    except MCPError as e:
                        out["results"].append({"protocol_error": {"code": e.error.code, "message": e.error.message}})
    return out


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, json.loads(sys.argv[1]))))
