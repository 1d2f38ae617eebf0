"""LiveKit Agents (`livekit-agents` 1.8; 2.0 with the limits the README names) adapter: a call's
Switchboard functions as LiveKit tools.

    call = await sb.start_call(agent="assistant", user={"id": "u_42"})
    tools = SwitchboardTools(call)
    await session.start(Agent(instructions=await call.instructions(), tools=tools.tools()), room=ctx.room)

On LiveKit 2.0, whose agents keep the instructions they were built with, the instructions follow
the call through a dynamic instructions function instead:

    agent = Agent(instructions="", tools=tools.tools())
    agent.instructions(tools.instructions)

The functions are a LiveKit toolset that LiveKit reads anew for each generation, so a handoff
takes effect at once: the model's next step in the same turn has the new agent's functions (and
instructions). Each function is a raw-schema function tool that forwards LiveKit's function
call id (our `function_call_id`, so LiveKit's own dedup is not needed) and its speech id (our
`response_id`). When that speech is interrupted, the response's tools are cancelled by
Switchboard's policy (read tools aborted, write tools finish and their answer is delivered). A
transfer answer is carried out with LiveKit's SIP transfer (REFER), a hang-up answer deletes the
room after the goodbye, a handoff answer swaps the agent's Switchboard tools and instructions,
and the model reads which agent now handles the call. A tool's `messages` are spoken with
LiveKit's means: `start` with `session.say` as it starts, `delayed` with
`RunContext.with_filler` once the session has been idle `delayed_after_ms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from livekit import api, rtc
from livekit.agents import Agent, RunContext, get_job_context, llm
from livekit.agents.llm import RawFunctionTool, function_tool

from .client import Call
from .errors import SwitchboardError
from .types import Function, Hangup, InvocationResult, Messages, Transfer, handed_off

# Quoted: LiveKit 2.0's `RunContext` takes two type parameters, and these aliases are made at import.
TransferHandler = Callable[["RunContext[Any]", Transfer], Awaitable[None]]
HangupHandler = Callable[["RunContext[Any]", Hangup], Awaitable[None]]

logger = logging.getLogger(__name__)


def _failed(tool: str, code: str, message: str) -> str:
    return json.dumps({"ok": False, "error": code, "tool": tool, "message": message})


class SwitchboardTools:
    """The tools of a Switchboard call's active agent, for a LiveKit `Agent`.

    `participant_identity` names the SIP participant to transfer (by default the room's first
    SIP participant). `on_transfer` / `on_hangup` replace how transfers and hang-ups are carried
    out; by default LiveKit's server API does them (`TransferSIPParticipant`, `DeleteRoom`).
    """

    def __init__(
        self,
        call: Call,
        *,
        participant_identity: str | None = None,
        on_transfer: TransferHandler | None = None,
        on_hangup: HangupHandler | None = None,
    ) -> None:
        self.call = call
        self.participant_identity = participant_identity
        self._on_transfer = on_transfer or self._sip_transfer
        self._on_hangup = on_hangup or self._delete_room
        # The tools of the functions last read (`_current`), kept while the active agent's
        # toolset is the same object, so that LiveKit sees the same tools in every generation.
        self._built: tuple[object, list[llm.Tool | llm.Toolset]] | None = None
        self._instructions: tuple[str, str] | None = None
        # Whether LiveKit renders `instructions` (2.0's dynamic instructions function).
        self._instructions_rendered = False
        self.toolset = _Functions(self)
        """The call's active agent's functions as one LiveKit toolset (what `tools()` holds)."""
        # Hang-ups wait for their speech in the background; kept so they are not collected.
        self._background: set[asyncio.Task[None]] = set()

    def tools(self) -> list[llm.Tool | llm.Toolset]:
        """The call's functions for `Agent(tools=...)`: one toolset whose tools are the active
        agent's functions as they are when LiveKit reads them (each generation), so a handoff
        changes them at once."""
        return [self.toolset]

    async def instructions(self, context: Any = None) -> str:
        """The call's active agent's instructions (asked once per agent). On LiveKit 2.0 register
        it as the agent's dynamic instructions (`agent.instructions(tools.instructions)`), which
        LiveKit renders for each generation; `context` is its `RunContext`, unused."""
        if context is not None:
            self._instructions_rendered = True
        agent = self.call.agent
        if self._instructions is None or self._instructions[0] != agent or not agent:
            text = await self.call.instructions()
            self._instructions = (self.call.agent, text)
        return self._instructions[1]

    def _current(self) -> list[llm.Tool | llm.Toolset]:
        toolset = self.call.toolset
        if self._built is None or self._built[0] is not toolset:
            self._built = (toolset, [self._tool(f) for f in self.call.functions])
        return self._built[1]

    def _tool(self, function: Function) -> RawFunctionTool[Any, Any]:
        async def forward(raw_arguments: dict[str, Any], context: RunContext[Any]) -> str:
            return await self._invoke(function.name, raw_arguments, context)

        return function_tool(
            forward,
            raw_schema={
                "name": function.name,
                "description": function.description,
                "parameters": function.parameters,
            },
        )

    async def _invoke(self, name: str, arguments: dict[str, Any], context: RunContext[Any]) -> str:
        speech = context.speech_handle
        fc = context.function_call
        task = asyncio.ensure_future(
            self.call.invoke(fc.call_id, name, fc.arguments or json.dumps(arguments), response_id=speech.id)
        )
        try:
            messages = await self._messages(name)
            if messages is not None and messages.start:
                context.session.say(messages.start)
            filler = (
                context.with_filler(messages.delayed, delay=messages.delayed_after_ms / 1000)
                if messages is not None and messages.delayed
                else contextlib.nullcontext()
            )
            async with filler:
                await speech.wait_if_not_interrupted([task])
            if speech.interrupted and not task.done():
                # Our policy decides: reads are cancelled, writes finish and answer for real.
                await self.call.cancel_response(speech.id)
            result = await task
        except SwitchboardError as e:
            return _failed(name, "tool_execution_failed", f"Switchboard did not answer: {e}")
        return await self._carry_out(name, result, context)

    async def _messages(self, name: str) -> Messages | None:
        try:
            return await self.call.messages(name)
        except SwitchboardError:
            return None  # no filler is better than no answer

    async def _carry_out(self, name: str, result: InvocationResult, context: RunContext[Any]) -> str:
        output = result.output
        if result.handoff is not None:
            await self._swap(context.session.current_agent)
            output = handed_off(output, result.handoff)
        if result.transfer is not None:
            try:
                await self._on_transfer(context, result.transfer)
            except Exception as e:  # noqa: BLE001 (the model must hear that it failed, whatever failed)
                output = _failed(
                    name,
                    "call_transfer_failed",
                    f"The transfer to {result.transfer.target_uri} failed ({e}); go on without transferring.",
                )
        if result.hangup is not None:
            task = asyncio.create_task(self._hang_up_after_speech(context, result.hangup))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return output

    async def _swap(self, agent: Agent) -> None:
        """The new active agent's functions are already the toolset's; its instructions go to
        `agent` (LiveKit 1.8's `update_instructions`; on 2.0 the registered `instructions`
        function renders them), and a realtime model is sent the tools (`update_tools`, 1.8)."""
        update_instructions = getattr(agent, "update_instructions", None)
        if update_instructions is not None:
            await update_instructions(await self.instructions())
        elif not self._instructions_rendered:
            logger.warning(
                "call %s moved to agent %r, but this LiveKit Agent cannot change its instructions: "
                "register tools.instructions as its instructions function (agent.instructions(tools.instructions))",
                self.call.id,
                self.call.agent,
            )
        update_tools = getattr(agent, "update_tools", None)
        if update_tools is not None:
            # The same tools: LiveKit sends them to a realtime model's session.
            await update_tools(list(agent.tools))

    async def _hang_up_after_speech(self, context: RunContext[Any], hangup: Hangup) -> None:
        await context.speech_handle.wait_for_playout()
        if hangup.message:
            await context.session.say(hangup.message, allow_interruptions=False)
        await self._on_hangup(context, hangup)

    async def _sip_transfer(self, context: RunContext[Any], transfer: Transfer) -> None:
        job = get_job_context()
        identity = self.participant_identity or next(
            (
                p.identity
                for p in job.room.remote_participants.values()
                if p.kind == rtc.ParticipantKind.PARTICIPANT_KIND_SIP
            ),
            None,
        )
        if identity is None:
            raise RuntimeError("no SIP participant in the room to transfer (pass participant_identity)")
        await job.api.sip.transfer_sip_participant(
            api.TransferSIPParticipantRequest(
                room_name=job.room.name,
                participant_identity=identity,
                transfer_to=transfer.target_uri,
            )
        )

    async def _delete_room(self, context: RunContext[Any], hangup: Hangup) -> None:
        job = get_job_context()
        await job.api.room.delete_room(api.DeleteRoomRequest(room=job.room.name))


class _Functions(llm.Toolset):
    """The functions of a call's active agent as a LiveKit toolset: LiveKit reads a toolset's
    `tools` for each generation, so these are the active agent's when it does."""

    def __init__(self, owner: SwitchboardTools) -> None:
        self._owner = owner
        super().__init__(id=f"switchboard_{owner.call.id}")

    @property
    def tools(self) -> Sequence[llm.Tool | llm.Toolset]:
        return self._owner._current()
