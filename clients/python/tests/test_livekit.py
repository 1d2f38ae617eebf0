"""The LiveKit Agents adapter, driven by LiveKit's own `AgentSession.run` with a scripted LLM,
against the real server; LiveKit's server API (SIP transfer, room deletion) is a loopback stand-in
that speaks its Twirp protocol."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from conftest import new_id
from livekit import api, rtc
from livekit.agents import APIConnectOptions, Agent, AgentSession, llm
from livekit.agents.testing import fake_job_context
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
from livekit.agents.utils import http_context

from switchboard import Switchboard
from switchboard.livekit import SwitchboardTools

Step = list[tuple[str, dict[str, Any]]] | str


@dataclass
class Seen:
    """What the model was given on one turn."""

    items: list[llm.ChatItem]
    tools: list[str]
    instructions: str


class ScriptedLLM(llm.LLM):
    """A model that answers each turn from a script: tool calls (name, arguments) or text."""

    def __init__(self, script: list[Step]) -> None:
        super().__init__()
        self.script = list(script)
        self.seen: list[Seen] = []

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        **_: Any,
    ) -> llm.LLMStream:
        items = list(chat_ctx.items)
        system = [i for i in items if i.type == "message" and i.role in ("system", "developer")]
        self.seen.append(
            Seen(items, sorted(t.id for t in tools or []), system[0].text_content or "" if system else "")
        )
        step = self.script.pop(0) if self.script else "Done."
        return _Stream(self, step, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)

    def outputs(self) -> dict[str, str]:
        """Every function call output the model has seen, by function name."""
        return {
            i.name: i.output for s in self.seen for i in s.items if i.type == "function_call_output"
        }


class _Stream(llm.LLMStream):
    def __init__(self, model: ScriptedLLM, step: Step, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.step = step

    async def _run(self) -> None:
        rid = new_id("chunk")
        if isinstance(self.step, str):
            delta = llm.ChoiceDelta(role="assistant", content=self.step)
        else:
            delta = llm.ChoiceDelta(
                role="assistant",
                tool_calls=[
                    llm.FunctionToolCall(name=n, arguments=json.dumps(a), call_id=new_id(f"lk_{n}"))
                    for n, a in self.step
                ],
            )
        self._event_ch.send_nowait(llm.ChatChunk(id=rid, delta=delta))


@dataclass
class FakeLiveKit:
    """LiveKit's server API on loopback: records the Twirp requests it gets."""

    url: str = ""
    transfers: list[api.TransferSIPParticipantRequest] = field(default_factory=list)
    deleted_rooms: list[str] = field(default_factory=list)


@pytest.fixture
async def livekit_api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLiveKit]:
    fake = FakeLiveKit()

    async def transfer(request: web.Request) -> web.Response:
        fake.transfers.append(api.TransferSIPParticipantRequest.FromString(await request.read()))
        return web.Response(body=api.TransferSIPParticipantResponse().SerializeToString(),
                            content_type="application/protobuf")

    async def delete_room(request: web.Request) -> web.Response:
        fake.deleted_rooms.append(api.DeleteRoomRequest.FromString(await request.read()).room)
        return web.Response(body=b"", content_type="application/protobuf")

    app = web.Application()
    app.router.add_post("/twirp/livekit.SIP/TransferSIPParticipant", transfer)
    app.router.add_post("/twirp/livekit.RoomService/DeleteRoom", delete_room)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    fake.url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("LIVEKIT_URL", fake.url)
    monkeypatch.setenv("LIVEKIT_API_KEY", "devkey")
    monkeypatch.setenv("LIVEKIT_API_SECRET", "devsecret-devsecret-devsecret-devsecret")
    yield fake
    await runner.cleanup()


@pytest.fixture
def room() -> Iterator[rtc.Room]:
    yield rtc.Room()


async def _session(sb: Switchboard, script: list[Step], call_id: str, **tools_kw: Any):  # type: ignore[no-untyped-def]
    call = await sb.start_call(agent="assistant", call_id=call_id)
    model = ScriptedLLM(script)
    tools = SwitchboardTools(call, **tools_kw)
    session = AgentSession(llm=model)
    await session.start(Agent(instructions=await call.instructions(), tools=tools.tools()))
    return call, model, session


