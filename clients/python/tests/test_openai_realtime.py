"""The OpenAI Agents SDK adapter under a `RealtimeAgent`, driven by the SDK's own
`RealtimeRunner` / `RealtimeSession` with its `ScriptedRealtimeModel` (`agents.realtime.testing`):
the scripted model answers what the session sends it with function calls, and the tools run in
Switchboard, against the real server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from agents import set_tracing_disabled
from agents.realtime import RealtimeAgent, RealtimeRunner
from agents.realtime.model_events import (
    RealtimeModelAudioInterruptedEvent,
    RealtimeModelToolCallEvent,
    RealtimeModelTurnEndedEvent,
)
from agents.realtime.model_inputs import (
    RealtimeModelSendEvent,
    RealtimeModelSendSessionUpdate,
    RealtimeModelSendToolOutput,
    RealtimeModelSendUserInput,
)
from agents.realtime.testing import RealtimeStep, ScriptedRealtimeModel
from conftest import new_id

from switchboard import Call, Switchboard
from switchboard.openai_agents import SwitchboardTools

set_tracing_disabled(True)


def _fc(name: str, call_id: str, arguments: dict[str, Any]) -> RealtimeModelToolCallEvent:
    return RealtimeModelToolCallEvent(name=name, call_id=call_id, arguments=json.dumps(arguments))


def _output_of(call_id: str) -> Callable[[RealtimeModelSendEvent], bool]:
    def match(event: RealtimeModelSendEvent) -> bool:
        return isinstance(event, RealtimeModelSendToolOutput) and event.tool_call.call_id == call_id

    return match


def _outputs(model: ScriptedRealtimeModel) -> dict[str, RealtimeModelSendToolOutput]:
    """Every tool output the session sent the model, by call id."""
    return {e.tool_call.call_id: e for e in model.sent_events if isinstance(e, RealtimeModelSendToolOutput)}


async def _until(done: Callable[[], bool], what: str, timeout: float = 10) -> None:
    for _ in range(int(timeout / 0.05)):
        if done():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def _realtime(sb: Switchboard) -> tuple[Call, SwitchboardTools, RealtimeAgent[Any]]:
    call = await sb.start_call(agent="assistant", call_id=new_id("rt"))
    tools = SwitchboardTools(call)
    agent: RealtimeAgent[Any] = RealtimeAgent(name="assistant", instructions=await call.instructions(),
                                              tools=tools.tools())
    return call, tools, agent


async def test_a_realtime_function_call_runs_in_switchboard_and_its_output_reaches_the_model(sb: Switchboard) -> None:
    call, tools, agent = await _realtime(sb)
    model = ScriptedRealtimeModel([
        RealtimeStep(expect=RealtimeModelSendUserInput,
                     emit=[_fc("save_meal", "rt_1", {"meal_type": "lunch", "dishes": ["soup"]})]),
        RealtimeStep(expect=_output_of("rt_1"), emit=[RealtimeModelTurnEndedEvent()]),
    ])
    async with await RealtimeRunner(agent, model=model).run() as session:
        tools.attach(session)
        # The model was connected with the Switchboard agent's tools.
        settings = model.connect_calls[0].get("initial_model_settings") or {}
        assert "save_meal" in [t.name for t in settings.get("tools") or []]
        await session.send_message("I had soup for lunch")
        await _until(lambda: model.remaining_steps == 0, "the tool output to reach the model")
    model.assert_complete()
    sent = _outputs(model)["rt_1"]
    assert json.loads(sent.output)["message"] == "I've logged your lunch!" and sent.start_response
    record = await call.record()
    assert [(i["function_call_id"], i["tool"]) for i in record.invocations] == [("rt_1", "save_meal")]
    assert record.context["workflow"]["logged_meals"] == [{"meal_type": "lunch", "dishes": ["soup"]}]
    await call.end()


async def test_the_models_audio_interrupted_cancels_the_read_and_lets_the_write_finish(sb: Switchboard) -> None:
    call, tools, agent = await _realtime(sb)
    model = ScriptedRealtimeModel([
        RealtimeStep(expect=RealtimeModelSendUserInput, emit=[
            _fc("lookup_order", "rt_r", {"order_id": "Z9"}), _fc("place_order", "rt_w", {"item": "tea"})]),
    ], strict=False)  # the two outputs come back in either order
    async with await RealtimeRunner(agent, model=model).run() as session:
        tools.attach(session)
        await session.send_message("check Z9 and order tea")
        await _until(lambda: len(tools._pending) == 2, "both calls to be on their way to Switchboard")
        await asyncio.sleep(0.3)
        # The caller barges in: the model stops its audio and says so.
        await model.emit(RealtimeModelAudioInterruptedEvent(item_id="item_1", content_index=0))
        await _until(lambda: len(_outputs(model)) == 2, "both tool outputs to reach the model")
    out = _outputs(model)
    assert json.loads(out["rt_r"].output)["error"] == "cancelled"
    assert json.loads(out["rt_w"].output)["message"] == "Ordered tea."
    by_tool = {i["tool"]: i for i in (await call.record()).invocations}
    assert by_tool["lookup_order"]["error"] == "cancelled"
    assert by_tool["place_order"]["ok"] is True and by_tool["place_order"]["interrupted"] is True
    await call.end()


async def test_without_an_interruption_a_slow_read_answers_for_real(sb: Switchboard) -> None:
    call, tools, agent = await _realtime(sb)
    model = ScriptedRealtimeModel([
        RealtimeStep(expect=RealtimeModelSendUserInput, emit=[_fc("lookup_order", "rt_r", {"order_id": "A1"})]),
        RealtimeStep(expect=_output_of("rt_r")),
    ])
    async with await RealtimeRunner(agent, model=model).run() as session:
        tools.attach(session)
        await session.send_message("check A1")
        await _until(lambda: model.remaining_steps == 0, "the tool output to reach the model")
    assert json.loads(_outputs(model)["rt_r"].output)["data"]["order"]["status"] == "done"
    await call.end()


async def test_a_handoff_sends_the_model_the_new_agents_tools_before_the_output(sb: Switchboard) -> None:
    call, tools, agent = await _realtime(sb)
    before = (list(agent.tools), agent.instructions)

    def billing(event: RealtimeModelSendEvent) -> bool:
        if not isinstance(event, RealtimeModelSendSessionUpdate):
            return False
        settings = event.session_settings
        return ([t.name for t in settings.get("tools") or []] == ["pay_bill"]
                and "billing" in str(settings.get("instructions")))

    model = ScriptedRealtimeModel([
        RealtimeStep(expect=RealtimeModelSendUserInput, emit=[_fc("to_billing", "rt_h", {})]),
        RealtimeStep(expect=billing),
        RealtimeStep(expect=_output_of("rt_h"), emit=[_fc("pay_bill", "rt_p", {"amount": 12.5})]),
        RealtimeStep(expect=_output_of("rt_p"), emit=[RealtimeModelTurnEndedEvent()]),
    ])
    async with await RealtimeRunner(agent, model=model).run() as session:
        tools.attach(session)
        await session.send_message("billing please, pay 12.50")
        await _until(lambda: model.remaining_steps == 0, "the handoff and the payment")
    model.assert_complete()
    assert json.loads(_outputs(model)["rt_p"].output)["message"] == "Paid."
    assert json.loads(_outputs(model)["rt_h"].output)["message"] == "Transferred to agent 'billing'."
    # The session runs a copy of the caller's agent with billing's tools; the agent is unchanged.
    assert (list(agent.tools), agent.instructions) == before
    record = await call.record()
    assert record.agent == "billing" and record.context["workflow"]["paid"] == 12.5
    await call.end()


async def test_closing_the_session_cancels_its_running_calls(sb: Switchboard) -> None:
    call, tools, agent = await _realtime(sb)
    model = ScriptedRealtimeModel([
        RealtimeStep(expect=RealtimeModelSendUserInput, emit=[_fc("lookup_order", "rt_r", {"order_id": "Q1"})]),
    ], strict=False)
    async with await RealtimeRunner(agent, model=model).run() as session:
        tools.attach(session)
        await session.send_message("check Q1")
        await _until(lambda: len(tools._pending) == 1, "the call to be on its way to Switchboard")
        await asyncio.sleep(0.3)
    # The session closed (the caller hung up) while the read ran: Switchboard cancels it.
    for _ in range(40):
        record = await call.record()
        if record.invocations:
            break
        await asyncio.sleep(0.1)
    assert [(i["tool"], i["error"]) for i in record.invocations] == [("lookup_order", "cancelled")]
    assert not _outputs(model)
    await call.end()
