"""What the server answers, as typed values."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class Function:
    """One function as a model sees it: name, description and JSON Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]

    @classmethod
    def from_realtime(cls, tool: dict[str, Any]) -> Function:
        """From one entry of an OpenAI Realtime format toolset (`{"type": "function", ...}`)."""
        return cls(
            name=str(tool.get("name", "")),
            description=str(tool.get("description") or ""),
            parameters=dict(tool.get("parameters") or {"type": "object", "properties": {}}),
        )


def functions_of(toolset: Any) -> list[Function]:
    """The functions of a toolset in OpenAI Realtime format (`{"tools": [...], ...}`)."""
    if not isinstance(toolset, dict):
        return []
    tools = toolset.get("tools") or []
    return [
        Function.from_realtime(t)
        for t in tools
        if isinstance(t, dict) and t.get("type", "function") == "function"
    ]


@dataclass(frozen=True)
class Messages:
    """What a tool has the agent say while it runs: `start` as it starts, `delayed` once when
    it is still running after `delayed_after_ms`."""

    start: str | None = None
    delayed: str | None = None
    delayed_after_ms: int = 1500

    @classmethod
    def from_definition(cls, definition: Any) -> Messages | None:
        """From a tool definition (`GET /v1/tools/{name}`); None when it has no messages."""
        if not isinstance(definition, dict) or not isinstance(definition.get("messages"), dict):
            return None
        m = definition["messages"]
        after = m.get("delayed_after_ms", definition.get("delayed_after_ms", 1500))
        start, delayed = m.get("start"), m.get("delayed")
        return cls(
            start=start if isinstance(start, str) else None,
            delayed=delayed if isinstance(delayed, str) else None,
            delayed_after_ms=after if isinstance(after, int) else 1500,
        )


@dataclass(frozen=True)
class Transfer:
    """Transfer the call (SIP REFER) to `target_uri`: the voice stack carries it out."""

    target_uri: str


@dataclass(frozen=True)
class Hangup:
    """Say `message` (if any), then end the call: the voice stack carries it out."""

    message: str | None = None


CallAction = Union[Transfer, Hangup]


def _action(raw: Any) -> CallAction | None:
    if not isinstance(raw, dict):
        return None
    if raw.get("type") == "transfer" and isinstance(raw.get("target_uri"), str):
        return Transfer(target_uri=raw["target_uri"])
    if raw.get("type") == "hangup":
        message = raw.get("message")
        return Hangup(message=message if isinstance(message, str) else None)
    return None


@dataclass(frozen=True)
class Handoff:
    """The call moved to another agent: give the model `functions` (and the agent's instructions)."""

    agent: str
    reason: str | None
    message: str | None
    toolset: dict[str, Any]

    @property
    def functions(self) -> list[Function]:
        return functions_of(self.toolset)


def handed_off(output: str, handoff: Handoff) -> str:
    """A handoff answer's `output` as the model is to read it: it says which agent now handles
    the call (`"Transferred to agent 'billing'."`, the answer's `message` if it has one kept
    before it) and names it in `handoff` (`agent`, `reason`)."""
    note = f"Transferred to agent '{handoff.agent}'."
    try:
        value = json.loads(output)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return f"{output} {note}" if output.strip() else note
    said = value.get("message")
    value["message"] = f"{said} {note}" if isinstance(said, str) and said.strip() else note
    value["handoff"] = {"agent": handoff.agent, "reason": handoff.reason}
    return json.dumps(value)


@dataclass(frozen=True)
class InvocationResult:
    """The answer to one function call. `output` is the text to give the model, always."""

    function_call_id: str
    ok: bool
    error: str | None
    output: str
    result: Any
    actions: list[CallAction] = field(default_factory=list)
    handoff: Handoff | None = None
    duplicate_of: str | None = None
    interrupted: bool = False
    replayed: bool = False

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> InvocationResult:
        handoff = body.get("handoff")
        actions = [a for a in (_action(r) for r in body.get("actions") or []) if a is not None]
        return cls(
            function_call_id=str(body.get("function_call_id", "")),
            ok=bool(body.get("ok")),
            error=body.get("error"),
            output=str(body.get("output", "")),
            result=body.get("result"),
            actions=actions,
            handoff=Handoff(
                agent=str(handoff.get("agent", "")),
                reason=handoff.get("reason"),
                message=handoff.get("message"),
                toolset=handoff.get("toolset") or {},
            )
            if isinstance(handoff, dict)
            else None,
            duplicate_of=body.get("duplicate_of"),
            interrupted=bool(body.get("interrupted")),
            replayed=bool(body.get("replayed")),
        )

    @property
    def transfer(self) -> Transfer | None:
        return next((a for a in self.actions if isinstance(a, Transfer)), None)

    @property
    def hangup(self) -> Hangup | None:
        return next((a for a in self.actions if isinstance(a, Hangup)), None)


@dataclass(frozen=True)
class CallRecord:
    """A call as `GET /v1/calls/{id}` shows it: status, context and invocation records."""

    call_id: str
    agent: str
    status: str
    context: dict[str, Any]
    invocations: list[dict[str, Any]]
    invocations_total: int

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> CallRecord:
        return cls(
            call_id=str(body.get("call_id", "")),
            agent=str(body.get("agent", "")),
            status=str(body.get("status", "")),
            context=body.get("context") or {},
            invocations=list(body.get("invocations") or []),
            invocations_total=int(body.get("invocations_total") or 0),
        )