async def test_a_function_call_reaches_switchboard_and_the_model(sb: Switchboard) -> None:
    call, model, session = await _session(
        sb, [[("save_meal", {"meal_type": "lunch", "dishes": ["soup"]})], "Logged."], new_id("lk")
    )
    async with session:
        result = await session.run(user_input="I had soup for lunch")
    result.expect.next_event().is_function_call(name="save_meal")
    result.expect.next_event().is_function_call_output()
    assert json.loads(model.outputs()["save_meal"])["message"] == "I've logged your lunch!"
    # LiveKit's call id is our function call id.
    lk_id = next(e.item.call_id for e in result.events if e.type == "function_call")
    record = await call.record()
    assert [i["function_call_id"] for i in record.invocations] == [lk_id]
    assert record.context["workflow"]["logged_meals"] == [{"meal_type": "lunch", "dishes": ["soup"]}]
    await call.end()


async def test_two_function_calls_run_in_parallel(sb: Switchboard) -> None:
    call, model, session = await _session(
        sb, [[("lookup_order", {"order_id": "A1"}), ("place_order", {"item": "pizza"})], "Both done."], new_id("lk")
    )
    t0 = time.monotonic()
    async with session:
        await session.run(user_input="check A1 and order pizza")
    assert time.monotonic() - t0 < 2.8
    out = model.outputs()
    assert json.loads(out["lookup_order"])["data"]["order"]["status"] == "done"
    assert json.loads(out["place_order"])["message"] == "Ordered pizza."
    await call.end()


async def test_interruption_cancels_the_read_and_delivers_the_write(sb: Switchboard) -> None:
    call, model, session = await _session(
        sb, [[("lookup_order", {"order_id": "Z9"}), ("place_order", {"item": "tea"})], "Never said."], new_id("lk")
    )
    async with session:
        run = session.run(user_input="check Z9 and order tea")
        await asyncio.sleep(0.5)
        await session.interrupt()
        await run
        for _ in range(50):
            history = {i.name: i.output for i in session.history.items if i.type == "function_call_output"}
            if len(history) == 2:
                break
            await asyncio.sleep(0.1)
    assert json.loads(history["lookup_order"])["error"] == "cancelled"
    assert json.loads(history["place_order"])["message"] == "Ordered tea."
    record = await call.record()
    assert {i["tool"]: i["interrupted"] for i in record.invocations} == {"lookup_order": True, "place_order": True}
    assert record.context["workflow"]["orders"] == ["tea"]
    await call.end()


async def test_transfer_and_hangup_use_livekits_server_api(
    sb: Switchboard, livekit_api: FakeLiveKit, room: rtc.Room
) -> None:
    async with http_context.open():
        with fake_job_context(room=room):
            call, model, session = await _session(
                sb, [[("transfer_to_sales", {})], "Transferring.", [("hang_up", {})], "Bye."],
                new_id("lk"), participant_identity="sip_caller",
            )
            async with session:
                await session.run(user_input="sales please")
                assert [(t.participant_identity, t.transfer_to) for t in livekit_api.transfers] == [
                    ("sip_caller", "sip:sales@example.com")
                ]
                assert json.loads(model.outputs()["transfer_to_sales"])["ok"] is True
                await session.run(user_input="bye")
                for _ in range(50):
                    if livekit_api.deleted_rooms:
                        break
                    await asyncio.sleep(0.1)
    assert livekit_api.deleted_rooms == [room.name or ""]
    said = [i.text_content for i in session.history.items if i.type == "message" and i.role == "assistant"]
    assert "Goodbye!" in said
    await call.end()


