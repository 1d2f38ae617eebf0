"""A real `switchboard serve` on loopback (temporary SQLite database) with a test tenant, and a
slow upstream HTTP server its tools call, for every test of the session.

The binary is `$SWITCHBOARD_BIN` (the Rust test that runs this suite sets it), else the
workspace's `target/debug/switchboard`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from switchboard import Switchboard

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Upstream:
    """A loopback HTTP server whose `/slow?ms=N` answers after N ms; it counts what reached it."""

    url: str
    hits: list[str] = field(default_factory=list)


@dataclass
class Server:
    base: str
    key: str
    upstream: Upstream


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api(base: str, key: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{base}{path}", data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 (loopback only)
        return json.loads(resp.read() or b"null")


@pytest.fixture(scope="session")
def upstream() -> Iterator[Upstream]:
    up = Upstream(url="")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            ms = 0
            if "ms=" in self.path:
                ms = int(self.path.split("ms=")[1].split("&")[0])
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            time.sleep(ms / 1000)
            up.hits.append(f"{self.command} {self.path}")
            body = json.dumps({"status": "done", "path": self.path}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass  # the caller gave up (a cancelled read tool): nothing to answer

        do_GET = _answer
        do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    up.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield up
    httpd.shutdown()
    httpd.server_close()


def _tools(upstream: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "save_meal",
            "description": "Log a meal the user consumed",
            "side_effect": "write",
            "parameters": [
                {"name": "meal_type", "type": "string", "enum": ["breakfast", "lunch", "dinner"], "required": True},
                {"name": "dishes", "type": "array", "items": {"type": "string"}, "required": True},
            ],
            "actions": [{"type": "context.set", "data": {"logged_meals[+]": "{{params}}"}}],
            "on_success": [{"type": "respond", "message": "I've logged your {{params.meal_type}}!"}],
        },
        {
            "name": "meals_so_far",
            "description": "The meals logged in this call",
            "side_effect": "read",
            "parameters": [],
            "actions": [{"type": "context.get", "paths": ["workflow.logged_meals"], "into": "result.meals"}],
        },
        {
            "name": "lookup_order",
            "description": "Look an order up (slow)",
            "side_effect": "read",
            "parameters": [{"name": "order_id", "type": "string", "required": True}],
            "actions": [
                {"type": "api_call", "method": "GET", "url": upstream + "/slow?ms=1500&lookup={{params.order_id}}",
                 "retry_count": 0, "response_path": "result.order"}
            ],
        },
        {
            "name": "place_order",
            "description": "Place an order (slow)",
            "side_effect": "write",
            "parameters": [{"name": "item", "type": "string", "required": True}],
            "actions": [
                {"type": "api_call", "method": "POST", "url": upstream + "/slow?ms=1500&order={{params.item}}",
                 "body": {"item": "{{params.item}}"}, "retry_count": 0},
                {"type": "context.set", "data": {"orders[+]": "{{params.item}}"}},
            ],
            "on_success": [{"type": "respond", "message": "Ordered {{params.item}}."}],
        },
        {
            "name": "check_stock",
            "description": "Check whether an item is in stock (slow; says so while it runs)",
            "side_effect": "read",
            "parameters": [{"name": "item", "type": "string", "required": True}],
            "messages": {"start": "Let me check the stock.", "delayed": "Still checking, one moment.",
                         "delayed_after_ms": 300},
            "actions": [
                {"type": "api_call", "method": "GET", "url": upstream + "/slow?ms=1500&stock={{params.item}}",
                 "retry_count": 0}
            ],
            "on_success": [{"type": "respond", "message": "{{params.item}} is in stock."}],
        },
        {
            "name": "transfer_to_sales",
            "description": "Transfer the caller to sales",
            "parameters": [],
            "actions": [{"type": "transfer", "target_uri": "sip:sales@example.com"}],
            "on_success": [{"type": "respond", "message": "Transferring you to sales."}],
        },
        {
            "name": "hang_up",
            "description": "End the call",
            "parameters": [],
            "actions": [{"type": "end_call", "message": "Goodbye!"}],
        },
        {
            "name": "to_billing",
            "description": "Hand the caller to billing",
            "parameters": [],
            "actions": [{"type": "handoff", "agent": "billing", "reason": "billing question"}],
        },
        {
            "name": "pay_bill",
            "description": "Pay the open bill",
            "side_effect": "write",
            "parameters": [{"name": "amount", "type": "number", "required": True}],
            "actions": [{"type": "context.set", "data": {"paid": "{{params.amount}}"}}],
            "on_success": [{"type": "respond", "message": "Paid."}],
        },
    ]


def _wait_ready(proc: subprocess.Popen[bytes], base: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as r:  # noqa: S310
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"`switchboard serve` did not become ready at {base}; its log:\n{log.read_text()}")


@pytest.fixture(scope="session")
def server(upstream: Upstream) -> Iterator[Server]:
    binary = os.environ.get("SWITCHBOARD_BIN") or str(REPO / "target" / "debug" / "switchboard")
    if not Path(binary).exists():
        raise RuntimeError(f"no switchboard binary at {binary}: run `cargo build -p switchboard-cli` or set SWITCHBOARD_BIN")
    tmp = Path(tempfile.mkdtemp(prefix="sb-py-"))
    log = tmp / "serve.log"
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "SWITCHBOARD_MASTER_KEY", "SWITCHBOARD_KEY_FILE", "SWITCHBOARD_LISTEN")}
    env.update(SWITCHBOARD_LOG="info", NO_COLOR="1")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [binary, "serve", "--database", f"sqlite://{tmp / 'sb.db'}", "--listen", f"127.0.0.1:{port}",
             "--key-file", str(tmp / "master.key"), "--log-format", "text", "--allow-private-network"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out, env=env,
        )
    try:
        _wait_ready(proc, base, log)
        admin = next(
            line.split("created the admin key", 1)[1].rsplit(": ", 1)[1].strip()
            for line in log.read_text().splitlines()
            if "created the admin key" in line
        )
        _api(base, admin, "POST", "/v1/tenants", {"id": "pytest"})
        key = _api(base, admin, "POST", "/v1/tenants/pytest/api-keys", {})["key"]
        for tool in _tools(upstream.url):
            _api(base, key, "POST", "/v1/tools", tool)
        _api(base, key, "PUT", "/v1/agents/billing", {
            "instructions": "You are billing. Take payments.",
            "tools": [{"tool": "pay_bill"}],
        })
        _api(base, key, "PUT", "/v1/agents/assistant", {
            "instructions": "You are the front desk.",
            "default": True,
            "handoffs": ["billing"],
            "tools": [{"tool": t} for t in
                      ("save_meal", "meals_so_far", "lookup_order", "place_order", "check_stock", "transfer_to_sales", "hang_up",
                       "to_billing")],
        })
        yield Server(base=base, key=key, upstream=upstream)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
async def sb(server: Server) -> AsyncIterator[Switchboard]:
    async with Switchboard(server.base, server.key) as client:
        yield client


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(6)}"
