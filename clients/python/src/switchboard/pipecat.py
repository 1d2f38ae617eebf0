"""Pipecat (`pipecat-ai` 1.14) adapter: a call's Switchboard functions on a Pipecat LLM service.

    call = await sb.start_call(agent="assistant")
    tools = SwitchboardTools(call)
    context = LLMContext(messages=[{"role": "system", "content": await call.instructions()}],
                         tools=tools.register(llm))

Each function is registered with `register_function` and its schema goes in the context; a call
forwards Pipecat's `tool_call_id` as our `function_call_id` and answers through the result
callback. An interruption cancels the handler as Pipecat does, and cancels the call's response in
Switchboard, whose side-effect policy decides: a read tool is aborted, a write tool finishes and
its real answer is added to the context (so the model knows an order exists). A transfer answer
goes to `on_transfer` (e.g. `daily_sip_refer`), a hang-up answer speaks the goodbye
(`TTSSpeakFrame`) and ends the pipeline (`EndWorkerFrame`), a handoff swaps the context's tools, the
registered functions and the system instructions (the model reads which agent now handles the
call). A tool's `messages` are spoken with
`TTSSpeakFrame`s: `start` as it starts, `delayed` once after `delayed_after_ms`.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import EndWorkerFrame, TTSSpeakFrame
from pipecat.processors.aggregators.llm_context import LLMContextMessage
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallParams, LLMService

from .client import Call
from .errors import SwitchboardError
from .types import Function, Hangup, InvocationResult, Transfer, handed_off

TransferHandler = Callable[[FunctionCallParams, Transfer], Awaitable[None]]
HangupHandler = Callable[[FunctionCallParams, Hangup], Awaitable[None]]


class ExactFunctionSchema(FunctionSchema):
    """A function's schema that gives Pipecat's adapters its whole JSON Schema.

    Pipecat's `FunctionSchema` keeps only `properties` and `required`, so `additionalProperties:
    false` would be lost and the model told that extra arguments are fine, which Switchboard then
    refuses. The adapters that build a tool from `to_default_dict()` (OpenAI Chat Completions and
    Responses, and Gemini, which drops what it cannot take) send this whole schema.
    """

    def __init__(self, function: Function) -> None:
        params = function.parameters
        super().__init__(
            name=function.name,
            description=function.description,
            properties=dict(params.get("properties") or {}),
            required=list(params.get("required") or []),
        )
        self._parameters = params

    def to_default_dict(self) -> dict[str, Any]:
        d = super().to_default_dict()
        d["parameters"] = {**d["parameters"], **self._parameters}
        return d


# The whole parameters schema of functions whose Pipecat schema keeps only `properties` and
# `required` (Pipecat Flows rebuilds a plain `FunctionSchema` from each function, passing its
# `properties` object along): found again by that object's identity. Bounded; the oldest go.
_EXACT: OrderedDict[int, tuple[dict[str, Any], dict[str, Any]]] = OrderedDict()
_MAX_EXACT = 4096


def remember_exact(properties: dict[str, Any], parameters: dict[str, Any]) -> None:
    """Remembers `parameters` as the whole schema of every function schema built on this very
    `properties` object, for the adapters of `exact_schemas` services."""
    _EXACT[id(properties)] = (properties, parameters)
    _EXACT.move_to_end(id(properties))
    while len(_EXACT) > _MAX_EXACT:
        _EXACT.popitem(last=False)


def _exact_parameters(function: FunctionSchema) -> dict[str, Any] | None:
    if isinstance(function, ExactFunctionSchema):
        return function._parameters
    known = _EXACT.get(id(function.properties))
    return known[1] if known is not None and known[0] is function.properties else None


def _with_parameters(tool: Any, exact: dict[str, dict[str, Any]]) -> Any:
    """`tool` (a provider's tool entry) with its parameters schema replaced by the exact one."""
    if not isinstance(tool, dict):
        return tool
    function = tool.get("function")
    if isinstance(function, dict):  # Chat Completions: {"type": "function", "function": {...}}
        name = function.get("name")
        if isinstance(name, str) and name in exact:
            return {**tool, "function": {**function, "parameters": exact[name]}}
        return tool
    name = tool.get("name")
    if isinstance(name, str) and name in exact:
        for key in ("parameters", "input_schema"):  # OpenAI Realtime and Responses; Anthropic
            if isinstance(tool.get(key), dict):
                return {**tool, key: exact[name]}
    return tool


class _ExactTools:
    """Mixed into a Pipecat LLM adapter: the tools it makes carry Switchboard's whole schemas."""

    def to_provider_tools_format(self, tools_schema: ToolsSchema) -> list[Any]:
        tools: list[Any] = super().to_provider_tools_format(tools_schema)  # type: ignore[misc]
        exact = {
            f.name: p for f in tools_schema.standard_tools if (p := _exact_parameters(f)) is not None
        }
        return [_with_parameters(t, exact) for t in tools] if exact else tools


Service = TypeVar("Service", bound=LLMService[Any])


def exact_schemas(service: type[Service]) -> type[Service]:
    """A subclass of the Pipecat LLM service class `service` whose adapter (`adapter_class`)
    sends Switchboard's functions with their whole JSON Schema, `additionalProperties: false`
    included, whatever the provider's format: `exact_schemas(AnthropicLLMService)(api_key=...)`.
    Needed for the adapters that build a tool from `properties` and `required` alone (OpenAI
    Realtime, Anthropic) and for Pipecat Flows, which rebuilds each function's schema."""
    base = service.adapter_class
    if base is None:
        from pipecat.adapters.llm.services.open_ai_adapter import OpenAILLMAdapter

        base = OpenAILLMAdapter
    adapter = type(f"Exact{base.__name__}", (_ExactTools, base), {"__module__": __name__})
    exact = type(f"Exact{service.__name__}", (service,), {"adapter_class": adapter, "__module__": __name__})
    return cast("type[Service]", exact)


def _failed(tool: str, code: str, message: str) -> str:
    return json.dumps({"ok": False, "error": code, "tool": tool, "message": message})


async def daily_sip_refer(params: FunctionCallParams, transfer: Transfer) -> None:
    """Transfers with Daily's transport: a `DailySIPReferFrame`, sent once the bot's current
    utterance has played (needs `pipecat-ai[daily]`)."""
    from pipecat.transports.daily.transport import DailySIPReferFrame

    await params.llm.push_frame(DailySIPReferFrame(settings={"toEndPoint": transfer.target_uri}))


async def speak_and_end(params: FunctionCallParams, hangup: Hangup) -> None:
    """Says the goodbye, then ends the pipeline (and so the call) after it has played."""
    if hangup.message:
        await params.llm.push_frame(TTSSpeakFrame(hangup.message))
    await params.llm.push_frame(EndWorkerFrame(), FrameDirection.UPSTREAM)


class SwitchboardTools:
    """The tools of a Switchboard call's active agent, for a Pipecat LLM service.

    `on_transfer` carries a transfer out (without one, the model is told the transfer failed);
    `on_hangup` a hang-up (by default `speak_and_end`).
    """

    def __init__(
        self,
        call: Call,
        *,
        on_transfer: TransferHandler | None = None,
        on_hangup: HangupHandler | None = None,
    ) -> None:
        self.call = call
        self._on_transfer = on_transfer
        self._on_hangup = on_hangup or speak_and_end
        self._registered: set[str] = set()
        # Answers that outlive their interrupted handler; kept so they are not collected.
        self._background: set[asyncio.Task[None]] = set()

    def schema(self) -> ToolsSchema:
        """The active agent's functions as Pipecat's tool schemas (for `LLMContext(tools=...)`)."""
        return ToolsSchema(standard_tools=[self._schema(f) for f in self.call.functions])

    @staticmethod
    def _schema(function: Function) -> FunctionSchema:
        return ExactFunctionSchema(function)

    def register(self, llm: LLMService[Any]) -> ToolsSchema:
        """Registers every function of the active agent on `llm`; returns their schemas."""
        for name in self._registered - {f.name for f in self.call.functions}:
            llm.unregister_function(name)
        for f in self.call.functions:
            llm.register_function(f.name, self._handle)
        self._registered = {f.name for f in self.call.functions}
        return self.schema()

    async def _handle(self, params: FunctionCallParams) -> None:
        name = params.function_name
        # Pipecat's tool call id is our function call id, and (each call being cancelled on its
        # own by Pipecat on interruption) the response id we cancel.
        task = asyncio.ensure_future(
            self.call.invoke(params.tool_call_id, name, dict(params.arguments), response_id=params.tool_call_id)
        )
        try:
            result = await self._with_messages(params, task)
        except asyncio.CancelledError:
            late = asyncio.create_task(self._interrupted(params, task))
            self._background.add(late)
            late.add_done_callback(self._background.discard)
            raise
        except SwitchboardError as e:
            output = _failed(name, "tool_execution_failed", f"Switchboard did not answer: {e}")
        else:
            output = await self._carry_out(name, result, params)
        # Pipecat puts the result in the context as JSON: hand it the answer's value.
        try:
            value: Any = json.loads(output)
        except ValueError:
            value = output
        await params.result_callback(value)

    async def _with_messages(
        self, params: FunctionCallParams, task: asyncio.Future[InvocationResult]
    ) -> InvocationResult:
        """Waits for the answer, speaking the tool's `messages` (`TTSSpeakFrame`): `start` now,
        `delayed` once if it is still running after `delayed_after_ms`."""
        try:
            messages = await self.call.messages(params.function_name)
        except SwitchboardError:
            messages = None  # no filler is better than no answer
        if messages is None:
            return await asyncio.shield(task)
        if messages.start:
            await params.llm.push_frame(TTSSpeakFrame(messages.start))
        if messages.delayed:
            done, _ = await asyncio.wait({task}, timeout=messages.delayed_after_ms / 1000)
            if not done:
                await params.llm.push_frame(TTSSpeakFrame(messages.delayed))
        return await asyncio.shield(task)

    async def _interrupted(self, params: FunctionCallParams, task: asyncio.Future[InvocationResult]) -> None:
        """The caller interrupted: Switchboard's policy decides; a write's real answer is added to
        the context, since Pipecat has settled the call as cancelled."""
        try:
            await self.call.cancel_response(params.tool_call_id)
            result = await task
        except SwitchboardError:
            return
        if result.ok:
            params.context.add_message(
                {
                    "role": "developer",
                    "content": f"`{params.function_name}` (call {params.tool_call_id}) completed although "
                    f"the caller interrupted; its result: {result.output}",
                }
            )

    async def _carry_out(self, name: str, result: InvocationResult, params: FunctionCallParams) -> str:
        output = result.output
        if result.handoff is not None:
            await self._swap(params)
            output = handed_off(output, result.handoff)
        if result.transfer is not None:
            try:
                if self._on_transfer is None:
                    raise RuntimeError("this agent has no transfer handler (on_transfer)")
                await self._on_transfer(params, result.transfer)
            except Exception as e:  # noqa: BLE001 (the model must hear that it failed, whatever failed)
                output = _failed(
                    name,
                    "call_transfer_failed",
                    f"The transfer to {result.transfer.target_uri} failed ({e}); go on without transferring.",
                )
        if result.hangup is not None:
            await self._on_hangup(params, result.hangup)
        return output

    async def _swap(self, params: FunctionCallParams) -> None:
        """The new agent's functions and instructions replace the old ones in the context."""
        params.context.set_tools(self.register(params.llm))
        instructions = await self.call.instructions()
        messages = params.context.get_messages()
        system: LLMContextMessage = {"role": "system", "content": instructions}
        if messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
            params.context.set_messages([system, *messages[1:]])
        else:
            params.context.set_messages([system, *messages])
