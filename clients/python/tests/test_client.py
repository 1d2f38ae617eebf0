"""The client against a real server: calls, invocations, cancellation, actions, handoff, errors."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from conftest import Server, new_id

from switchboard import (
    Conflict,
    Hangup,
    NotFound,
    ServerError,
    Switchboard,
    SwitchboardError,
    Transfer,
    TransportError,
    Unauthorized,
)


async def test_toolset_and_a_call_end_to_end(sb: Switchboard) -> None:
    names = [f.name for f in await sb.functions("assistant")]
    assert "save_meal" in names and "pay_bill" not in names
    chat = await sb.toolset("assistant", format="openai-chat")
    assert chat["tools"][0]["type"] == "function" and "function" in chat["tools"][0]

    call = await sb.start_call(agent="assistant", call_id=new_id("c"), user={"id": "u_42"}, from_number="+14155550100")
    assert call.agent == "assistant" and "save_meal" in [f.name for f in call.functions]
    r = await call.invoke("fc_1", "save_meal", '{"meal_type": "lunch", "dishes": ["soup"]}', response_id="resp_1")
    assert r.ok and json.loads(r.output)["message"] == "I've logged your lunch!"
    again = await call.invoke("fc_1", "save_meal", '{"meal_type": "lunch", "dishes": ["soup"]}')
    assert again.replayed and again.output == r.output

    bad = await call.invoke("fc_2", "save_meal", '{"meal_type": "brunch"}')
    assert not bad.ok and bad.error == "invalid_arguments" and json.loads(bad.output)["ok"] is False

    record = await call.record()
    assert record.status == "active"
    assert record.context["workflow"]["logged_meals"] == [{"meal_type": "lunch", "dishes": ["soup"]}]
    assert record.context["call"]["from"] == "+14155550100"
    ended = await call.end()
    assert ended.status == "ended" and ended.invocations_total == 2
    with pytest.raises(Conflict) as e:
        await call.invoke("fc_3", "save_meal", {"meal_type": "lunch", "dishes": ["x"]})
    assert e.value.status == 409 and "ended" in e.value.message


async def test_two_calls_in_parallel(sb: Switchboard) -> None:
    call = await sb.start_call(call_id=new_id("par"))
    t0 = time.monotonic()
    a, b = await asyncio.gather(
        call.invoke("fc_a", "lookup_order", {"order_id": "A1"}, response_id="r1"),
        call.invoke("fc_b", "place_order", {"item": "pizza"}, response_id="r1"),
    )
    # Each takes 1.5 s upstream: run concurrently, both end well before 3 s.
    assert time.monotonic() - t0 < 2.8
    assert a.ok and a.result["data"]["order"]["status"] == "done"
    assert b.ok and b.result["message"] == "Ordered pizza."
    await call.end()


async def test_interruption_cancels_reads_and_delivers_writes(sb: Switchboard, server: Server) -> None:
    call = await sb.start_call(call_id=new_id("int"))
    read = asyncio.create_task(call.invoke("fc_r", "lookup_order", {"order_id": "Z9"}, response_id="resp_x"))
    write = asyncio.create_task(call.invoke("fc_w", "place_order", {"item": "tea"}, response_id="resp_x"))
    await asyncio.sleep(0.4)
    await call.cancel_response("resp_x")
    r, w = await asyncio.gather(read, write)
    assert not r.ok and r.error == "cancelled"
    assert w.ok and w.result["message"] == "Ordered tea."
    assert any("order=tea" in h for h in server.upstream.hits)
    assert (await call.record()).context["workflow"]["orders"] == ["tea"]
    await call.end()


async def test_transfer_hangup_and_handoff(sb: Switchboard) -> None:
    call = await sb.start_call(call_id=new_id("act"))
    t = await call.invoke("fc_t", "transfer_to_sales", "{}")
    assert t.ok and t.transfer == Transfer(target_uri="sip:sales@example.com")
    h = await call.invoke("fc_h", "hang_up", "")
    assert h.hangup == Hangup(message="Goodbye!")

    call2 = await sb.start_call(call_id=new_id("hand"))
    r = await call2.invoke("fc_1", "to_billing", "{}")
    assert r.ok and r.handoff is not None and r.handoff.agent == "billing"
    assert call2.agent == "billing" and [f.name for f in call2.functions] == ["pay_bill"]
    assert [f.name for f in await call2.functions_now()] == ["pay_bill"]
    anthropic = await call2.toolset_as("anthropic")
    assert [t["name"] for t in anthropic["tools"]] == ["pay_bill"] and "input_schema" in anthropic["tools"][0]
    assert "billing" in await call2.instructions()
    await call.end()
    await call2.end()


async def test_errors_carry_the_envelope(sb: Switchboard, server: Server) -> None:
    with pytest.raises(NotFound) as e:
        await sb.start_call(agent="nobody")
    assert e.value.code == "not_found" and "nobody" in e.value.message
    with pytest.raises(NotFound):
        await sb.call("no-such-call").record()
    async with Switchboard(server.base, "sb_pytest_wrong") as bad:
        with pytest.raises(Unauthorized):
            await bad.functions("assistant")
    assert server.key not in repr(sb)


async def test_retries_idempotent_requests_only() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        if len(seen) < 3:
            return httpx.Response(503, json={"error": {"code": "unavailable", "message": "busy"}})
        return httpx.Response(200, json={"tools": [], "tool_choice": "auto"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    sb = Switchboard("http://sb.test", "k", http=http, backoff=0.001)
    assert await sb.toolset("a") == {"tools": [], "tool_choice": "auto"}
    assert seen == ["GET", "GET", "GET"]

    seen.clear()
    with pytest.raises(ServerError) as e:
        await sb.start_call()
    assert seen == ["POST"] and e.value.code == "unavailable"

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    html = Switchboard("http://sb.test", "k", http=httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, text="<html>login</html>"))))
    with pytest.raises(SwitchboardError, match="not JSON"):
        await html.toolset("a")

    down = Switchboard("http://sb.test", "k", http=httpx.AsyncClient(transport=httpx.MockTransport(refuse)), backoff=0.001)
    with pytest.raises(TransportError) as t:
        await down.call("c").record()
    assert "3 attempt(s)" in str(t.value)
    assert down.call("c 1").mcp_url == "http://sb.test/v1/calls/c%201/mcp"
    await http.aclose()


async def test_async_with_ends_the_call_when_its_block_raises(sb: Switchboard) -> None:
    call_id = new_id("with")
    with pytest.raises(RuntimeError, match="the agent crashed"):
        async with await sb.start_call(call_id=call_id) as call:
            r = await call.invoke("fc_1", "save_meal", {"meal_type": "lunch", "dishes": ["soup"]})
            assert r.ok
            raise RuntimeError("the agent crashed")
    # A fresh handle: what the server says, not what the old one remembers.
    record = await sb.call(call_id).record()
    assert record.status == "ended" and record.invocations_total == 1
    with pytest.raises(Conflict):
        await sb.call(call_id).invoke("fc_2", "meals_so_far")


async def test_async_with_ends_the_call_when_its_task_is_cancelled(sb: Switchboard) -> None:
    call_id = new_id("with")
    started = asyncio.Event()

    async def agent() -> None:
        async with await sb.start_call(call_id=call_id) as call:
            started.set()
            await call.invoke("fc_1", "lookup_order", {"order_id": "C1"})  # 1.5 s upstream

    task = asyncio.create_task(agent())
    done, _ = await asyncio.wait({task}, timeout=0.5)
    if done:
        task.result()  # the block ended early: its error is the failure
    assert started.is_set()  # the invocation is on its way (1.5 s upstream)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await sb.call(call_id).record()).status == "ended"