async def test_a_failed_transfer_is_reported_to_the_model(sb: Switchboard) -> None:
    async def refuse(_ctx: Any, _t: Any) -> None:
        raise RuntimeError("SIP 486 busy")

    call, model, session = await _session(
        sb, [[("transfer_to_sales", {})], "Sorry."], new_id("lk"), on_transfer=refuse
    )
    async with session:
        await session.run(user_input="sales please")
    out = json.loads(model.outputs()["transfer_to_sales"])
    assert out["error"] == "call_transfer_failed" and "486" in out["message"]
    await call.end()


async def test_a_handoff_takes_effect_in_the_same_turn(sb: Switchboard) -> None:
    # One user turn: the model hands off, then (the same speech's next step) calls billing's tool.
    call, model, session = await _session(
        sb, [[("to_billing", {})], [("pay_bill", {"amount": 12.5})], "Paid.", [("pay_bill", {"amount": 1})], "Again."],
        new_id("lk"),
    )
    async with session:
        result = await session.run(user_input="billing please, pay 12.50")
        await session.run(user_input="and 1 more")
    assert "save_meal" in model.seen[0].tools and "pay_bill" not in model.seen[0].tools
    assert model.seen[1].tools == ["pay_bill"] and "billing" in model.seen[1].instructions
    outputs = [e.item for e in result.events if e.type == "function_call_output"]
    assert [o.name for o in outputs] == ["to_billing", "pay_bill"]
    handoff = json.loads(outputs[0].output)
    assert handoff["message"] == "Transferred to agent 'billing'."
    assert handoff["handoff"] == {"agent": "billing", "reason": "billing question"}
    assert not outputs[1].is_error and json.loads(outputs[1].output)["message"] == "Paid."
    # The next turn keeps billing's tools and instructions.
    assert model.seen[3].tools == ["pay_bill"] and "billing" in model.seen[3].instructions
    record = await call.record()
    assert [i["tool"] for i in record.invocations] == ["to_billing", "pay_bill", "pay_bill"]
    assert record.context["workflow"]["paid"] == 1
    await call.end()


async def test_a_slow_tools_messages_are_spoken_while_it_runs(sb: Switchboard) -> None:
    call, model, session = await _session(sb, [[("check_stock", {"item": "tea"})], "Yes."], new_id("lk"))
    async with session:
        await session.run(user_input="is tea in stock?")
    said = [i.text_content for i in session.history.items if i.type == "message" and i.role == "assistant"]
    assert said.index("Let me check the stock.") < said.index("Still checking, one moment.")
    assert json.loads(model.outputs()["check_stock"])["message"] == "tea is in stock."
    assert await sb.messages("save_meal") is None and await sb.messages("no_such_tool") is None
    await call.end()


async def test_a_changed_tools_messages_are_spoken_by_the_next_call(sb: Switchboard) -> None:
    name = new_id("shelf").replace("-", "_")
    tool = {"name": name, "description": "Check the shelf", "side_effect": "read", "parameters": [],
            "messages": {"start": "Looking at the shelf."},
            "actions": [{"type": "context.set", "data": {"shelf": "seen"}}],
            "on_success": [{"type": "respond", "message": "On the shelf."}]}
    await sb.request("POST", "/v1/tools", body=tool, idempotent=False)
    agent = new_id("shelver")
    await sb.request("PUT", f"/v1/agents/{agent}", body={"instructions": "Check shelves.", "tools": [{"tool": name}]},
                     idempotent=True)

    async def spoken() -> list[str]:
        call = await sb.start_call(agent=agent, call_id=new_id("lk"))
        tools = SwitchboardTools(call)
        session = AgentSession(llm=ScriptedLLM([[(name, {})], "Done."]))
        await session.start(Agent(instructions="Check shelves.", tools=tools.tools()))
        async with session:
            await session.run(user_input="check the shelf")
        await call.end()
        return [i.text_content or "" for i in session.history.items if i.type == "message" and i.role == "assistant"]

    assert "Looking at the shelf." in await spoken()
    tool["messages"] = {"start": "One moment, checking the shelf."}
    await sb.request("PUT", f"/v1/tools/{name}", body=tool, idempotent=True)
    # The same process and client: the next call speaks the tool's new messages.
    said = await spoken()
    assert "One moment, checking the shelf." in said and "Looking at the shelf." not in said
