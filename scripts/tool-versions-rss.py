#!/usr/bin/env python3
"""How a server's memory grows with the tool versions it compiles.

Starts `switchboard serve --demo` on loopback (a fresh SQLite file in a temporary directory),
saves VERSIONS distinct versions of one large tool (about BYTES long, HOLES template holes that
go through the template engine, each version's holes different), tests each once with
`POST /v1/tools/{name}:test` (which compiles it), and prints the server's VmRSS every STEP
versions. Stops the server at the end. Loopback only; bounded by VERSIONS.

    scripts/tool-versions-rss.py target/release/switchboard --versions 300 --holes 1000
    scripts/tool-versions-rss.py target/release/switchboard --versions 30 --holes 1500 \
        --limits '{"max_template_holes": 2000}'
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def request(base, key, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def tool(version, holes, size):
    """A tool whose api_call body has `holes` engine expressions unique to `version`."""
    body = {
        f"f{i}": f"{{{{ params.text | replace('a', 'v{version}-{i}') }}}}" for i in range(holes)
    }
    definition = {
        "name": "big",
        "description": "Large tool. ",
        "parameters": [{"name": "text", "type": "string", "required": True}],
        "actions": [{"type": "api_call", "url": "https://example.com/big", "body": body}],
    }
    pad = size - len(json.dumps(definition))
    definition["description"] += f"v{version} " + "d" * max(pad, 0)
    return definition


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("binary")
    p.add_argument("--versions", type=int, default=300)
    p.add_argument("--holes", type=int, default=1000)
    p.add_argument("--bytes", type=int, default=500_000)
    p.add_argument("--step", type=int, default=10)
    p.add_argument("--cache-bytes", type=int, default=None, help="--tool-cache-bytes")
    p.add_argument("--limits", default=None, help="per-tool limits as JSON (serve --limits)")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        cmd = [
            os.path.abspath(args.binary), "serve", "--demo",
            "--listen", f"127.0.0.1:{port}",
            "--database", f"sqlite://{tmp}/sb.db",
            "--key-file", f"{tmp}/master.key",
        ]
        if args.cache_bytes is not None:
            cmd += ["--tool-cache-bytes", str(args.cache_bytes)]
        if args.limits is not None:
            with open(f"{tmp}/limits.json", "w") as f:
                f.write(args.limits)
            cmd += ["--limits", f"{tmp}/limits.json"]
        out = open(f"{tmp}/serve.log", "w+")
        server = subprocess.Popen(cmd, cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
        try:
            key = None
            for _ in range(600):
                out.seek(0)
                m = re.search(r"KEY=(sb_\S+)", out.read())
                if m:
                    key = m.group(1)
                    break
                if server.poll() is not None:
                    sys.exit("the server stopped:\n" + open(f"{tmp}/serve.log").read())
                time.sleep(0.1)
            if key is None:
                sys.exit("no demo key printed")
            base = f"http://127.0.0.1:{port}"
            time.sleep(0.5)
            start = rss_kib(server.pid)
            print(f"versions 0: VmRSS {start / 1024:.1f} MiB")
            for v in range(1, args.versions + 1):
                definition = tool(v, args.holes, args.bytes)
                method, path = ("POST", "/v1/tools") if v == 1 else ("PUT", "/v1/tools/big")
                status, answer = request(base, key, method, path, definition)
                if status not in (200, 201):
                    print(f"version {v}: {status} {json.dumps(answer)[:600]}")
                    return
                status, answer = request(
                    base, key, "POST", "/v1/tools/big:test", {"params": {"text": "banana"}}
                )
                if status != 200:
                    print(f"test of version {v}: {status} {json.dumps(answer)[:600]}")
                    return
                if v % args.step == 0:
                    now = rss_kib(server.pid)
                    print(
                        f"versions {v}: VmRSS {now / 1024:.1f} MiB "
                        f"(+{(now - start) / 1024:.1f} MiB)",
                        flush=True,
                    )
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    main()
