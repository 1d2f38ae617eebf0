"""A real MCP server for Switchboard's tests: the official MCP Python SDK's MCPServer over
streamable HTTP on 127.0.0.1.

Usage: python calc_server.py PORT (streamable HTTP), python calc_server.py PORT legacy (as a
server of the 2025-11-25 revision would answer: a request without a session is refused with a
plain 400), or python calc_server.py stdio
Tools: add (read-only), slow (sleeps; counts cancellations), fail (an error result), stats,
grow (adds `multiply` and announces the change), whoami (the X-Api-Key header it got and the
protocol revision of the request), regional (a parameter the client must mirror into the
`Mcp-Param-Region` header).
"""

import sys
from typing import Annotated

import anyio
from pydantic import Field
from mcp.server import MCPServer
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations

# Its tool list may be kept for a minute: a client sees `grow`'s new tool only because it
# listens for `notifications/tools/list_changed`.
server = MCPServer("calc", cache_hints={"tools/list": CacheHint(ttl_ms=60_000, scope="private")})
seen = {"cancelled": 0, "finished": 0}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> dict:
    """Adds two integers."""
    return {"sum": a + b}


@server.tool()
async def slow(seconds: float) -> str:
    """Waits, then answers."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        seen["cancelled"] += 1
        raise
    seen["finished"] += 1
    return "done"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the calculator is out of paper")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def stats() -> dict:
    """How many slow calls finished or were cancelled."""
    return dict(seen)


def multiply(a: int, b: int) -> dict:
    """Multiplies two integers."""
    return {"product": a * b}


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the `multiply` tool and tells clients the tool list changed."""
    server.add_tool(multiply, annotations=ToolAnnotations(read_only_hint=True))
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "grown"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def regional(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], ctx: Context) -> dict:
    """Echoes the region, and the Mcp-Param-Region header the client mirrored it into."""
    headers = ctx.headers or {}
    return {"region": region, "header": headers.get("mcp-param-region")}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context) -> dict:
    """The X-Api-Key header this request carried, and the protocol revision it spoke."""
    headers = ctx.headers or {}
    return {"api_key": headers.get("x-api-key"), "protocol": headers.get("mcp-protocol-version")}


def legacy_only(app):
    """Answers every request of a session-less revision as an older server does: a plain 400,
    no JSON-RPC error a modern client would recognise."""

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
            if version and version >= "2026-07-28":
                await send({"type": "http.response.start", "status": 400,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"Bad Request: No valid session ID provided"})
                return
        await app(scope, receive, send)

    return guarded


async def serve_legacy(port: int) -> None:
    import uvicorn

    app = legacy_only(server.streamable_http_app(host="127.0.0.1"))
    await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).serve()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run(transport="stdio")
    elif len(sys.argv) > 2 and sys.argv[2] == "legacy":
        anyio.run(serve_legacy, int(sys.argv[1]))
    else:
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
