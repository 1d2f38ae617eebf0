#!/usr/bin/env python3
"""What idle console timelines cost a server: the CPU of `switchboard serve` while N console
event streams follow one call that has R records and gets no new ones.

Starts the given binary on a temporary SQLite database (loopback only), makes a tenant, a tool
without effects, a call with R invocation records, signs in to the console (as many sessions as
the per-session bound needs), opens N streams of the call's timeline, waits for them to settle,
then reads the server's CPU time from /proc/<pid>/stat over the measuring window. Prints one
line per run. Stops everything it started.

    python3 scripts/console-streams-bench.py --binary target/release/switchboard \\
        --streams 100 --records 200 --seconds 60
"""

import argparse
import base64
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

TICKS = os.sysconf("SC_CLK_TCK")
STREAMS_PER_SESSION = 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, key=None, body=None, headers=None, form=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    h = dict(headers or {})
    data = None
    if key:
        h["Authorization"] = f"Bearer {key}"
    if body is not None:
        data = json.dumps(body)
        h["Content-Type"] = "application/json"
    if form is not None:
        data = urllib.parse.urlencode(form)
        h["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, path, body=data, headers=h)
    r = conn.getresponse()
    text = r.read().decode("utf-8", "replace")
    conn.close()
    return r.status, dict(r.getheaders()), text


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line; here, after the name, 12 and 13.
    return (int(fields[11]) + int(fields[12])) / TICKS


def follow(port, path, cookie, seen, stop):
    """Holds one stream open, reading whatever it sends, until `stop` is set."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=None)
    conn.request("GET", path, headers={"Cookie": cookie, "Accept": "text/event-stream"})
    r = conn.getresponse()
    first = b""
    seen.append((r.status, r.getheader("content-type") or ""))
    while not stop.is_set():
        line = r.fp.readline()
        if not line:
            break
        if len(first) < 200:
            first += line
        if b"refused" in line:
            seen.append(("refused", line.decode()))
    conn.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", required=True)
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--records", type=int, default=200)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--settle", type=float, default=5)
    a = p.parse_args()

    work = tempfile.mkdtemp(prefix="sb-console-bench-")
    port = free_port()
    env = dict(os.environ)
    env["SWITCHBOARD_MASTER_KEY"] = base64.b64encode(os.urandom(32)).decode()
    env["SWITCHBOARD_LOG"] = "warn"
    env.pop("DATABASE_URL", None)
    log = open(os.path.join(work, "serve.log"), "w+")
    server = subprocess.Popen(
        [a.binary, "serve", "--listen", f"127.0.0.1:{port}",
         "--database", f"sqlite://{work}/bench.db", "--tenant-requests-per-second", "100000"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    stop = threading.Event()
    threads = []
    try:
        admin = None
        for _ in range(300):
            log.seek(0)
            m = re.search(r"admin key \(shown once; it manages tenants\): (\S+)", log.read())
            if m:
                admin = m.group(1)
            try:
                if admin and request(port, "GET", "/openapi.json")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            sys.exit("the server did not start: see " + log.name)
        s, _, body = request(port, "POST", "/v1/tenants", admin, {"id": "bench"})
        assert s == 201, body
        s, _, body = request(port, "POST", "/v1/tenants/bench/api-keys", admin, {"label": "bench"})
        key = json.loads(body)["key"]
        tool = {"name": "note", "description": "Notes a thing", "parameters": [
            {"name": "what", "type": "string", "required": True}],
            "actions": [{"type": "context.set", "data": {"notes[+]": "{{params.what}}"}}],
            "on_success": [{"type": "respond", "message": "Noted."}]}
        s, _, body = request(port, "POST", "/v1/tools", key, tool)
        assert s == 201, body
        s, _, body = request(port, "PUT", "/v1/agents/desk", key,
                             {"instructions": "Take notes.", "default": True, "tools": [{"tool": "note"}]})
        assert s == 200, body
        s, _, body = request(port, "POST", "/v1/calls", key, {"call_id": "bench"})
        assert s in (200, 201), body
        for i in range(a.records):
            s, _, body = request(port, "POST", "/v1/calls/bench/invocations", key,
                                 {"function_call_id": f"fc-{i}", "name": "note",
                                  "arguments": {"what": f"thing {i} " + "x" * 200}})
            assert s == 200, body
        cookies = []
        for _ in range(max(1, -(-a.streams // STREAMS_PER_SESSION))):
            s, h, body = request(port, "POST", "/console/signin", form={"key": key})
            assert s == 303, (s, body)
            set_cookie = {k.lower(): v for k, v in h.items()}["set-cookie"]
            cookies.append(set_cookie.split(";")[0])
        seen = []
        path = f"/console/calls/bench/events?after={a.records}"
        for i in range(a.streams):
            cookie = cookies[i // STREAMS_PER_SESSION]
            t = threading.Thread(target=follow, args=(port, path, cookie, seen, stop), daemon=True)
            t.start()
            threads.append(t)
        time.sleep(a.settle)
        opened = sum(1 for s in seen if s[0] == 200)
        refused = [s for s in seen if s[0] == "refused"]
        if opened != a.streams or refused:
            sys.exit(f"only {opened} of {a.streams} streams opened ({refused[:1]})")
        before = cpu_seconds(server.pid)
        t0 = time.monotonic()
        time.sleep(a.seconds)
        used = cpu_seconds(server.pid) - before
        window = time.monotonic() - t0
        alive = sum(1 for t in threads if t.is_alive())
        print(f"{a.streams} idle streams of a call with {a.records} records, {window:.0f} s: "
              f"server CPU {used:.2f} s = {100 * used / window:.1f}% of one core "
              f"({alive} streams still open)")
    finally:
        stop.set()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
