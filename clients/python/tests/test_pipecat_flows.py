"""The Pipecat Flows adapter, driven by Flows' own `FlowManager` on a Pipecat pipeline (the
universal context aggregators and `LLMService.run_function_calls`) with a scripted LLM service,
against the real server."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, fields
from typing import Any

from conftest import new_id
from pipecat.flows import FlowManager, NodeConfig
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    FunctionCallFromLLM,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import LLMSettings
from pipecat.workers.runner import WorkerRunner

from switchboard import Call, Handoff, Switchboard
from switchboard.pipecat import exact_schemas
from switchboard.pipecat_flows import SwitchboardFlows

Step = list[tuple[str, dict[str, Any]]] | str


@dataclass
class Seen:
    system: str | None
    messages: list[Any]
    tools: list[str]
    sent: list[Any]
    """The tools as the service's adapter sends them."""


class ScriptedLLM(LLMService):
    """An LLM service that answers each inference from a script: function calls or text."""

    def __init__(self, script: list[Step]) -> None:
        none = dict.fromkeys(f.name for f in fields(LLMSettings) if f.name != "extra")
        super().__init__(settings=LLMSettings(**none))
        self.script = list(script)
        self.seen: list[Seen] = []
        self.answered = asyncio.Event()
        self.called = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        ctx = frame.context
        tools = ctx.tools
        names = sorted(t.name for t in tools.standard_tools) if hasattr(tools, "standard_tools") else []
        system = self._settings.system_instruction
        self.seen.append(Seen(system if isinstance(system, str) else None, list(ctx.get_messages()), names,
                              self.get_llm_adapter().to_provider_tools_format(tools)
                              if hasattr(tools, "standard_tools") else []))
        step = self.script.pop(0) if self.script else "Done."
        await self.push_frame(LLMFullResponseStartFrame())
        if isinstance(step, str):
            await self.push_frame(LLMTextFrame(step))
            if not self.script:
                self.answered.set()
        else:
            await self.run_function_calls(
                [FunctionCallFromLLM(function_name=n, tool_call_id=new_id(f"fl_{n}"), arguments=a, context=ctx)
                 for n, a in step]
            )
            self.called.set()
        await self.push_frame(LLMFullResponseEndFrame())

    def tool_outputs(self) -> dict[str, str]:
        """Every tool result the model has been given, by function."""
        out: dict[str, str] = {}
        for seen in self.seen:
            for m in seen.messages:
                if isinstance(m, dict) and m.get("role") == "tool":
                    out[str(m["tool_call_id"]).split("-")[0].removeprefix("fl_")] = str(m["content"])
        return out


async def _run_flow(flows: SwitchboardFlows, llm: ScriptedLLM, *, then: list[Frame] | None = None,
                    timeout: float = 10) -> LLMContext:
    """Runs the pipeline with a FlowManager started at the call's active agent's node, until the
    script's last text answer (then `then`), and ends it."""
    context = LLMContext(messages=[{"role": "user", "content": "hello"}])
    pair = LLMContextAggregatorPair(context)
    worker = PipelineWorker(Pipeline([pair.user(), llm, pair.assistant()]), cancel_on_idle_timeout=False)
    flow_manager = FlowManager(llm=llm, context_aggregator=pair, worker=worker)

    @worker.event_handler("on_pipeline_started")
    async def start(_worker: PipelineWorker, _frame: Frame) -> None:
        await flow_manager.initialize(await flows.node())

    async def drive() -> None:
        await asyncio.wait_for(llm.answered.wait(), timeout)
        for frame in then or []:
            await worker.queue_frame(frame)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner()
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), drive())
    return context


async def _start(sb: Switchboard) -> Call:
    return await sb.start_call(agent="assistant", call_id=new_id("fl"))


async def test_a_nodes_function_runs_in_switchboard_and_its_answer_reaches_the_model(sb: Switchboard) -> None:
    call = await _start(sb)
    llm = ScriptedLLM([[("save_meal", {"meal_type": "lunch", "dishes": ["soup"]})], [("meals_so_far", {})], "Logged."])
    await _run_flow(SwitchboardFlows(call), llm)
    first = llm.seen[0]
    assert first.tools == sorted(f.name for f in call.functions)
    assert first.system == "You are the front desk."
    out = llm.tool_outputs()
    assert json.loads(out["save_meal"])["message"] == "I've logged your lunch!"
    assert json.loads(out["meals_so_far"])["data"]["meals"] == [{"meal_type": "lunch", "dishes": ["soup"]}]
    record = await call.record()
    assert [i["tool"] for i in record.invocations] == ["save_meal", "meals_so_far"]
    assert all(i["function_call_id"].startswith("flows_") for i in record.invocations)
    await call.end()


