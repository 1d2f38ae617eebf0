"""The OpenAI Agents SDK adapter, driven by the SDK's own `Runner` with its `ScriptedModel`
(`agents.testing`), against the real server."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from agents import Agent, Runner
from agents.realtime import RealtimeAgent
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext
from agents import set_tracing_disabled
from conftest import new_id

from switchboard import Switchboard, Transfer
from switchboard.openai_agents import SwitchboardTools


set_tracing_disabled(True)


def _outputs(model: ScriptedModel) -> dict[str, str]:
    """Every function call output the model was given, by call id."""
    out: dict[str, str] = {}
    for call in model.calls:
        if isinstance(call.input, list):
            for item in call.input:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    out[str(item["call_id"])] = str(item["output"])
    return out


async def _agent(sb: Switchboard, steps: list[Any], **kw: Any):  # type: ignore[no-untyped-def]
    call = await sb.start_call(agent="assistant", call_id=new_id("oa"))
    model = ScriptedModel(steps)
    tools = SwitchboardTools(call, **kw)
    agent = await tools.agent(Agent(name="assistant", model=model))
    return call, model, agent


async def test_a_function_call_reaches_switchboard_and_the_model(sb: Switchboard) -> None:
    call, model, agent = await _agent(sb, [
        [function_call("save_meal", {"meal_type": "lunch", "dishes": ["soup"]}, call_id="oa_1")],
        [assistant_message("Logged.")],
    ])
    result = await Runner.run(agent, "I had soup for lunch")
    assert result.final_output == "Logged."
    assert json.loads(_outputs(model)["oa_1"])["message"] == "I've logged your lunch!"
    record = await call.record()
    assert [(i["function_call_id"], i["tool"]) for i in record.invocations] == [("oa_1", "save_meal")]
    await call.end()


async def test_two_function_calls_run_in_parallel(sb: Switchboard) -> None:
    call, model, agent = await _agent(sb, [
        [function_call("lookup_order", {"order_id": "A1"}, call_id="oa_r"),
         function_call("place_order", {"item": "pizza"}, call_id="oa_w")],
        [assistant_message("Both done.")],
    ])
    t0 = time.monotonic()
    await Runner.run(agent, "check A1 and order pizza")
    assert time.monotonic() - t0 < 2.8
    out = _outputs(model)
    assert json.loads(out["oa_r"])["data"]["order"]["status"] == "done"
    assert json.loads(out["oa_w"])["message"] == "Ordered pizza."
    await call.end()


async def test_a_cancelled_run_cancels_the_read_and_lets_the_write_finish(sb: Switchboard) -> None:
    call, _, agent = await _agent(sb, [
        [function_call("lookup_order", {"order_id": "Z9"}, call_id="oa_r"),
         function_call("place_order", {"item": "tea"}, call_id="oa_w")],
        [assistant_message("Never said.")],
    ])
    run = Runner.run_streamed(agent, "check Z9 and order tea")

    called = asyncio.Event()

    async def consume() -> None:
        async for event in run.stream_events():
            if getattr(event, "name", None) == "tool_called":
                called.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(called.wait(), 10)
    # Both tools are on their way to Switchboard; the caller barges in.
    await asyncio.sleep(0.4)
    run.cancel()
    await consumer
    for _ in range(40):
        record = await call.record()
        if len(record.invocations) == 2:
            break
        await asyncio.sleep(0.1)
    by_tool = {i["tool"]: i for i in record.invocations}
    assert by_tool["lookup_order"]["error"] == "cancelled"
    assert by_tool["place_order"]["ok"] is True and by_tool["place_order"]["interrupted"] is True
    assert record.context["workflow"]["orders"] == ["tea"]
    await call.end()


async def test_cancel_pending_answers_the_read_cancelled_and_the_write_for_real(sb: Switchboard) -> None:
    call = await sb.start_call(agent="assistant", call_id=new_id("oa"))
    tools = SwitchboardTools(call)
    model = ScriptedModel([
        [function_call("lookup_order", {"order_id": "Z9"}, call_id="oa_r"),
         function_call("place_order", {"item": "tea"}, call_id="oa_w")],
        [assistant_message("Your tea is ordered.")],
    ])
    agent = Agent(name="assistant", instructions=await call.instructions(), tools=tools.tools(), model=model)
    run = asyncio.create_task(Runner.run(agent, "check Z9 and order tea"))
    for _ in range(100):
        if len(tools._pending) == 2:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    await tools.cancel_pending()
    result = await run
    assert result.final_output == "Your tea is ordered."
    out = _outputs(model)
    assert json.loads(out["oa_r"])["error"] == "cancelled"
    assert json.loads(out["oa_w"])["message"] == "Ordered tea."
    await call.end()


async def test_transfer_goes_to_the_handler_and_a_missing_one_is_reported(sb: Switchboard) -> None:
    transfers: list[str] = []

    async def refer(ctx: ToolContext[Any], transfer: Transfer) -> None:
        transfers.append(f"{ctx.tool_call_id}->{transfer.target_uri}")

    call, model, agent = await _agent(sb, [
        [function_call("transfer_to_sales", {}, call_id="oa_t")], [assistant_message("Transferring.")],
    ], on_transfer=refer)
    await Runner.run(agent, "sales please")
    assert transfers == ["oa_t->sip:sales@example.com"]
    assert json.loads(_outputs(model)["oa_t"])["ok"] is True

    call2, model2, agent2 = await _agent(sb, [
        [function_call("hang_up", {}, call_id="oa_h")], [assistant_message("Bye.")],
    ])
    await Runner.run(agent2, "bye")
    out = json.loads(_outputs(model2)["oa_h"])
    assert out["ok"] is False and "on_hangup" in out["message"]
    await call.end()
    await call2.end()


async def test_a_handoff_changes_the_next_turns_tools(sb: Switchboard) -> None:
    call, model, agent = await _agent(sb, [
        [function_call("to_billing", {}, call_id="oa_1")],
        [function_call("pay_bill", {"amount": 12.5}, call_id="oa_2")],
        [assistant_message("Paid.")],
    ])
    await Runner.run(agent, "billing please, pay 12.50")
    first, second = model.calls[0], model.calls[1]
    assert "save_meal" in [t.name for t in first.tools] and "pay_bill" not in [t.name for t in first.tools]
    assert [t.name for t in second.tools] == ["pay_bill"]
    assert "billing" in (second.system_instructions or "")
    assert json.loads(_outputs(model)["oa_2"])["message"] == "Paid."
    handoff = json.loads(_outputs(model)["oa_1"])
    assert handoff["message"] == "Transferred to agent 'billing'."
    assert handoff["handoff"] == {"agent": "billing", "reason": "billing question"}
    assert (await call.record()).context["workflow"]["paid"] == 12.5
    await call.end()


async def test_one_agent_serves_two_concurrent_calls_and_a_handoff_stays_in_its_call(sb: Switchboard) -> None:
    base = Agent(name="assistant", instructions="unused: each call has its own")
    before = (list(base.tools), base.instructions)
    a = await sb.start_call(agent="assistant", call_id=new_id("oa_a"))
    b = await sb.start_call(agent="assistant", call_id=new_id("oa_b"))
    ta, tb = SwitchboardTools(a), SwitchboardTools(b)
    handed_off = asyncio.Event()

    class AfterTheHandoff(ScriptedModel):
        """b's model: its second step waits until a has handed off and paid."""

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            if len(self.calls) == 1:
                await handed_off.wait()
            return await super().get_response(*args, **kwargs)

    model_a = ScriptedModel([
        [function_call("to_billing", {}, call_id="a_1")],
        [function_call("pay_bill", {"amount": 3}, call_id="a_2")],
        [assistant_message("Paid.")],
    ])
    model_b = AfterTheHandoff([
        [function_call("meals_so_far", {}, call_id="b_1")],
        [function_call("save_meal", {"meal_type": "lunch", "dishes": ["soup"]}, call_id="b_2")],
        [assistant_message("Logged.")],
    ])
    agent_a = await ta.agent(base, model=model_a)
    agent_b = await tb.agent(base, model=model_b)

    async def run_a() -> None:
        await Runner.run(agent_a, "billing please, pay 3")
        handed_off.set()

    async def run_b() -> None:
        await Runner.run(agent_b, "log my soup")

    await asyncio.wait_for(asyncio.gather(run_a(), run_b()), 20)
    # a's handoff changed a's copy only: b kept the front desk's tools and instructions.
    assert [t.name for t in model_a.calls[1].tools] == ["pay_bill"]
    assert "billing" in (model_a.calls[1].system_instructions or "")
    for step in model_b.calls:
        assert "save_meal" in [t.name for t in step.tools] and "pay_bill" not in [t.name for t in step.tools]
        assert step.system_instructions == "You are the front desk."
    assert (list(base.tools), base.instructions) == before
    assert json.loads(_outputs(model_b)["b_2"])["message"] == "I've logged your lunch!"
    assert (await a.record()).agent == "billing" and (await b.record()).agent == "assistant"
    await a.end()
    await b.end()


async def test_the_same_tools_serve_a_realtime_agent(sb: Switchboard) -> None:
    call = await sb.start_call(agent="assistant", call_id=new_id("rt"))
    agent = RealtimeAgent(name="assistant", instructions=await call.instructions(), tools=SwitchboardTools(call).tools())
    tools = await agent.get_all_tools(None)  # type: ignore[arg-type]
    assert "save_meal" in [t.name for t in tools]
    await call.end()
