"""The LiveKit adapter on LiveKit Agents 2.0 (the 2.0.0b1 pre-release, in the environment
`scripts/py-client-venv.sh --livekit2` makes), driven by LiveKit's own `AgentSession.run` with a
scripted LLM, against the real server. What works there and what does not: the README."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from dataclasses import dataclass
from typing import Any

import pytest
from livekit.agents import APIConnectOptions, Agent, AgentSession, __version__, llm
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

from switchboard import Switchboard
from switchboard.livekit import SwitchboardTools

Step = list[tuple[str, dict[str, Any]]] | str


def _id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(6)}"


def test_this_is_livekit_2() -> None:
    assert __version__.startswith("2."), __version__
    # What the adapter feature-detects: 2.0's agents cannot change their tools or instructions.
    assert not hasattr(Agent, "update_tools") and not hasattr(Agent, "update_instructions")


@dataclass
class Seen:
    tools: list[str]
    instructions: str


class ScriptedLLM(llm.LLM):
    """A model that answers each generation from a script: tool calls (name, arguments) or text."""

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
        self.seen.append(Seen(sorted(t.id for t in tools or []), "\n".join(i.text_content or "" for i in system)))
        step = self.script.pop(0) if self.script else "Done."
        return _Stream(self, step, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


class _Stream(llm.LLMStream):
    def __init__(self, model: ScriptedLLM, step: Step, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.step = step

    async def _run(self) -> None:
        if isinstance(self.step, str):
            delta = llm.ChoiceDelta(role="assistant", content=self.step)
        else:
            delta = llm.ChoiceDelta(
                role="assistant",
                tool_calls=[
                    llm.FunctionToolCall(name=n, arguments=json.dumps(a), call_id=_id(f"lk_{n}"))
                    for n, a in self.step
                ],
            )
        self._event_ch.send_nowait(llm.ChatChunk(id=_id("chunk"), delta=delta))


def _outputs(result: Any) -> list[Any]:
    return [e.item for e in result.events if e.type == "function_call_output"]


async def test_a_function_call_reaches_switchboard_and_the_model(sb: Switchboard) -> None:
    call = await sb.start_call(agent="assistant", call_id=_id("lk2"))
    tools = SwitchboardTools(call)
    model = ScriptedLLM([[("save_meal", {"meal_type": "lunch", "dishes": ["soup"]})], "Logged."])
    agent = Agent(instructions="", tools=tools.tools())
    agent.instructions(tools.instructions)
    async with AgentSession(llm=model) as session:
        await session.start(agent)
        result = await session.run(user_input="I had soup for lunch")
    out = _outputs(result)
    assert [o.name for o in out] == ["save_meal"]
    assert json.loads(out[0].output)["message"] == "I've logged your lunch!"
    assert model.seen[0].instructions == "You are the front desk."
    record = await call.record()
    assert [i["function_call_id"] for i in record.invocations] == [out[0].call_id]
    await call.end()


async def test_a_handoff_takes_effect_in_the_same_turn(sb: Switchboard) -> None:
    call = await sb.start_call(agent="assistant", call_id=_id("lk2"))
    tools = SwitchboardTools(call)
    model = ScriptedLLM([[("to_billing", {})], [("pay_bill", {"amount": 12.5})], "Paid."])
    agent = Agent(instructions="", tools=tools.tools())
    agent.instructions(tools.instructions)
    async with AgentSession(llm=model) as session:
        await session.start(agent)
        result = await session.run(user_input="billing please, pay 12.50")
    assert "save_meal" in model.seen[0].tools and "pay_bill" not in model.seen[0].tools
    # The toolset's functions and the instructions function follow the call within the turn.
    assert model.seen[1].tools == ["pay_bill"] and model.seen[1].instructions == "You are billing. Take payments."
    out = _outputs(result)
    assert [o.name for o in out] == ["to_billing", "pay_bill"]
    assert json.loads(out[0].output)["message"] == "Transferred to agent 'billing'."
    assert not out[1].is_error and json.loads(out[1].output)["message"] == "Paid."
    assert (await call.record()).context["workflow"]["paid"] == 12.5
    await call.end()


async def test_a_slow_tools_messages_are_spoken_while_it_runs(sb: Switchboard) -> None:
    call = await sb.start_call(agent="assistant", call_id=_id("lk2"))
    tools = SwitchboardTools(call)
    model = ScriptedLLM([[("check_stock", {"item": "tea"})], "Yes."])
    agent = Agent(instructions="", tools=tools.tools())
    agent.instructions(tools.instructions)
    async with AgentSession(llm=model) as session:
        await session.start(agent)
        result = await session.run(user_input="is tea in stock?")
        said = [i.text_content for i in session.history.items if i.type == "message" and i.role == "assistant"]
    assert said.index("Let me check the stock.") < said.index("Still checking, one moment.")
    assert json.loads(_outputs(result)[0].output)["message"] == "tea is in stock."
    await call.end()


async def test_transfer_and_hang_up_go_to_their_handlers(sb: Switchboard) -> None:
    call = await sb.start_call(agent="assistant", call_id=_id("lk2"))
    done: list[str] = []

    async def transfer(_ctx: Any, t: Any) -> None:
        done.append(f"transfer {t.target_uri}")

    async def hang_up(_ctx: Any, h: Any) -> None:
        done.append(f"hang-up {h.message}")

    tools = SwitchboardTools(call, on_transfer=transfer, on_hangup=hang_up)
    model = ScriptedLLM([[("transfer_to_sales", {})], "Transferring.", [("hang_up", {})], "Bye."])
    agent = Agent(instructions="", tools=tools.tools())
    agent.instructions(tools.instructions)
    async with AgentSession(llm=model) as session:
        await session.start(agent)
        await session.run(user_input="sales please")
        await session.run(user_input="bye")
        for _ in range(50):
            if len(done) == 2:
                break
            await asyncio.sleep(0.1)
    assert done == ["transfer sip:sales@example.com", "hang-up Goodbye!"]
    await call.end()


async def test_fixed_instructions_stay_after_a_handoff_and_a_warning_says_so(
    sb: Switchboard, caplog: pytest.LogCaptureFixture
) -> None:
    # The limit the README names: a 2.0 agent built with fixed instructions cannot change them.
    call = await sb.start_call(agent="assistant", call_id=_id("lk2"))
    tools = SwitchboardTools(call)
    model = ScriptedLLM([[("to_billing", {})], [("pay_bill", {"amount": 2})], "Paid."])
    async with AgentSession(llm=model) as session:
        await session.start(Agent(instructions=await call.instructions(), tools=tools.tools()))
        with caplog.at_level(logging.WARNING, logger="switchboard.livekit"):
            await session.run(user_input="billing please, pay 2")
    assert model.seen[1].tools == ["pay_bill"] and model.seen[1].instructions == "You are the front desk."
    assert any("agent.instructions(tools.instructions)" in r.getMessage() for r in caplog.records)
    await call.end()
