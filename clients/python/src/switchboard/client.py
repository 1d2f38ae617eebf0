"""The HTTP client: calls, invocations, cancellation, toolsets and records, over `httpx`."""

from __future__ import annotations

import asyncio
import json
import random
from types import TracebackType
from typing import Any, Literal, TypedDict
from urllib.parse import quote

import httpx

from .errors import NotFound, SwitchboardError, TransportError, error_for_status
from .trace import trace_headers
from .types import CallRecord, Function, InvocationResult, Messages, functions_of

Format = Literal["openai-realtime", "openai-chat", "openai-responses", "anthropic", "mcp"]


class McpParams(TypedDict):
    """A call's MCP endpoint and the headers to send there (`Call.mcp_params`)."""

    url: str
    headers: dict[str, str]


# Statuses worth another try for a request that is safe to repeat.
_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# Error bodies are read up to this size; the rest is not needed to name the error.
_MAX_ERROR_BODY = 64 * 1024
# Tools whose messages a call remembers; past it the memory starts over.
_MAX_CACHED_MESSAGES = 256


def _seg(value: str) -> str:
    """One path segment, escaped (ids are the caller's own and may hold anything)."""
    return quote(value, safe="")


class Switchboard:
    """An async client for one Switchboard tenant (its API key).

    Use it as `async with Switchboard(url, key) as sb:`, or call `aclose()` when done.
    Requests that are safe to repeat (reads, invocations — the server answers a repeated
    `function_call_id` with its first answer —, cancels and ends) are retried on connection
    errors, timeouts and 408/425/429/5xx, with backoff, up to `retries` more times.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        invoke_timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 0.2,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"Switchboard base_url {base_url!r} must start with http:// or https://, e.g. http://127.0.0.1:8080"
            )
        if not api_key:
            raise ValueError("Switchboard api_key is empty: pass a tenant key (sb_<tenant>_...)")
        self.base_url = base_url.rstrip("/")
        self._key = api_key
        self.timeout = timeout
        # An invocation waits for its tool (up to the tool's deadline, 20 s by default).
        self.invoke_timeout = invoke_timeout
        self.retries = max(0, min(retries, 10))
        self.backoff = backoff
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)

    def __repr__(self) -> str:
        # Never the key.
        return f"Switchboard({self.base_url!r})"

    async def __aenter__(self) -> Switchboard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One API request; the parsed JSON answer, or a typed exception."""
        url = f"{self.base_url}{path}"
        headers = {**(headers or {}), "Authorization": f"Bearer {self._key}"}
        attempts = 1 + self.retries
        last: Exception | None = None
        tried = 0
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self.backoff * (2 ** (attempt - 1)) * (0.5 + random.random()))
            tried += 1
            try:
                resp = await self._http.request(
                    method,
                    url,
                    json=body,
                    params=params,
                    headers=headers,
                    timeout=timeout or self.timeout,
                )
            except httpx.TransportError as e:
                last = e
                # A connection never made sent nothing: safe to try again whatever the request.
                if idempotent or isinstance(e, httpx.ConnectError):
                    continue
                break
            if resp.status_code < 400:
                if not resp.content:
                    return None
                try:
                    return resp.json()
                except ValueError as e:
                    raise SwitchboardError(
                        f"{method} {path}: {self.base_url} answered {resp.status_code} with a body that is "
                        "not JSON; is base_url a Switchboard server (not a proxy's page)?"
                    ) from e
            err = self._error(resp, method, path)
            if idempotent and resp.status_code in _RETRY_STATUSES and attempt + 1 < attempts:
                last = err
                continue
            raise err
        if isinstance(last, SwitchboardError):
            raise last
        raise TransportError(
            f"{method} {path}: no answer from Switchboard at {self.base_url} after {tried} "
            f"attempt(s) ({type(last).__name__}: {last}); check that the server runs and the URL is right"
        ) from last

    @staticmethod
    def _error(resp: httpx.Response, method: str, path: str) -> SwitchboardError:
        code, message, details = "http_error", resp.reason_phrase, None
        try:
            envelope = json.loads(resp.content[:_MAX_ERROR_BODY])
            err = envelope.get("error") if isinstance(envelope, dict) else None
            if isinstance(err, dict):
                code = str(err.get("code") or code)
                message = str(err.get("message") or message)
                details = err.get("details")
        except ValueError:
            pass
        return error_for_status(resp.status_code, code, message, details, method=method, path=path)

    async def toolset(
        self, agent: str, *, format: Format = "openai-realtime", strict: bool = False
    ) -> dict[str, Any]:
        """An agent's toolset (`{tools, tool_choice}`) in one provider's format."""
        params: dict[str, Any] = {"format": format}
        if strict:
            params["strict"] = "true"
        result: dict[str, Any] = await self.request(
            "GET", f"/v1/agents/{_seg(agent)}/toolset", params=params, idempotent=True
        )
        return result

    async def functions(self, agent: str) -> list[Function]:
        """An agent's functions (name, description, JSON Schema parameters)."""
        return functions_of(await self.toolset(agent))

    async def messages(self, tool: str) -> Messages | None:
        """What a tool has the agent say while it runs, as its current version has it (asked
        anew each time; `Call.messages` remembers them for one call); None for a tool without
        them, or one that is not a tenant tool (transfer, MCP)."""
        try:
            view = await self.request("GET", f"/v1/tools/{_seg(tool)}", idempotent=True)
        except NotFound:
            view = None
        return Messages.from_definition(view.get("definition") if isinstance(view, dict) else None)

    async def agent(self, name: str) -> dict[str, Any]:
        """An agent's definition (`instructions`, `tools`, `handoffs`, ...)."""
        result: dict[str, Any] = await self.request(
            "GET", f"/v1/agents/{_seg(name)}", idempotent=True
        )
        return result

    async def start_call(
        self,
        *,
        agent: str | None = None,
        call_id: str | None = None,
        user: dict[str, Any] | None = None,
        from_number: str | None = None,
        to_number: str | None = None,
    ) -> Call:
        """Starts a call (with the tenant's default agent when `agent` is None)."""
        body: dict[str, Any] = {}
        for key, value in (
            ("agent", agent),
            ("call_id", call_id),
            ("user", user),
            ("from", from_number),
            ("to", to_number),
        ):
            if value is not None:
                body[key] = value
        # Not retried past a connection error: a second start of the same id would be a 409.
        started = await self.request("POST", "/v1/calls", body=body, idempotent=False)
        return Call(
            self,
            str(started["call_id"]),
            str(started["agent"]),
            started.get("toolset") or {},
        )

    def call(self, call_id: str, agent: str = "") -> Call:
        """A handle on a call started elsewhere (e.g. by another process)."""
        return Call(self, call_id, agent, {})


