"""A call's MCP endpoint (`call.mcp_url`, `call.mcp_params()`) reached by the official MCP
Python SDK's `Client` over streamable HTTP, in both protocol revisions, against the real server:
its tools are the active agent's and every tool call there is an invocation of that call."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from conftest import new_id
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from switchboard import Switchboard


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 (the SDK's default), 2025-11-25
async def test_tools_called_over_mcp_run_in_the_call_and_share_its_context(sb: Switchboard, mode: str) -> None:
    call = await sb.start_call(agent="assistant", call_id=new_id("mcp"))
    params = call.mcp_params()
    assert params["url"] == call.mcp_url and params["url"].endswith(f"/v1/calls/{call.id}/mcp")
    http = create_mcp_http_client(headers=params["headers"])
    async with http, Client(streamable_http_client(params["url"], http_client=http), mode=mode) as client:
        listed = await client.list_tools()
        written = await client.call_tool("save_meal", {"meal_type": "lunch", "dishes": ["soup"]})
        read = await client.call_tool("meals_so_far", {})
    # The active agent's toolset, as the client has it.
    assert sorted(t.name for t in listed.tools) == sorted(f.name for f in call.functions)
    assert not written.is_error and json.loads(_text(written))["message"] == "I've logged your lunch!"
    # The read sees the write: one context.
    assert not read.is_error
    assert json.loads(_text(read))["data"]["meals"] == [{"meal_type": "lunch", "dishes": ["soup"]}]
    assert (read.meta or {})["switchboard/call_id"] == call.id
    record = await call.record()
    assert [i["tool"] for i in record.invocations] == ["save_meal", "meals_so_far"]
    assert record.context["workflow"]["logged_meals"] == [{"meal_type": "lunch", "dishes": ["soup"]}]
    assert record.status != "ended"  # the endpoint never ends the call
    await call.end()


async def test_the_call_endpoint_refuses_a_wrong_key_and_an_unknown_call(sb: Switchboard) -> None:
    call = await sb.start_call(agent="assistant", call_id=new_id("mcp"))
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "pytest", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as http:
        wrong = await http.post(call.mcp_url, json=body,
                                headers={**headers, "Authorization": "Bearer sb_pytest_not-a-key"})
        unknown = sb.call(new_id("nope")).mcp_params()
        missing = await http.post(unknown["url"], json=body, headers={**headers, **unknown["headers"]})
    assert wrong.status_code == 401
    assert missing.status_code == 404
    assert "sb_pytest_not-a-key" not in wrong.text
    await call.end()


async def test_the_agents_sdk_reaches_the_call_through_mcp_params(sb: Switchboard) -> None:
    from agents import Agent, Runner, set_tracing_disabled
    from agents.mcp import MCPServerStreamableHttp
    from agents.testing import ScriptedModel, assistant_message, function_call

    set_tracing_disabled(True)
    call = await sb.start_call(agent="assistant", call_id=new_id("mcp"))
    model = ScriptedModel([
        [function_call("save_meal", {"meal_type": "dinner", "dishes": ["rice"]}, call_id="mcp_1")],
        [assistant_message("Logged.")],
    ])
    async with MCPServerStreamableHttp(params=call.mcp_params()) as server:
        agent = Agent(name="assistant", instructions=await call.instructions(), mcp_servers=[server], model=model)
        result = await Runner.run(agent, "I had rice for dinner")
    assert result.final_output == "Logged."
    assert "save_meal" in [t.name for t in model.calls[0].tools]
    record = await call.record()
    assert [i["tool"] for i in record.invocations] == ["save_meal"]
    assert record.context["workflow"]["logged_meals"] == [{"meal_type": "dinner", "dishes": ["rice"]}]
    await call.end()


async def test_pipecats_mcp_client_reaches_the_call_through_mcp_params(sb: Switchboard) -> None:
    from mcp.client.session_group import StreamableHttpParameters
    from pipecat.frames.frames import LLMRunFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.services.mcp_service import MCPClient
    from pipecat.tests.utils import SleepFrame, run_test
    from test_pipecat import ScriptedLLM

    call = await sb.start_call(agent="assistant", call_id=new_id("mcp"))
    llm = ScriptedLLM([[("save_meal", {"meal_type": "breakfast", "dishes": ["eggs"]})], "Logged."])
    async with MCPClient(server_params=StreamableHttpParameters(**call.mcp_params())) as mcp_client:
        context = LLMContext(messages=[{"role": "user", "content": "eggs for breakfast"}],
                             tools=await mcp_client.register_tools(llm))
        pair = LLMContextAggregatorPair(context)
        await run_test(Pipeline([pair.user(), llm, pair.assistant()]), frames_to_send=[LLMRunFrame(), SleepFrame(1.0)])
    assert "save_meal" in llm.seen[0].tools
    assert "I've logged your breakfast!" in llm.tool_outputs()["save_meal"]
    record = await call.record()
    assert [i["tool"] for i in record.invocations] == ["save_meal"]
    assert record.context["workflow"]["logged_meals"] == [{"meal_type": "breakfast", "dishes": ["eggs"]}]
    await call.end()
