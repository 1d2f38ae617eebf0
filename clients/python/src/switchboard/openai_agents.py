"""OpenAI Agents SDK (`openai-agents` 0.24) adapter: a call's Switchboard functions as
`FunctionTool`s, on a per-call copy of an `Agent` or a `RealtimeAgent`.

    call = await sb.start_call(agent="assistant")
    tools = SwitchboardTools(call)
    agent = await tools.agent(Agent(name="assistant"))  # a copy for this call

`agent(base)` copies `base` (`clone`) with the call's instructions and its functions beside
`base`'s own tools; `base` itself is never changed, so one `Agent` can serve many calls at once.
For a `RealtimeAgent`, `attach(session)` the `RealtimeSession` too:

    async with await RealtimeRunner(await tools.agent(realtime_agent)).run() as session:
        tools.attach(session)

Each tool forwards the SDK's tool call id as our `function_call_id` and the model's arguments
text as it came. When the caller interrupts, `cancel_pending()` (an attached session calls it on
the model's `audio_interrupted`) has Switchboard's side-effect policy decide what is aborted, and
every tool still answers; a cancelled run or a closed session cancels its calls' responses too.
A handoff answer gives the call's copy of the agent the new agent's Switchboard tools and
instructions (an attached session's model is sent them before the tool's output), and the model
reads which agent now handles the call; transfer and hang-up answers go to `on_transfer` /
`on_hangup` (the SDK has no telephony of its own: e.g. OpenAI's SIP call `refer` and `hangup`
endpoints).
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agents import Agent, FunctionTool, Tool
from agents.realtime import RealtimeAgent, RealtimeModelEvent, RealtimeModelListener, RealtimeSession
from agents.tool_context import ToolContext

from .client import Call
from .errors import SwitchboardError
from .types import Function, Hangup, InvocationResult, Transfer, handed_off

TransferHandler = Callable[[ToolContext[Any], Transfer], Awaitable[None]]
HangupHandler = Callable[[ToolContext[Any], Hangup], Awaitable[None]]
AnyAgent = TypeVar("AnyAgent", Agent[Any], RealtimeAgent[Any])

logger = logging.getLogger(__name__)


def _failed(tool: str, code: str, message: str) -> str:
    return json.dumps({"ok": False, "error": code, "tool": tool, "message": message})


class SwitchboardTools:
    """The tools of a Switchboard call's active agent as the Agents SDK's `FunctionTool`s."""

    def __init__(
        self,
        call: Call,
        *,
        on_transfer: TransferHandler | None = None,
        on_hangup: HangupHandler | None = None,
    ) -> None:
        self.call = call
        self._on_transfer = on_transfer
        self._on_hangup = on_hangup
        # Cancels of interrupted calls, sent after their tool task is gone.
        self._background: set[asyncio.Task[None]] = set()
        # Function calls on their way to Switchboard (bounded by the calls the model makes at once).
        self._pending: set[str] = set()
        # The realtime session whose model hears of handoffs (`attach`).
        self._session: RealtimeSession | None = None
        self._listener = _Interruptions(self)
        # The copies `agent()` made: the only agents a handoff changes.
        self._copies: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()

    async def agent(self, base: AnyAgent, **changes: Any) -> AnyAgent:
        """A copy of `base` (an `Agent` or a `RealtimeAgent`, `base.clone(...)`) for this call:
        the call's active agent's instructions, and its functions after `base`'s own tools
        (`changes` are passed to `clone` too, e.g. `model=`). A handoff changes this copy only;
        `base` is never changed, so it can serve other calls at the same time."""
        own: list[Tool] = [t for t in base.tools if not getattr(t, "_switchboard", False)]
        copy = base.clone(
            **{"instructions": await self.call.instructions(), **changes, "tools": [*own, *self.tools()]}
        )
        self._copies[id(copy)] = copy
        return copy

    def tools(self) -> list[Tool]:
        """One `FunctionTool` per function of the call's active agent, typed as `Agent(tools=...)`
        and `RealtimeAgent(tools=...)` take them."""
        return [self._tool(f) for f in self.call.functions]

    def _tool(self, function: Function) -> FunctionTool:
        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            return await self._invoke(function.name, ctx, arguments)

        tool = FunctionTool(
            name=function.name,
            description=function.description,
            params_json_schema=function.parameters,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )
        # Marks the tool as ours, so a handoff replaces only Switchboard's tools.
        tool._switchboard = True  # type: ignore[attr-defined]
        return tool

    async def _invoke(self, name: str, ctx: ToolContext[Any], arguments: str) -> str:
        fc = ctx.tool_call_id
        task = asyncio.ensure_future(self.call.invoke(fc, name, arguments, response_id=fc))
        self._pending.add(fc)
        task.add_done_callback(lambda _: self._pending.discard(fc))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            cancel = asyncio.create_task(self.call.cancel_response(fc))
            self._background.add(cancel)
            cancel.add_done_callback(self._background.discard)
            raise
        except SwitchboardError as e:
            return _failed(name, "tool_execution_failed", f"Switchboard did not answer: {e}")
        return await self._carry_out(name, result, ctx)

    def attach(self, session: RealtimeSession) -> None:
        """Ties these tools to a `RealtimeSession` (of a `RealtimeAgent` holding them): the
        model's `audio_interrupted` (the caller barged in) cancels the running calls in
        Switchboard, and a handoff answer updates the session's agent (`update_agent`), so the
        model has the new agent's tools and instructions when it reads the handoff's output."""
        self._session = session
        session.model.add_listener(self._listener)

    async def cancel_pending(self) -> None:
        """The caller interrupted (an attached `RealtimeSession` calls it on the model's
        `audio_interrupted`): the function calls still running are cancelled by Switchboard's
        policy, and each tool still answers, a read with `cancelled`, a write with its real
        result."""
        await asyncio.gather(*(self.call.cancel_response(fc) for fc in list(self._pending)))

    def _cancel_pending_soon(self) -> None:
        # In the background: the model's events (the caller's audio) must not wait on HTTP.
        task = asyncio.ensure_future(self._cancel_quietly())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _cancel_quietly(self) -> None:
        try:
            await self.cancel_pending()
        except SwitchboardError:
            # The calls then run to their end and the model hears their real answers.
            pass

    async def _carry_out(self, name: str, result: InvocationResult, ctx: ToolContext[Any]) -> str:
        output = result.output
        if result.handoff is not None:
            await self._hand_off(ctx.agent)
            output = handed_off(output, result.handoff)
        for action, handler, what in (
            (result.transfer, self._on_transfer, "transfer"),
            (result.hangup, self._on_hangup, "hang-up"),
        ):
            if action is None:
                continue
            try:
                if handler is None:
                    raise RuntimeError(f"no {what} handler is configured (on_{what.replace('-', '')})")
                await handler(ctx, action)  # type: ignore[arg-type]
            except Exception as e:  # noqa: BLE001 (the model must hear that it failed, whatever failed)
                code = "call_transfer_failed" if isinstance(action, Transfer) else "tool_execution_failed"
                output = _failed(name, code, f"The {what} failed ({e}); go on with the call.")
        return output

    async def _hand_off(self, agent: Any) -> None:
        """The call moved to another agent: this call's copy of the running agent gets its tools
        and instructions, and an attached session's model is sent them. An agent that is not a
        copy `agent()` made is the caller's and is not changed (a realtime session gets a copy)."""
        if agent is None:
            return
        copy = self._copies.get(id(agent))
        if copy is not None and copy is agent:
            own: list[Tool] = [t for t in copy.tools if not getattr(t, "_switchboard", False)]
            copy.tools = [*own, *self.tools()]
            copy.instructions = await self.call.instructions()
            current = copy
        elif self._session is not None and isinstance(agent, RealtimeAgent):
            current = await self.agent(agent)
        else:
            logger.warning(
                "call %s moved to agent %r, but the running agent is not this call's copy: its tools "
                "stay as they were (run the copy `await tools.agent(agent)` makes)",
                self.call.id,
                self.call.agent,
            )
            return
        if self._session is not None and isinstance(current, RealtimeAgent):
            await self._session.update_agent(current)


class _Interruptions(RealtimeModelListener):
    """Hears a realtime model's events beside its session: the caller barging in cancels."""

    def __init__(self, tools: SwitchboardTools) -> None:
        self._tools = tools

    async def on_event(self, event: RealtimeModelEvent) -> None:
        if event.type == "audio_interrupted":
            self._tools._cancel_pending_soon()
