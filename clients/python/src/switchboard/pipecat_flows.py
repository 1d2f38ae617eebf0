"""Pipecat Flows (`pipecat.flows`, part of `pipecat-ai` 1.14) adapter: a Switchboard call's
active agent as a Flows node, and a Switchboard handoff as a node transition.

    call = await sb.start_call(agent="assistant")
    flows = SwitchboardFlows(call)
    flow_manager = FlowManager(llm=llm, context_aggregator=pair, worker=worker)
    await flow_manager.initialize(await flows.node())

`node()` is the active agent's node: its instructions as the `role_message`, its functions as
`FlowsFunctionSchema`s (`functions()`, to put in a node of your own). Each function runs in
Switchboard under a function call id of its own (Flows does not hand its handlers the model's
tool call id). A handoff answer moves the flow to the new agent's node (`on_handoff` builds
another). An interruption cancels the handler as Pipecat does and the call's response in
Switchboard, whose side-effect policy decides: a read is aborted, a write finishes and its real
answer is added to the context. A transfer answer goes to `on_transfer` (without one, the model
is told the transfer failed); a hang-up answer to `on_hangup` (by default `speak_and_end`: the
goodbye, then the end of the pipeline).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from pipecat.flows import NO_RESPONSE, FlowArgs, FlowManager, FlowsFunctionSchema, NodeConfig
from pipecat.frames.frames import EndFrame, LLMMessagesAppendFrame, TTSSpeakFrame
from pipecat.processors.aggregators.llm_context import LLMContextMessage

from .client import Call
from .errors import SwitchboardError
from .pipecat import remember_exact
from .types import Function, Handoff, Hangup, InvocationResult, Transfer, handed_off

TransferHandler = Callable[[FlowManager, Transfer], Awaitable[None]]
HangupHandler = Callable[[FlowManager, Hangup], Awaitable[None]]
HandoffNode = Callable[[Handoff], Awaitable[NodeConfig]]


def _failed(tool: str, code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "error": code, "tool": tool, "message": message}


async def speak_and_end(flow_manager: FlowManager, hangup: Hangup) -> None:
    """Says the goodbye, then ends the pipeline once it has played (as Flows'
    `end_conversation` action does)."""
    frames = [TTSSpeakFrame(hangup.message)] if hangup.message else []
    await flow_manager.worker.queue_frames([*frames, EndFrame()])


class SwitchboardFlows:
    """A Switchboard call's active agent as Pipecat Flows nodes."""

    def __init__(
        self,
        call: Call,
        *,
        on_handoff: HandoffNode | None = None,
        on_transfer: TransferHandler | None = None,
        on_hangup: HangupHandler | None = None,
    ) -> None:
        self.call = call
        self._on_handoff = on_handoff
        self._on_transfer = on_transfer
        self._on_hangup = on_hangup or speak_and_end
        # Answers that outlive their interrupted handler; kept so they are not collected.
        self._background: set[asyncio.Task[None]] = set()

    async def node(self, task_messages: list[dict[str, Any]] | None = None) -> NodeConfig:
        """The active agent's node: its instructions as the role message, its functions, and
        `task_messages` (none by default)."""
        return NodeConfig(
            name=self.call.agent,
            role_message=await self.call.instructions(),
            task_messages=list(task_messages or []),
            functions=list(self.functions()),
        )

    def functions(self) -> list[FlowsFunctionSchema]:
        """The active agent's functions as Flows function schemas."""
        return [self._schema(f) for f in self.call.functions]

    def _schema(self, function: Function) -> FlowsFunctionSchema:
        async def handler(args: FlowArgs, flow_manager: FlowManager) -> tuple[Any, Any]:
            return await self._handle(function.name, args, flow_manager)

        params = function.parameters
        properties = dict(params.get("properties") or {})
        # Flows passes this `properties` object on to the schema it builds: an `exact_schemas`
        # service's adapter finds the whole schema by it.
        remember_exact(properties, params)
        return FlowsFunctionSchema(
            name=function.name,
            description=function.description,
            properties=properties,
            required=list(params.get("required") or []),
            handler=handler,
            # Switchboard's side-effect policy decides what an interruption aborts.
            cancel_on_interruption=True,
        )

    async def _handle(self, name: str, args: FlowArgs, flow_manager: FlowManager) -> tuple[Any, Any]:
        fc = f"flows_{name}-{secrets.token_hex(8)}"
        task = asyncio.ensure_future(self.call.invoke(fc, name, dict(args), response_id=fc))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            late = asyncio.create_task(self._interrupted(name, fc, task, flow_manager))
            self._background.add(late)
            late.add_done_callback(self._background.discard)
            raise
        except SwitchboardError as e:
            return _failed(name, "tool_execution_failed", f"Switchboard did not answer: {e}"), None
        return await self._carry_out(name, result, flow_manager)

    async def _interrupted(
        self, name: str, fc: str, task: asyncio.Future[InvocationResult], flow_manager: FlowManager
    ) -> None:
        """The caller interrupted: Switchboard's policy decides; a write's real answer is added to
        the context, since Pipecat has settled the call as cancelled."""
        try:
            await self.call.cancel_response(fc)
            result = await task
        except SwitchboardError:
            return
        if result.ok:
            note: LLMContextMessage = {
                "role": "developer",
                "content": f"`{name}` completed although the caller interrupted; its result: {result.output}",
            }
            await flow_manager.worker.queue_frame(LLMMessagesAppendFrame(messages=[note], run_llm=False))

    async def _carry_out(self, name: str, result: InvocationResult, flow_manager: FlowManager) -> tuple[Any, Any]:
        # Pipecat puts the result in the context as JSON: hand it the answer's value.
        text = result.output if result.handoff is None else handed_off(result.output, result.handoff)
        try:
            output: Any = json.loads(text)
        except ValueError:
            output = text
        if result.transfer is not None:
            try:
                if self._on_transfer is None:
                    raise RuntimeError("this flow has no transfer handler (on_transfer)")
                await self._on_transfer(flow_manager, result.transfer)
            except Exception as e:  # noqa: BLE001 (the model must hear that it failed, whatever failed)
                output = _failed(
                    name,
                    "call_transfer_failed",
                    f"The transfer to {result.transfer.target_uri} failed ({e}); go on without transferring.",
                )
        if result.hangup is not None:
            await self._on_hangup(flow_manager, result.hangup)
            return output, NO_RESPONSE
        if result.handoff is not None:
            handoff = result.handoff
            next_node = await self._on_handoff(handoff) if self._on_handoff else await self.node()
            return output, next_node
        return output, None
