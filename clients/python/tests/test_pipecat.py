"""The Pipecat adapter, driven by Pipecat's own pipeline (its `run_test` harness, the universal
context aggregators and `LLMService.run_function_calls`) with a scripted LLM service, against the
real server."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, fields
from typing import Any

from conftest import new_id
from pipecat.frames.frames import (
    EndWorkerFrame,
    Frame,
    FunctionCallFromLLM,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMMessagesAppendFrame,
    LLMRunFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.adapters.llm.services.open_ai_responses_adapter import OpenAIResponsesLLMAdapter
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallParams, LLMService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
from pipecat.services.settings import LLMSettings
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.transports.daily.transport import DailySIPReferFrame

from switchboard import Switchboard, Transfer
from switchboard.pipecat import SwitchboardTools, daily_sip_refer, exact_schemas

Step = list[tuple[str, dict[str, Any]]] | str


@dataclass
class Seen:
    messages: list[Any]
    tools: list[str]


class ScriptedLLM(LLMService):
    """An LLM service that answers each inference from a script: function calls or text."""

    def __init__(self, script: list[Step]) -> None:
        none = dict.fromkeys(f.name for f in fields(LLMSettings) if f.name != "extra")
        super().__init__(settings=LLMSettings(**none))
        self.script = list(script)
        self.seen: list[Seen] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        ctx = frame.context
        tools = ctx.tools
        names = sorted(t.name for t in tools.standard_tools) if hasattr(tools, "standard_tools") else []
        self.seen.append(Seen(list(ctx.get_messages()), names))
        step = self.script.pop(0) if self.script else "Done."
        await self.push_frame(LLMFullResponseStartFrame())
        if isinstance(step, str):
            await self.push_frame(LLMTextFrame(step))
        else:
            await self.run_function_calls(
                [FunctionCallFromLLM(function_name=n, tool_call_id=new_id(f"pc_{n}"), arguments=a, context=ctx)
                 for n, a in step]
            )
        await self.push_frame(LLMFullResponseEndFrame())

    def tool_outputs(self) -> dict[str, str]:
        """Every tool result the model has been given, by tool call id prefix (the function)."""
        out: dict[str, str] = {}
        for seen in self.seen:
            for m in seen.messages:
                if isinstance(m, dict) and m.get("role") == "tool":
                    out[str(m["tool_call_id"]).split("-")[0].removeprefix("pc_")] = str(m["content"])
        return out


async def _pipeline(sb: Switchboard, script: list[Step], **kw: Any):  # type: ignore[no-untyped-def]
    call = await sb.start_call(agent="assistant", call_id=new_id("pc"))
    llm = ScriptedLLM(script)
    tools = SwitchboardTools(call, **kw)
    context = LLMContext(
        messages=[{"role": "system", "content": await call.instructions()},
                  {"role": "user", "content": "hello"}],
        tools=tools.register(llm),
    )
    pair = LLMContextAggregatorPair(context)
    return call, llm, context, Pipeline([pair.user(), llm, pair.assistant()])


async def test_a_function_call_reaches_switchboard_and_the_model(sb: Switchboard) -> None:
    call, llm, _, pipeline = await _pipeline(sb, [[("save_meal", {"meal_type": "lunch", "dishes": ["soup"]})], "Logged."])
    await run_test(pipeline, frames_to_send=[LLMRunFrame(), SleepFrame(1.0)])
    assert json.loads(llm.tool_outputs()["save_meal"])["message"] == "I've logged your lunch!"
    record = await call.record()
    assert [i["tool"] for i in record.invocations] == ["save_meal"]
    assert record.invocations[0]["function_call_id"].startswith("pc_save_meal-")
    await call.end()


async def test_two_function_calls_run_in_parallel(sb: Switchboard) -> None:
    call, llm, _, pipeline = await _pipeline(
        sb, [[("lookup_order", {"order_id": "A1"}), ("place_order", {"item": "pizza"})], "Both done."]
    )
    t0 = time.monotonic()
    await run_test(pipeline, frames_to_send=[LLMRunFrame(), SleepFrame(2.2)])
    out = llm.tool_outputs()
    assert json.loads(out["lookup_order"])["data"]["order"]["status"] == "done"
    assert json.loads(out["place_order"])["message"] == "Ordered pizza."
    assert time.monotonic() - t0 < 4.0
    await call.end()


async def test_interruption_cancels_the_read_and_delivers_the_write(sb: Switchboard) -> None:
    call, llm, context, pipeline = await _pipeline(
        sb, [[("lookup_order", {"order_id": "Z9"}), ("place_order", {"item": "tea"})], "Never said."]
    )
    await run_test(pipeline, frames_to_send=[LLMRunFrame(), SleepFrame(0.4), InterruptionFrame(), SleepFrame(2.0)])
    record = await call.record()
    by_tool = {i["tool"]: i for i in record.invocations}
    assert by_tool["lookup_order"]["error"] == "cancelled"
    assert by_tool["place_order"]["ok"] is True and by_tool["place_order"]["interrupted"] is True
    assert record.context["workflow"]["orders"] == ["tea"]
    # The write's real answer reached the model's context although Pipecat settled the call.
    notes = [m["content"] for m in context.get_messages() if isinstance(m, dict) and m.get("role") == "developer"]
    assert len(notes) == 1 and "place_order" in notes[0] and "Ordered tea." in notes[0]
    await call.end()


async def test_transfer_and_hangup_become_frames(sb: Switchboard) -> None:
    transfers: list[str] = []

    async def refer(params: FunctionCallParams, transfer: Transfer) -> None:
        transfers.append(transfer.target_uri)

    call, llm, _, pipeline = await _pipeline(
        sb, [[("transfer_to_sales", {})], "Transferring.", [("hang_up", {})], "Bye."], on_transfer=refer
    )
    down, up = await run_test(
        pipeline,
        frames_to_send=[LLMRunFrame(), SleepFrame(0.8),
                        LLMMessagesAppendFrame(messages=[{"role": "user", "content": "bye"}], run_llm=True),
                        SleepFrame(0.8)],
    )
    assert transfers == ["sip:sales@example.com"]
    assert json.loads(llm.tool_outputs()["transfer_to_sales"])["ok"] is True
    assert [f.text for f in down if isinstance(f, TTSSpeakFrame)] == ["Goodbye!"]
    assert any(isinstance(f, EndWorkerFrame) for f in up)
    await call.end()


async def test_daily_sip_refer_sends_dailys_refer_frame_down_the_pipeline(sb: Switchboard) -> None:
    # Daily's transport carries a DailySIPReferFrame out as a SIP REFER; here the pipeline's end
    # stands in for the transport and sees the frame, with the transfer's target.
    call, llm, _, pipeline = await _pipeline(
        sb, [[("transfer_to_sales", {})], "Transferring."], on_transfer=daily_sip_refer
    )
    down, _ = await run_test(pipeline, frames_to_send=[LLMRunFrame(), SleepFrame(0.8)])
    refers = [f.settings for f in down if isinstance(f, DailySIPReferFrame)]
    assert refers == [{"toEndPoint": "sip:sales@example.com"}]
    assert json.loads(llm.tool_outputs()["transfer_to_sales"])["ok"] is True
    await call.end()


async def test_a_transfer_without_a_handler_is_reported_to_the_model(sb: Switchboard) -> None:
    call, llm, _, pipeline = await _pipeline(sb, [[("transfer_to_sales", {})], "Sorry."])
    await run_test(pipeline, frames_to_send=[LLMRunFrame(), SleepFrame(0.8)])
    out = json.loads(llm.tool_outputs()["transfer_to_sales"])
    assert out["error"] == "call_transfer_failed" and "on_transfer" in out["message"]
    await call.end()


async def test_a_handoff_changes_the_next_turns_tools(sb: Switchboard) -> None:
    call, llm, _, pipeline = await _pipeline(
        sb, [[("to_billing", {})], "You are with billing now.", [("pay_bill", {"amount": 12.5})], "Paid."]
    )
    await run_test(
        pipeline,
        frames_to_send=[LLMRunFrame(), SleepFrame(0.8),
                        LLMMessagesAppendFrame(messages=[{"role": "user", "content": "pay 12.50"}], run_llm=True),
                        SleepFrame(0.8)],
    )
    assert "save_meal" in llm.seen[0].tools and "pay_bill" not in llm.seen[0].tools
    assert llm.seen[1].tools == ["pay_bill"]
    assert "billing" in llm.seen[1].messages[0]["content"]
    assert json.loads(llm.tool_outputs()["pay_bill"])["message"] == "Paid."
    handoff = json.loads(llm.tool_outputs()["to_billing"])
    assert handoff["message"] == "Transferred to agent 'billing'."
    assert handoff["handoff"] == {"agent": "billing", "reason": "billing question"}
    assert (await call.record()).context["workflow"]["paid"] == 12.5
    await call.end()


async def test_a_slow_tools_messages_are_spoken_while_it_runs(sb: Switchboard) -> None:
    call, llm, _, pipeline = await _pipeline(sb, [[("check_stock", {"item": "tea"})], "Yes."])
    down, _ = await run_test(pipeline, frames_to_send=[LLMRunFrame(), SleepFrame(2.2)])
    assert [f.text for f in down if isinstance(f, TTSSpeakFrame)] == [
        "Let me check the stock.", "Still checking, one moment."
    ]
    assert json.loads(llm.tool_outputs()["check_stock"])["message"] == "tea is in stock."
    await call.end()


def _objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema in `schema`, itself included."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        ty = schema.get("type")
        if ty == "object" or (isinstance(ty, list) and "object" in ty):
            found.append(schema)
        for value in schema.values():
            found += _objects(value)
    elif isinstance(schema, list):
        for item in schema:
            found += _objects(item)
    return found


async def test_the_llm_request_keeps_additional_properties_false(sb: Switchboard) -> None:
    # A raw-schema tool with a nested object beside typed ones, on an agent of its own.
    await sb.request("POST", "/v1/tools", idempotent=False, body={
        "name": "set_address",
        "description": "Set the delivery address",
        "side_effect": "write",
        "parameters": {
            "type": "object",
            "properties": {"address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                "required": ["street", "city"],
                "additionalProperties": False,
            }},
            "required": ["address"],
            "additionalProperties": False,
        },
        "actions": [{"type": "context.set", "data": {"address": "{{params.address}}"}}],
    })
    await sb.request("PUT", "/v1/agents/exact", idempotent=True,
                     body={"instructions": "Take addresses.", "tools": [{"tool": "set_address"}, {"tool": "save_meal"}]})
    call = await sb.start_call(agent="exact", call_id=new_id("pc_exact"))
    context = LLMContext(messages=[{"role": "user", "content": "hi"}], tools=SwitchboardTools(call).register(
        ScriptedLLM([])))
    # What Pipecat's OpenAI service sends: its adapter's conversion, then its request's params.
    llm = OpenAILLMService(api_key="sk-unused")
    params = await llm.get_llm_adapter().get_llm_invocation_params(context, system_instruction=None, convert_developer_to_user=False)
    sent = llm.build_chat_completion_params(params)["tools"]
    responses = OpenAIResponsesLLMAdapter().to_provider_tools_format(context.tools)
    for tools, parameters in ((sent, lambda t: t["function"]["parameters"]), (responses, lambda t: t["parameters"])):
        assert sorted(t["function"]["name"] if "function" in t else t["name"] for t in tools) == ["save_meal", "set_address"]
        for tool in tools:
            objects = _objects(parameters(tool))
            assert objects and all(o.get("additionalProperties") is False for o in objects), tool
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in sent}
    assert by_name["set_address"]["properties"]["address"]["required"] == ["street", "city"]
    # OpenAI Realtime's adapter builds a tool from `properties` and `required`: Pipecat's own
    # drops the top level's `additionalProperties`, an `exact_schemas` service's keeps it.
    plain = OpenAIRealtimeLLMService.adapter_class().to_provider_tools_format(context.tools)  # type: ignore[misc]
    assert all("additionalProperties" not in t["parameters"] for t in plain)
    realtime = exact_schemas(OpenAIRealtimeLLMService).adapter_class().to_provider_tools_format(  # type: ignore[misc]
        context.tools)
    assert sorted(t["name"] for t in realtime) == ["save_meal", "set_address"]
    for tool in realtime:
        objects = _objects(tool["parameters"])
        assert objects and all(o.get("additionalProperties") is False for o in objects), tool
    await call.end()