class Call:
    """One live call: invoke its tools, cancel an interrupted response's tools, end it.

    `async with await sb.start_call(...) as call:` ends the call when the block is left, also
    when it raised or was cancelled, so a crashed agent does not leave the call open.
    """

    def __init__(
        self, client: Switchboard, call_id: str, agent: str, toolset: dict[str, Any]
    ) -> None:
        self.client = client
        self.id = call_id
        self.agent = agent
        """The active agent, as the last answer left it (a handoff changes it)."""
        self.toolset = toolset
        """The active agent's toolset in OpenAI Realtime format."""
        self._messages: dict[str, Messages | None] = {}

    def __repr__(self) -> str:
        return f"Call({self.id!r}, agent={self.agent!r})"

    async def __aenter__(self) -> Call:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Shielded: a second cancel of a cancelled agent must not cut the end short. Ending an
        # ended call answers its record, so an `end()` in the block is harmless.
        try:
            await asyncio.shield(self.end())
        except SwitchboardError as e:
            if exc is None:
                raise
            # The block's own error is the one to see; the end's failure goes with it.
            add_note = getattr(exc, "add_note", None)
            if add_note is not None:
                add_note(f"and the call {self.id!r} could not be ended: {e}")

    @property
    def functions(self) -> list[Function]:
        """The active agent's functions."""
        return functions_of(self.toolset)

    @property
    def mcp_url(self) -> str:
        """The call-scoped MCP endpoint (`/v1/calls/{id}/mcp`), for stacks that prefer MCP.

        Every tool call made there, by an MCP client of either protocol revision, is an
        invocation of this call and shares its context. Send the same API key as
        `Authorization: Bearer <key>`.
        """
        return f"{self.client.base_url}/v1/calls/{_seg(self.id)}/mcp"

    def mcp_params(self) -> McpParams:
        """What an MCP client needs to reach this call's tools: `{"url": mcp_url, "headers":
        {"Authorization": "Bearer <key>"}}`, the shape the frameworks' streamable-HTTP MCP
        clients take (the Agents SDK's `MCPServerStreamableHttp(params=...)`, LiveKit's
        `mcp.MCPServerHTTP(**...)`, the MCP SDK's `StreamableHttpParameters(**...)`).

        It holds the API key: hand it to the MCP client only, never to a log.
        """
        return {"url": self.mcp_url, "headers": {"Authorization": f"Bearer {self.client._key}"}}

    async def invoke(
        self,
        function_call_id: str,
        name: str,
        arguments: str | dict[str, Any] | None = None,
        *,
        response_id: str | None = None,
    ) -> InvocationResult:
        """Runs one function call and waits for its answer (`output` goes to the model).

        `arguments` is the model's arguments text as it produced it (or an object).
        `response_id` names the model response it belongs to, for `cancel_response`. The active
        OpenTelemetry span's trace context (`traceparent`, `tracestate`) goes along, if any.
        """
        body: dict[str, Any] = {"function_call_id": function_call_id, "name": name}
        if isinstance(arguments, dict):
            body["arguments"] = arguments
        elif arguments is not None and arguments.strip():
            body["arguments_json"] = arguments
        if response_id is not None:
            body["response_id"] = response_id
        raw = await self.client.request(
            "POST",
            f"/v1/calls/{_seg(self.id)}/invocations",
            body=body,
            idempotent=True,
            timeout=self.client.invoke_timeout,
            headers=trace_headers(),
        )
        result = InvocationResult.from_json(raw)
        if result.handoff is not None:
            self.agent = result.handoff.agent
            self.toolset = result.handoff.toolset
        return result

    async def messages(self, tool: str) -> Messages | None:
        """What a tool has the agent say while it runs (`Switchboard.messages`), asked on the
        call's first use of the tool and remembered for the rest of the call: a call keeps the
        tool versions it started with, and the next call sees a changed tool's messages."""
        if tool not in self._messages:
            messages = await self.client.messages(tool)
            if len(self._messages) >= _MAX_CACHED_MESSAGES:
                self._messages.clear()
            self._messages[tool] = messages
        return self._messages[tool]

    async def cancel_response(self, response_id: str) -> None:
        """The caller interrupted `response_id`: its read tools are cancelled, its write tools
        finish (their answers say so), its transfers and hang-ups are not carried out."""
        await self.client.request(
            "POST",
            f"/v1/calls/{_seg(self.id)}/responses/{_seg(response_id)}/cancel",
            idempotent=True,
        )

    async def toolset_as(self, format: Format, *, strict: bool = False) -> dict[str, Any]:
        """The active agent's toolset as the server has it now, in one provider's format."""
        if not self.agent:
            self.agent = (await self.record()).agent
        return await self.client.toolset(self.agent, format=format, strict=strict)

    async def functions_now(self) -> list[Function]:
        """The active agent's functions as the server has them now."""
        if not self.agent:
            self.agent = (await self.record()).agent
        return await self.client.functions(self.agent)

    async def instructions(self) -> str:
        """The active agent's instructions."""
        if not self.agent:
            self.agent = (await self.record()).agent
        return str((await self.client.agent(self.agent)).get("instructions", ""))

    async def record(self) -> CallRecord:
        """The call's status, context and invocation records."""
        raw = await self.client.request("GET", f"/v1/calls/{_seg(self.id)}", idempotent=True)
        return CallRecord.from_json(raw)

    async def end(self) -> CallRecord:
        """Ends the call (what still runs is cancelled) and returns its final record."""
        raw = await self.client.request("DELETE", f"/v1/calls/{_seg(self.id)}", idempotent=True)
        return CallRecord.from_json(raw)