async def test_a_handoff_moves_the_flow_to_the_new_agents_node(sb: Switchboard) -> None:
    call = await _start(sb)
    llm = ScriptedLLM([[("to_billing", {})], [("pay_bill", {"amount": 12.5})], "Paid."])
    await _run_flow(SwitchboardFlows(call), llm)
    before, after = llm.seen[0], llm.seen[1]
    assert "to_billing" in before.tools and "pay_bill" not in before.tools
    # The transition: the billing agent's node, its functions and its instructions.
    assert after.tools == ["pay_bill"]
    assert after.system == "You are billing. Take payments."
    assert json.loads(llm.tool_outputs()["pay_bill"])["message"] == "Paid."
    handoff = json.loads(llm.tool_outputs()["to_billing"])
    assert handoff["message"] == "Transferred to agent 'billing'."
    assert handoff["handoff"] == {"agent": "billing", "reason": "billing question"}
    record = await call.record()
    assert record.agent == "billing" and record.context["workflow"]["paid"] == 12.5
    await call.end()


async def test_on_handoff_builds_the_next_node(sb: Switchboard) -> None:
    call = await _start(sb)
    handoffs: list[str] = []

    async def billing_node(handoff: Handoff) -> NodeConfig:
        handoffs.append(f"{handoff.agent}: {handoff.reason}")
        return await flows.node(task_messages=[{"role": "developer", "content": "Confirm the amount first."}])

    flows = SwitchboardFlows(call, on_handoff=billing_node)
    llm = ScriptedLLM([[("to_billing", {})], "How much?"])
    await _run_flow(flows, llm)
    assert handoffs == ["billing: billing question"]
    contents = [m.get("content") for m in llm.seen[1].messages if isinstance(m, dict)]
    assert "Confirm the amount first." in contents and llm.seen[1].tools == ["pay_bill"]
    await call.end()


async def test_an_interruption_cancels_the_read_and_lets_the_write_finish(sb: Switchboard) -> None:
    call = await _start(sb)
    llm = ScriptedLLM([[("lookup_order", {"order_id": "Z9"}), ("place_order", {"item": "tea"})]])
    context = LLMContext(messages=[{"role": "user", "content": "hello"}])
    pair = LLMContextAggregatorPair(context)
    worker = PipelineWorker(Pipeline([pair.user(), llm, pair.assistant()]), cancel_on_idle_timeout=False)
    flows = SwitchboardFlows(call)
    flow_manager = FlowManager(llm=llm, context_aggregator=pair, worker=worker)

    @worker.event_handler("on_pipeline_started")
    async def start(_worker: PipelineWorker, _frame: Frame) -> None:
        await flow_manager.initialize(await flows.node())

    async def drive() -> None:
        await asyncio.wait_for(llm.called.wait(), 10)
        await asyncio.sleep(0.4)  # both calls are on their way to Switchboard; the caller barges in
        await worker.queue_frame(InterruptionFrame())
        await asyncio.sleep(2.0)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner()
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), drive())
    by_tool = {i["tool"]: i for i in (await call.record()).invocations}
    assert by_tool["lookup_order"]["error"] == "cancelled"
    assert by_tool["place_order"]["ok"] is True and by_tool["place_order"]["interrupted"] is True
    notes = [m["content"] for m in context.get_messages() if isinstance(m, dict) and m.get("role") == "developer"]
    assert len(notes) == 1 and "place_order" in notes[0] and "Ordered tea." in notes[0]
    await call.end()


async def test_a_hang_up_says_goodbye_and_ends_the_pipeline(sb: Switchboard) -> None:
    call = await _start(sb)
    llm = ScriptedLLM([[("hang_up", {})], "Never said."])
    context = LLMContext(messages=[{"role": "user", "content": "bye"}])
    pair = LLMContextAggregatorPair(context)
    worker = PipelineWorker(Pipeline([pair.user(), llm, pair.assistant()]), cancel_on_idle_timeout=False)
    flows = SwitchboardFlows(call)
    flow_manager = FlowManager(llm=llm, context_aggregator=pair, worker=worker)

    @worker.event_handler("on_pipeline_started")
    async def start(_worker: PipelineWorker, _frame: Frame) -> None:
        await flow_manager.initialize(await flows.node())

    runner = WorkerRunner()
    await runner.add_workers(worker)
    # The pipeline ends by itself (the hang-up's EndFrame); the model is not run again.
    await asyncio.wait_for(runner.run(), 10)
    assert len(llm.seen) == 1 and llm.script == ["Never said."]
    assert [i["tool"] for i in (await call.record()).invocations] == ["hang_up"]
    await call.end()


async def test_an_exact_schemas_service_sends_the_whole_schema_of_a_nodes_functions(sb: Switchboard) -> None:
    call = await _start(sb)
    plain, exact = ScriptedLLM(["Hello."]), exact_schemas(ScriptedLLM)(["Hello."])
    for llm in (plain, exact):
        await _run_flow(SwitchboardFlows(call), llm)
    parameters = {f.name: f.parameters for f in call.functions}
    assert all(p.get("additionalProperties") is False for p in parameters.values())
    # Flows rebuilds each function's schema from `properties` and `required`: the top level's
    # `additionalProperties: false` is lost with Pipecat's own adapter, kept with exact_schemas.
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in plain.seen[0].sent}
    assert sent.keys() == parameters.keys() and all("additionalProperties" not in p for p in sent.values())
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in exact.seen[0].sent}
    assert sent == parameters
    await call.end()
